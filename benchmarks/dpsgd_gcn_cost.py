"""dpsgd-gcn's cost per trial in CPU seconds, on the default run's graph and target (csbm,
ε = 1, hidden 16, q = 1, T = 20 steps, d = 579), world 1 of the dirac-gradient canary (a canary
gradient on coordinate 0, its coin drawn every step).

Three numbers, each in CPU milliseconds per trial of this process (``time.process_time``):

* floor: the trial's own draws alone (init and canary seeds, per step the Poisson coins, the
  canary coin and d float64 normals), replayed on fresh generators;
* fit_batch: ``fit_batch`` of ``--batch`` trials (the game's auto batch on the trace view is 64);
* fit: one ``fit`` per trial (``--batch 1``).

    taskset -c 1 python benchmarks/dpsgd_gcn_cost.py

Runs on trees without ``fit_batch`` too (the base class loops over ``fit``). Not a test: timings
depend on the machine (and on what else runs on it).
"""
from __future__ import annotations

import sys
import time

import torch

from trial_cost import arguments, compare
from audit.play.game import AuditSpec, setup_run


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__, argv, batch=64, single=32)
    graph, target, _ = setup_run(AuditSpec(target="dpsgd-gcn"))
    plan = target.plan(graph)
    d, steps = target.dimension(graph), plan["steps"]
    m = int(graph.train_mask.sum())
    canary = torch.zeros(d)
    canary[0] = 1.0

    def floor(k: int = 64) -> float:
        gens = [torch.Generator().manual_seed(i) for i in range(k)]
        c0 = time.process_time()
        for gen in gens:
            torch.randint(0, 2**62, (2,), generator=gen)
            coins = torch.Generator().manual_seed(1)
            for _ in range(steps):
                torch.rand(m, generator=gen)
                torch.rand(1, generator=coins)
                torch.randn(d, generator=gen, dtype=torch.float64)
        return (time.process_time() - c0) / k * 1e3

    print(f"dpsgd-gcn on csbm: d = {d}, T = {steps}, q = {plan['sampling_rate']}, "
          f"batched = {getattr(target, 'batched', False)}")
    compare(target, graph, floor, args, canary_gradient=canary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
