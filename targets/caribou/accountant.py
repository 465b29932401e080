"""CARIBOU's privacy formulas (specs/caribou.md §3): the sensitivities of Eq. 6/8 and the
convergent multiplier M(K, C_L) with the PAM options (see :mod:`targets.caribou`)."""
from __future__ import annotations

import math


# ---------------------------------------------------------------------------------------------
# the paper's formulas (specs/caribou.md §3)
# ---------------------------------------------------------------------------------------------
def _f(x: float) -> float:
    return x / math.sqrt(x + 1) - x / math.sqrt(x + 2)


def c_of(d: float) -> float:
    """C(D) of Eq. 7: f(D) for D > 3, f(3) for 1 ≤ D ≤ 3."""
    return _f(d) if d > 3 else _f(3.0)


def edge_sensitivity(d_min: int, contraction: float, alpha1: float) -> float:
    """Δ_e, Eq. 6 (Theorem 8)."""
    d = float(d_min)
    bracket = 1 / ((d + 1) * (d + 2)) + c_of(d) / math.sqrt(d + 1) + 1 / (math.sqrt(d + 2) * math.sqrt(d + 1))
    return math.sqrt(2) * contraction * alpha1 * bracket


def node_sensitivity(d_min: int, d_max: int, n: int, contraction: float, alpha1: float) -> float:
    """Δ_n, Eq. 8 (Theorem 9)."""
    d = float(d_min)
    alpha2 = 1.0 - alpha1
    bracket = (math.sqrt(d_max) / ((d + 1) * (d + 2)) + c_of(d) * math.sqrt(d_max) / math.sqrt(d + 1)
               + 1 / math.sqrt(d + 2))
    return 1 + alpha2 * contraction * 2 * n / (n + 1) + alpha1 * contraction * bracket


def convergent_multiplier(hops: int, contraction: float) -> float:
    """M(K, γ) = min{K, (1 − γ^K)/(1 + γ^K) · (1 + γ)/(1 − γ)} (§3.2); K when γ = 1."""
    if contraction >= 1:
        return float(hops)
    g_k = contraction**hops
    return min(float(hops), (1 - g_k) / (1 + g_k) * (1 + contraction) / (1 - contraction))


def compositions(hops: int, contraction: float, pam: str) -> float:
    """The effective number of Gaussian compositions the claim charges (PAM, §3.5)."""
    if pam == "m":
        return convergent_multiplier(hops, contraction)
    if pam == "kprime":
        return min(float(hops), (1 + contraction) / (1 - contraction)) if contraction < 1 else float(hops)
    return float(hops)  # linear
