"""Steinke, Nasr & Jagielski (2023)'s one-run bound, for :mod:`audit.stats.estimators.core`'s
``one-run``: the exact p-value of v correct guesses out of r among m canaries, the ε it certifies, the
grid of guess counts and the tie-free order of the scores.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import binom


_ONE_RUN_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)  # guesses as a fraction of m


# ---------------------------------------------------------------------------------------------
# one run (Steinke, Nasr & Jagielski 2023)
# ---------------------------------------------------------------------------------------------
def one_run_p_value(epsilon: float, delta: float, m: int, r: int, v: int) -> float:
    """p-value of "the mechanism is (ε, δ)-DP" after v correct guesses out of r, m canaries (§3)."""
    if v <= 0:
        return 1.0
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = binom.sf(v - 1, r, q)  # P[Bin(r, q) ≥ v]
    if delta == 0:
        return float(min(1.0, tail))
    i = np.arange(1, v + 1)
    a = np.max((binom.sf(v - i - 1, r, q) - tail) / i)
    return float(min(1.0, tail + a * delta * 2 * m))


def one_run_epsilon(m: int, r: int, v: int, delta: float, beta: float) -> float:
    """sup{ε ≥ 0 : p(ε, δ) ≤ β}, by bisection (p is increasing in ε)."""
    if one_run_p_value(0.0, delta, m, r, v) > beta:
        return 0.0
    lo, hi = 0.0, 1.0
    while one_run_p_value(hi, delta, m, r, v) <= beta:
        lo, hi = hi, hi * 2
        if hi > 200:
            return math.inf
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if one_run_p_value(mid, delta, m, r, v) <= beta:
            lo = mid
        else:
            hi = mid
    return lo


def tie_free_order(scores: np.ndarray, seed: int = 0) -> np.ndarray:
    """Ascending order of `scores` with ties broken by a fixed random permutation.

    The caller concatenates OUT canaries before IN canaries, so a stable sort would break ties by
    membership: with discrete scores (randomized response) the bottom guesses would be the OUT
    canaries among the tied ones and the top ones the IN canaries — information the guesser must
    not have. A label-independent random order among ties keeps the guesses a function of the
    scores alone."""
    perm = np.random.default_rng(seed).permutation(scores.size)
    return perm[np.argsort(scores[perm], kind="stable")]


def one_run_grid(m: int) -> list[int]:
    return sorted({max(2, int(round(f * m))) // 2 * 2 for f in _ONE_RUN_GRID if f * m >= 2})
