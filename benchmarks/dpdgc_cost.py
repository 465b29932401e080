"""DPDGC's cost per trial in CPU seconds, on the default run's graph and target (csbm, edge GDP).

Three numbers, each in CPU milliseconds per trial of this process (``time.process_time``: steadier
than wall time on a shared machine; threads' CPU is summed):

* floor: the trial's own draws alone (init, T × (``randperm`` + n·h + h normals), Z's n·h
  float64 normals), replayed on fresh generators;
* fit_batch: ``fit_batch`` of ``--batch`` trials (the game's auto batch is 16);
* fit: one ``fit`` per trial (``--batch 1``).

    taskset -c 1 python benchmarks/dpdgc_cost.py          # one core: no help from the thread groups

Not a test: timings depend on the machine (and on what else runs on it).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.game import AuditSpec, setup_run, trial_seed  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--single", type=int, default=4, help="trials of the one-fit-per-trial measurement")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    graph, target, claim = setup_run(AuditSpec(target="dpdgc"))
    target.prepare(graph)
    n, h = graph.num_nodes, target.config.hidden
    steps, m = claim.details["steps_encoder"], claim.details["num_train"]

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

    def batched() -> float:
        gens = [torch.Generator().manual_seed(trial_seed(0, i)) for i in range(args.batch)]
        c0 = time.process_time()
        target.fit_batch(graph, gens)
        return (time.process_time() - c0) / args.batch * 1e3

    def single() -> float:
        c0 = time.process_time()
        for i in range(args.single):
            target.fit(graph, torch.Generator().manual_seed(trial_seed(0, i)))
        return (time.process_time() - c0) / args.single * 1e3

    for _ in range(args.repeats):
        fl, fb, f1 = floor(), batched(), single()
        print(f"floor {fl:.1f}  fit_batch({args.batch}) {fb:.1f} ({fb / fl:.1f}× floor)  "
              f"fit {f1:.1f} ({f1 / fl:.1f}× floor)  CPU ms per trial", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
