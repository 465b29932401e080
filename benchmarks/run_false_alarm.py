"""False-alarm rate of the whole default ``run`` on targets whose true ε equals the claim (issue #24).

    /work/main/.venv/bin/python benchmarks/run_false_alarm.py --target gaussian [--seeds 200] [--trials auto]

Each seed plays what ``python -m audit run --target T --seed S`` plays (every option at its
default: ``--attack auto --canary auto --estimator auto --trials auto``; the seed changes the
canary's choice, the trials' noise and the held-out splits), in-process and fresh, and counts
VIOLATION verdicts. A correct claim that is exact (true ε = claim) should false-alarm at most
α = 5% of the time; with ≥ 200 seeds, ≤ 8% (α + 2 binomial standard errors). Also printed: which
estimator the default chose and how often, and the median ε_lb.
"""
from __future__ import annotations

import argparse
import collections
import math
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attacks.base import auto_attacks  # noqa: E402
from attacks.base import make as make_attack  # noqa: E402
from audit.play.game import AuditSpec, auto_trials, run_audit, setup_run  # noqa: E402


def default_run(target: str, seed: int, trials: str, out: Path) -> list:
    """The results of ``audit run --target target --seed seed --trials trials`` (as ``cmd_run``)."""
    spec = AuditSpec(target=target, seed=seed, trials=1000 if trials == "auto" else int(trials))
    graph, t, claim = setup_run(spec)
    results = []
    for attack in auto_attacks(t, graph):
        one = replace(spec, attack=attack)
        if trials == "auto":
            level = make_attack(attack).levels[0]
            one = replace(one, trials=auto_trials(claim, level, spec.confidence)[0])
        results.append(run_audit(one, out=out, progress=False, fresh=True))
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="gaussian", help="registry name or module:Class")
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--trials", default="auto")
    a = ap.parse_args()
    alarms, choices, bounds, claims = 0, collections.Counter(), [], set()
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for s in range(a.first_seed, a.first_seed + a.seeds):
            results = default_run(a.target, s, a.trials, Path(tmp))
            alarms += any(r.verdict == "VIOLATION" for r in results)
            for r in results:
                choices[r.method] += 1
                bounds.append(float(r.eps_lb))
                claims.add(round(float(r.claimed_epsilon), 4))
            if (s - a.first_seed + 1) % 20 == 0:
                print(f"  {s - a.first_seed + 1} seeds, {alarms} VIOLATION, {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    n = a.seeds
    se = math.sqrt(0.05 * 0.95 / n)
    print(f"| {a.target} | {sorted(claims)} | {a.trials} | {n} | {alarms} ({alarms / n:.3f}) | "
          f"{float(np.median(bounds)):.3f} | {dict(choices)} | {0.05 + 2 * se:.3f} |")
    print(f"({time.time() - t0:.0f}s)", file=sys.stderr)


if __name__ == "__main__":
    main()
