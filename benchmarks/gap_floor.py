"""GAP's per-trial cost against its noise-draw floor on a large graph (issue #35's acceptance measure).

One process, one thread: ``setup_run`` of the dataset, ``prepare``, one warm-up batch (its fresh
buffers fault their pages in), then `--rounds` rounds, each of: the floor (one trial's own draws,
replayed into preallocated buffers by ``throughput.draw_floor``, best of 4, by CPU and by wall
clock), and one ``fit_batch`` of `--batch` trials (the audit's batch) followed by the attack's
``score_batch``. Per trial it prints the best round's CPU (``time.process_time``: user + system)
and wall time of ``fit_batch`` and of ``fit_batch + score_batch``, each with its ratio to the
floor, and the batch's minor page faults and system CPU; and the load average.

    nice -n 10 python benchmarks/gap_floor.py --dataset csbm:n=1000000

Not a test: timings depend on the machine (and on what else runs on it).
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attacks import base as attacks  # noqa: E402
from audit.play.game import AuditSpec, setup_run, trial_seed  # noqa: E402
from canaries import base as canaries  # noqa: E402
from throughput import draw_floor  # noqa: E402


def _usage() -> tuple[float, float, int]:
    """(CPU s, system CPU s, minor faults) of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return time.process_time(), r.ru_stime, r.ru_minflt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="csbm:n=1000000")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    spec = AuditSpec(target="gap", dataset=args.dataset, attack="mechanism-lrt", level="mechanism",
                     canary="random-edge")
    graph, target, _ = setup_run(spec)
    pair = canaries.make("random-edge").worlds(graph, np.random.default_rng([0, 0xCA4A]), target)
    world = pair.world(1)
    target.prepare(world)
    attack = attacks.make("mechanism-lrt")
    attack.bind_target(target)
    b = args.batch

    def batch(r: int) -> dict[str, float]:
        gens = [torch.Generator().manual_seed(trial_seed(0, i)) for i in range(b * r, b * r + b)]
        (c0, s0, f0), w0 = _usage(), time.perf_counter()
        releases = target.fit_batch(world, gens)
        (c1, s1, f1), w1 = _usage(), time.perf_counter()
        attack.score_batch(releases, pair, graph)
        c2, w2 = time.process_time(), time.perf_counter()
        return {"fit cpu": (c1 - c0) / b, "fit wall": (w1 - w0) / b, "fit+score cpu": (c2 - c0) / b,
                "fit+score wall": (w2 - w0) / b, "faults": (f1 - f0) / b, "sys": (s1 - s0) / b}

    batch(0)  # warm-up: the first batch's buffers are fresh pages
    rows, floor_cpu, floor_wall = [], [], []
    for r in range(1, args.rounds + 1):
        floor_cpu.append(draw_floor(target, world, 0, repeats=4, clock=time.process_time)[0])
        floor_wall.append(draw_floor(target, world, 0, repeats=4)[0])
        rows.append(batch(r))
    fc, fw = min(floor_cpu), min(floor_wall)
    best = {k: min(row[k] for row in rows) for k in rows[0]}
    print(f"{args.dataset}, batch {b}, best of {args.rounds} rounds, load {os.getloadavg()[0]:.1f}; per trial:")
    print(f"  floor: CPU {fc:.4f} s, wall {fw:.4f} s")
    for what in ("fit", "fit+score"):
        print(f"  {what}: CPU {best[what + ' cpu']:.4f} s ({best[what + ' cpu'] / fc:.2f}× floor), "
              f"wall {best[what + ' wall']:.4f} s ({best[what + ' wall'] / fw:.2f}× floor)")
    print(f"  fit: {best['faults']:.0f} minor faults, {best['sys']:.4f} s system CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
