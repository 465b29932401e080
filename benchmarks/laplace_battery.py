"""False-alarm rates and power of the declared check's Laplace battery (audit/declared_model/declared_laplace.py),
beside the Gaussian battery's on the same deviations of scale.

Each row plays ``check_declared`` (n releases per world, as the game: 16) on csbm with the edge of
tests/test_declared_laplace.py, over seeds; a check fails at alpha when its smallest p-value is below
alpha / (its test count) or an exact test failed. False alarms are counted on the correct mechanisms
(one Laplace step, two independent Laplace steps); power on the deviants of tests/laplace_deviants.py
and, for the scale, the same factor applied to the Gaussian reference of tests/deviants.py.

    nice -n 10 python benchmarks/laplace_battery.py --seeds 100 --power-seeds 20 > /tmp/laplace_battery.txt
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this checkout's packages, and the tests' targets

import deviants  # noqa: E402
import laplace_deviants as ld  # noqa: E402
from audit.play import data  # noqa: E402
from audit.declared_model import declared
from canaries.edge import ExplicitEdge  # noqa: E402
from graphs.ops import degrees  # noqa: E402

ALPHAS = (1e-3, 0.01, 0.05)


def scaled(base: type, factor: float) -> type:
    """`base` releasing its noise × `factor` while declaring the same law."""
    if issubclass(base, ld.HonestLaplace):
        return type(f"LaplaceScale{factor}", (base,), {"draws": lambda self, shape, b, rng: [ld.laplace(shape, factor * b, rng)]})
    return type(f"GaussianScale{factor}", (base,), {
        "noise": lambda self, shape, std, graph, rng: base.noise(self, shape, factor * std, graph, rng),
        "declared_mean": _cached_mean})


def _cached_mean(self, graph):
    """The Gaussian reference's declared mean, computed once per graph object."""
    cache = self.__dict__.setdefault("_means", {})
    if id(graph) not in cache:
        cache[id(graph)] = (graph, deviants.Honest.declared_mean(self, graph))
    return cache[id(graph)][1]


def fails(check: declared.DeclaredCheck) -> dict[float, bool]:
    """Whether the check fails at each alpha (Bonferroni over its p-valued tests, exact tests as run)."""
    tests = [t for s in check.steps for t in s.tests]
    ps = [t.p for t in tests if t.p is not None]
    exact = any(t.p is None and not t.passed for t in tests)
    return {a: exact or (bool(ps) and min(ps) < a / len(ps)) for a in ALPHAS}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--power-seeds", type=int, default=30)
    ap.add_argument("--n", type=int, default=declared.DEFAULT_N)
    args = ap.parse_args()
    g = data.load("csbm")
    top = int(degrees(g).argmax())
    nbrs = set(g.edge_index[1][g.edge_index[0] == top].tolist())
    pair = ExplicitEdge(top, next(i for i in range(g.num_nodes) if i != top and i not in nbrs)).worlds(
        g, np.random.default_rng(0))
    rows = [("correct: one Laplace step", ld.HonestLaplace, args.seeds),
            ("correct: two independent Laplace steps", ld.TwoSteps, args.seeds // 2),
            ("Gaussian noise declared Laplace", ld.GaussianNoise, args.power_seeds),
            ("one Laplace row broadcast over rows", ld.RowBroadcast, args.power_seeds),
            ("one Laplace draw per node over its entries", ld.EntryBroadcast, args.power_seeds),
            ("two steps sharing one draw", ld.SharedSteps, args.power_seeds)]
    for f in (0.9, 0.95, 0.97):
        rows += [(f"Laplace scale × {f}", scaled(ld.HonestLaplace, f), args.power_seeds),
                 (f"Gaussian std × {f} (Gaussian battery)", scaled(deviants.Honest, f), args.power_seeds)]
    print(f"| mechanism | seeds | n per world | fails at α = {' / '.join(f'{a:g}' for a in ALPHAS)} | s per check |")
    print("|---|---|---|---|---|")
    for label, cls, seeds in rows:
        t0 = time.time()
        counts = dict.fromkeys(ALPHAS, 0)
        for s in range(seeds):
            check = declared.check_declared(cls(), pair, seed=10_000 + s, n=args.n, alpha=1e-3)
            for a, f in fails(check).items():
                counts[a] += f
        per = (time.time() - t0) / seeds
        print(f"| {label} | {seeds} | {args.n} | {' / '.join(str(counts[a]) for a in ALPHAS)} | {per:.2f} |", flush=True)


if __name__ == "__main__":
    main()
