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

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from audit.game import AuditSpec, setup_run, trial_seed  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--single", type=int, default=32, help="trials of the one-fit-per-trial measurement")
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
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

    def batched() -> float:
        gens = [torch.Generator().manual_seed(trial_seed(0, i)) for i in range(args.batch)]
        c0 = time.process_time()
        target.fit_batch(graph, gens, canary_gradient=canary) if getattr(target, "batched", False) else \
            [target.fit(graph, g, canary_gradient=canary) for g in gens]
        return (time.process_time() - c0) / args.batch * 1e3

    def single() -> float:
        c0 = time.process_time()
        for i in range(args.single):
            target.fit(graph, torch.Generator().manual_seed(trial_seed(0, i)), canary_gradient=canary)
        return (time.process_time() - c0) / args.single * 1e3

    single()  # warm-up
    print(f"dpsgd-gcn on csbm: d = {d}, T = {steps}, q = {plan['sampling_rate']}, "
          f"batched = {getattr(target, 'batched', False)}")
    print("| repeat | draw floor | fit_batch of %d | one fit per trial |" % args.batch)
    print("|---:|---:|---:|---:|")
    for r in range(args.repeats):
        f, b, s = floor(), batched(), single()
        print(f"| {r + 1} | {f:.2f} | {b:.2f} ({b / f:.1f}×) | {s:.2f} ({s / f:.1f}×) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
