"""GAP's mechanism-level trial cost in CPU ms (Cora, edge level, mechanism-lrt), after ``prepare``.

Three numbers per trial (``time.process_time``, min and median over ``--repeats`` of 320 trials):
the floor (the trial's own draws: bound seed, one N × h normal draw per hop, the classifier and
query seeds, on fresh generators seeded as the game seeds trials), ``fit_batch`` of 16, and
``fit_batch`` + ``score_batch``; each with its ratio to the floor.

    taskset -c 1 python benchmarks/gap_cost.py

Not a test: timings depend on the machine (and on what else runs on it).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attacks import base as attacks  # noqa: E402
from audit.play.game import AuditSpec, setup_run, trial_seed  # noqa: E402
from canaries import base as canaries  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--batches", type=int, default=20, help="batches of 16 trials per repeat")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    spec = AuditSpec(target="gap", dataset="cora", attack="mechanism-lrt", level="mechanism", canary="random-edge")
    graph, target, _ = setup_run(spec)
    pair = canaries.make("random-edge").worlds(graph, np.random.default_rng([0, 0xCA4A]), target)
    target.prepare(graph)
    attack = attacks.make("mechanism-lrt")
    attack.bind_target(target)
    world = pair.world(1)
    shape, hops = (graph.num_nodes, target.config.hidden_dim), target.config.hops

    def gens(r: int) -> list[torch.Generator]:
        return [torch.Generator().manual_seed(trial_seed(0, i)) for i in range(16 * r, 16 * r + 16)]

    def floor() -> float:
        every = [g for r in range(args.batches) for g in gens(r)]
        c0 = time.process_time()
        for g in every:
            torch.randint(0, 2**62, (1,), generator=g)
            for _ in range(hops):
                torch.randn(shape, generator=g)
            torch.randint(0, 2**62, (1,), generator=g)
            torch.randint(0, 2**62, (1,), generator=g)
        return (time.process_time() - c0) / len(every) * 1e3

    def fit(score: bool) -> float:
        batches = [gens(r) for r in range(args.batches)]
        c0 = time.process_time()
        for rngs in batches:
            releases = target.fit_batch(world, rngs)
            if score:
                attack.score_batch(releases, pair, graph)
        return (time.process_time() - c0) / (16 * args.batches) * 1e3

    fit(True)  # warm-up: caches of the first batch
    res: dict[str, list[float]] = {"floor": [], "fit_batch": [], "fit_batch + score_batch": []}
    for _ in range(args.repeats):
        res["floor"].append(floor())
        res["fit_batch"].append(fit(False))
        res["fit_batch + score_batch"].append(fit(True))
    low = min(res["floor"])
    print("  ".join(f"{k}: min {min(v):.3f} median {sorted(v)[len(v) // 2]:.3f} ({min(v) / low:.2f}× floor)"
                    for k, v in res.items()), "CPU ms per trial")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
