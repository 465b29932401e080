"""The exact ε of dpsgd-gcn's ``normalised-by-batch-size`` bug at q = 1 (issue #45; Opacus #571).

At q = 1 the batch is every one of the N training examples, E = N, and the canary (a virtual example)
makes it N + 1. In the trace's units the release of a step is (S + z)·E/B: world 0 (B = N) gives
r + z, world 1 gives (r + c + z)·ρ with ρ = N/(N + 1), r the rest of the batch (known to the trace's
adversary, as for gradient-lrt). Less r, the T steps stack into one D = d·T dimensional pair

    x ~ N(0, s²I)   vs   x ~ N(m, s²ρ²I),   ‖m‖² = Σ_t ‖(c_t·N − r_t)/(N + 1)‖²,

whatever the adaptivity when ‖m_t‖ is the same at every step. Its privacy loss is a quadratic,
L = A − κ‖x − c₀‖²/(2s²) with κ = 1/ρ² − 1 and c₀ = m/(κρ²), so ‖x − c₀‖² is a scaled noncentral
χ²_D in each world and δ(ε) is exact in both directions (scipy's ncx2). Four pairs of neighbouring
datasets on which the bug is evaluated, each a lower bound on its ε (a sup over pairs).

Run: python -m benchmarks.normalised_bug
"""
import logging
import math

from scipy.stats import chi2, ncx2, norm

from audit.play.data import load
from targets.dpsgd_gcn import DPSGDGCN

logging.disable(logging.WARNING)

def deltas(eps: float, D: int, rho: float, m2: float, s: float) -> tuple[float, float]:
    """δ(ε) of world 1 over world 0 and of 0 over 1 (module docstring)."""
    kappa = 1 / rho**2 - 1
    c02 = m2 / (kappa * rho**2) ** 2  # ‖c₀‖²
    mc2 = m2 * (1 - 1 / (kappa * rho**2)) ** 2  # ‖m − c₀‖²
    A = -D * math.log(rho) + kappa * c02 / (2 * s * s) - m2 / (2 * s * s * rho * rho)

    def cdf0(r2: float) -> float:  # P0[‖x − c₀‖² ≤ r2]
        return ncx2.cdf(r2 / s**2, D, c02 / s**2) if c02 > 0 else chi2.cdf(r2 / s**2, D)

    def cdf1(r2: float) -> float:
        return ncx2.cdf(r2 / (s * rho) ** 2, D, mc2 / (s * rho) ** 2) if mc2 > 0 else chi2.cdf(r2 / (s * rho) ** 2, D)

    r2 = 2 * s * s * (A - eps) / kappa  # L > ε ⟺ ‖x − c₀‖² < r2
    d10 = cdf1(r2) - math.exp(eps) * cdf0(r2) if r2 > 0 else 0.0
    r2 = 2 * s * s * (A + eps) / kappa  # L < −ε ⟺ ‖x − c₀‖² > r2
    d01 = (1 - cdf0(r2)) - math.exp(eps) * (1 - cdf1(r2)) if r2 > 0 else 1 - math.exp(eps)
    return d10, d01


def bisect(delta_at, delta: float) -> float:
    lo, hi = 0.0, 60.0
    if delta_at(0.0) <= delta:
        return 0.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_at(mid) > delta else (lo, mid)
    return lo


def main() -> None:
    g = load("csbm")
    t = DPSGDGCN(epsilon=4.0)
    p = t.plan(g)
    d, T, N, sig, delta = t.dimension(g), p["steps"], p["n_train"], p["noise_multiplier"], p["delta"]
    rho, D, s = N / (N + 1), d * T, sig  # units of C = 1: s = σC
    print(f"dpsgd-gcn default (q = 1): claim ε = 4 (σ = {sig:.4f}, T = {T}, N = {N}, d = {d}, δ = {delta:.4g})")
    mu = math.sqrt(T) / sig
    gauss = bisect(lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2), delta)
    print(f"| pair | exact ε |\n|---|---|\n| correct mechanism, Dirac canary (Gaussian, μ = √T/σ = {mu:.3f}) | {gauss:.3f} |")
    for label, m2 in (("bug, scale only (rest 0, canary gradient 0)", 0.0),
                      ("bug, Dirac canary, rest 0", T * rho**2),
                      ("bug, Dirac canary ⊥ rest, ‖rest‖ = N·C (aligned others)", T * 2 * N**2 / (N + 1) ** 2),
                      ("bug, canary against the rest, ‖rest‖ = N·C", T * (2 * N) ** 2 / (N + 1) ** 2)):
        print(f"| {label} | {bisect(lambda e: max(deltas(e, D, rho, m2, s)), delta):.3f} |")


if __name__ == "__main__":
    main()
