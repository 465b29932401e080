"""cp's validity on laws that make its test tight at every threshold (issue #24).

    /work/main/.venv/bin/python benchmarks/cp_stress_validity.py [reps] [trials per world]

jittered-rr: randomized response plus U(0, 1) jitter, so TPR(t) = e^ε FPR(t) at every threshold in
the top bin (each of cp's per-threshold tests runs at its full level); rr-3-levels: randomized
response with the "yes" answers split over two tied levels (ties at every threshold).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from audit.stats import estimators as est  # noqa: E402

D = 1e-5


def jittered_rr(rng, n, eps):
    p = math.exp(eps) / (1 + math.exp(eps))
    return (rng.random(n) > p) + rng.random(n), (rng.random(n) < p) + rng.random(n), math.log((p - D) / (1 - p))


def rr_3_levels(rng, n, eps):
    p = math.exp(eps) / (1 + math.exp(eps))
    o, i = (rng.random(n) > p).astype(float), (rng.random(n) < p).astype(float)
    return o * rng.integers(1, 3, n), i * rng.integers(1, 3, n), math.log((p - D) / (1 - p))


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rng = np.random.default_rng(11)
    print(f"| law | ε0 | true ε | share ε_lb > ε ({reps} reps, {n}/world) | median ε_lb |\n|---|---|---|---|---|")
    for name, f in (("jittered-rr", jittered_rr), ("rr-3-levels", rr_3_levels)):
        for e0 in (0.5, 1.3, 3.0):
            over, b = 0, []
            for _ in range(reps):
                o, i, t = f(rng, n, e0)
                x = est.estimate(o, i, delta=D, method="cp").eps_lb
                over += x > t
                b.append(x)
            print(f"| {name} | {e0} | {t:.3f} | {over / reps:.3f} | {np.median(b):.3f} |", flush=True)


if __name__ == "__main__":
    main()
