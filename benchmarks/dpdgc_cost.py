"""DPDGC's cost per trial in CPU seconds, on the default run's graph and target (csbm, edge GDP).

Three numbers, each in CPU milliseconds per trial of this process (``time.process_time``: steadier
than wall time on a shared machine; threads' CPU is summed):

* floor: the trial's own draws alone (init, T × (``randperm`` + n·h + h normals), Z's n·h
  float64 normals), replayed on fresh generators;
* fit_batch: ``fit_batch`` of ``--batch`` trials (DPDGC's auto batch is 48);
* fit: one ``fit`` per trial (``--batch 1``).

    taskset -c 1 python benchmarks/dpdgc_cost.py          # one core: no help from the thread groups

Not a test: timings depend on the machine (and on what else runs on it).
"""
from __future__ import annotations

import sys
import time

import torch

from trial_cost import arguments, compare
from audit.play.game import AuditSpec, setup_run


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__, argv, batch=48, single=4)
    graph, target, claim = setup_run(AuditSpec(target="dpdgc"))
    target.prepare(graph)
    n, h = graph.num_nodes, target.config.hidden
    steps, m = claim.to_dict()["details"]["steps_encoder"], claim.to_dict()["details"]["num_train"]

    def floor(k: int = 8) -> float:
        gens = [torch.Generator().manual_seed(i) for i in range(k)]
        buf = torch.empty(n * h + h)
        c0 = time.process_time()
        for gen in gens:
            torch.rand(n, h, generator=gen), torch.rand(h, generator=gen), torch.randn(h, h, generator=gen)
            for _ in range(steps):
                torch.randperm(m, generator=gen)
                buf.normal_(0, 1.0, generator=gen)
            torch.randn(n, h, generator=gen, dtype=torch.float64)
        return (time.process_time() - c0) / k * 1e3

    compare(target, graph, floor, args, warm_up=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
