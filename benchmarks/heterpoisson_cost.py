"""HeterPoisson's cost per trial in CPU seconds, on the default run's graph and target (csbm,
ε = 1, gin, hidden 128, q_b = 1, T = 9 steps, SML noise).

Three numbers, each in CPU milliseconds per trial of this process (``time.process_time``: steadier
than wall time on a shared machine):

* floor: the trial's own draws alone (init seed, per step the central and edge coins and the SML
  noise: one Exp(1) and d float64 normals), replayed on fresh generators;
* fit_batch: ``fit_batch`` of ``--batch`` trials (the game's auto batch on the trace view is 64);
* fit: one ``fit`` per trial (``--batch 1``).

    taskset -c 1 python benchmarks/heterpoisson_cost.py

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
    args = arguments(__doc__, argv, batch=64, single=16)
    graph, target, claim = setup_run(AuditSpec(target="heterpoisson"))
    target.prepare(graph)
    plan = target.plan(graph)
    d, steps, q = target.dimension(graph), plan["run_steps"], plan["sampling_rate"]
    m = int(graph.train_mask.sum())
    edges = int(graph.edge_index.size(1))

    def floor(k: int = 16) -> float:
        gens = [torch.Generator().manual_seed(i) for i in range(k)]
        c0 = time.process_time()
        for gen in gens:
            torch.randint(0, 2**62, (3,), generator=gen)
            for _ in range(steps):
                torch.rand(m, generator=gen)
                torch.rand(int(edges * q), generator=gen)  # about the in-edges of the central nodes
                torch.empty(1, dtype=torch.float64).exponential_(1.0, generator=gen)
                torch.randn(d, generator=gen, dtype=torch.float64)
        return (time.process_time() - c0) / k * 1e3

    print(f"heterpoisson on csbm: d = {d}, T = {steps}, q_b = {q}, batched = {getattr(target, 'batched', False)}")
    compare(target, graph, floor, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
