"""G-MIA (Olatunji et al.) on Cora against a non-private GCN, TSTF setting: the attack's AUC next
to the published 0.754 (GCN, TSTF), over seeds.

    python benchmarks/gmia_published.py [--seeds 0 1 2]

The full-size run behind ``tests/test_gmia.py::test_cora_tstf_reaches_the_published_level`` (marked
slow); its dated output is ``benchmarks/gmia_published.md``.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attacks.gmia import run_gmia  # noqa: E402
from audit.play.data import load  # noqa: E402
from targets.gcn import NonPrivateGCN  # noqa: E402

PUBLISHED_AUC = 0.754  # Olatunji et al., GCN on Cora, TSTF (specs/gmia.md)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    a = p.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# G-MIA on Cora, non-private GCN, TSTF ({date.today().isoformat()}, commit {commit})\n")
    print(f"Published AUC: {PUBLISHED_AUC}. Command: `python benchmarks/gmia_published.py --seeds "
          f"{' '.join(map(str, a.seeds))}`\n")
    print("| seed | AUC | TPR @ 1% FPR | target train acc | target test acc | members | s |")
    print("|---|---|---|---|---|---|---|")
    graph = load("cora")
    for seed in a.seeds:
        t0 = time.time()
        r = run_gmia(NonPrivateGCN(), graph, rng=seed)
        print(f"| {seed} | {r['auc']:.3f} | {r['tpr_at_fpr_1pct']:.3f} | {r['target_train_accuracy']:.3f} | "
              f"{r['target_test_accuracy']:.3f} | {r['n_members']} | {time.time() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
