"""The cost per trial of GCON's default audit in CPU milliseconds (``time.process_time``): fit and
mechanism-lrt's score, on the default run's pair (csbm, ε = 1, the canary the run chooses: the
probe's witness, from ``--out``'s cached probe or probed now), trials on world 1.

For one ``fit`` per trial and ``fit_batch`` of each ``--batch`` (``score_batch`` on each batch, as
the game scores it), ``--trials`` trials per measurement, ``--repeats`` times; prints every repeat
and the medians.

    taskset -c 1 python benchmarks/gcon_cost.py

Runs on trees without ``GCON.fit_batch`` too (the base class loops over ``fit``). Not a test:
timings depend on the machine (and on what else runs on it).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attacks import base as attacks  # noqa: E402
from audit.play import witness_choice  # noqa: E402
from audit.play.game import AuditSpec, build_target, setup_run, trial_seed  # noqa: E402
from canaries import base as canaries  # noqa: E402
from targets import base as targets  # noqa: E402


def default_pair(out: str):
    """The default run's target and pair, built as :func:`audit.play.game.run_audit` builds them."""
    spec = AuditSpec(target="gcon")
    graph, target, _ = setup_run(spec)
    choice = witness_choice.choose(build_target(replace(spec, device="cpu")), graph, level="mechanism",
                              dataset=spec.dataset, out=out, params=spec.params)
    canary = canaries.auto_canary(target, graph, "mechanism-lrt")
    if choice.play:
        canary = choice.canary
        graph, target, _ = setup_run(replace(spec, target=choice.target_name, params=choice.params,
                                             dataset=choice.dataset))
    pair = canaries.make(canary).worlds(graph, np.random.default_rng([spec.seed, 0xCA4A]), targets.on_cpu(target))
    target.prepare(graph)
    return target, pair


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--batch", default="16,64", help="comma-separated fit_batch sizes")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default="results", help="folder of the cached canary probe")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    target, pair = default_pair(args.out)
    attack = attacks.make("mechanism-lrt")
    g = pair.g1
    print(f"gcon, default pair: n = {int(g.num_nodes)}, batched = {getattr(target, 'batched', False)}")

    def measure(k: int) -> tuple[float, float]:
        rngs = [torch.Generator().manual_seed(trial_seed(0, i)) for i in range(args.trials)]
        chunks = [rngs[i:i + k] for i in range(0, len(rngs), k)]
        c0 = time.process_time()
        releases = [target.fit_batch(g, c) if k > 1 else [target.fit(g, c[0])] for c in chunks]
        c1 = time.process_time()
        for rel in releases:
            attack.score_batch(rel, pair, g) if k > 1 else attack.score(rel[0], pair, g)
        c2 = time.process_time()
        return (c1 - c0) / args.trials * 1e3, (c2 - c1) / args.trials * 1e3

    sizes = [1] + [int(b) for b in args.batch.split(",") if b.strip()]
    seen: dict[int, list[tuple[float, float]]] = {k: [] for k in sizes}
    measure(1)  # warm-up
    for r in range(args.repeats):
        for k in sizes:
            fit, score = measure(k)
            seen[k].append((fit, score))
            print(f"repeat {r + 1}, batch {k}: fit {fit:.2f} ms, score {score:.2f} ms, total {fit + score:.2f} ms",
                  flush=True)
    print("| batch | fit ms/trial | score ms/trial | total ms/trial |\n|---:|---:|---:|---:|")
    for k in sizes:
        fit = statistics.median(f for f, _ in seen[k])
        score = statistics.median(s for _, s in seen[k])
        total = statistics.median(f + s for f, s in seen[k])
        print(f"| {k} | {fit:.2f} | {score:.2f} | {total:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
