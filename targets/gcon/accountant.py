"""GCON's accountant: Theorem 1's calibration and its ε, and the objective's noise law."""
from __future__ import annotations

import math

import torch
from scipy.stats import gamma as gamma_dist

# ---------------------------------------------------------------------------------------------
# accountant (spec §3.1-3.3)
# ---------------------------------------------------------------------------------------------
def psi_single(alpha: float, m: float) -> float:
    """Ψ(Z_m) = 2(1-α)/α·(1 − (1-α)^m) (Lemma 2); 2(1-α)/α for m = ∞; 0 for m = 0."""
    if math.isinf(m):
        return 2.0 * (1.0 - alpha) / alpha
    return 2.0 * (1.0 - alpha) / alpha * (1.0 - (1.0 - alpha) ** m)


def psi(alpha: float, steps: tuple[float, ...]) -> float:
    """Ψ(Z) = (1/s) Σ_i Ψ(Z_{m_i}) (Eq. 20)."""
    return sum(psi_single(alpha, m) for m in steps) / len(steps)


def calibrate(epsilon: float, delta: float, *, c: int, d: int, n1: int, psi: float,
              c1: float, c2: float, c3: float, lam: float, omega: float = 0.9,
              xi: float = 1e-6, lam_margin: float = 1.0) -> dict[str, float]:
    """Theorem 1's recipe (spec §3.2 steps 2-7): Λ (possibly raised), Λ', β, c_θ, ε_Λ, c_sf.

    ``lam_margin`` > 1 raises Λ to a multiple of its lower bound (the spec's [REC]; the paper's
    Eq. 22 is ``lam_margin = 1``)."""
    c_sf = float(gamma_dist.isf(delta / c, a=d))
    lam_bound = c * c2 * psi * c_sf / (n1 * omega * epsilon)
    lam_eff = max(lam, lam_margin * lam_bound + xi)
    c_theta = (n1 * omega * epsilon * c1 + c * c1 * psi * c_sf) / (n1 * omega * epsilon * lam_eff - c * c2 * psi * c_sf)
    eps_lam = c * d * math.log1p((2 * c2 + c3 * c_theta) * psi / (d * n1 * lam_eff))
    if eps_lam <= (1.0 - omega) * epsilon:
        lam_prime = 0.0
    else:
        lam_prime = c * (2 * c2 + c3 * c_theta) * psi / (n1 * (1.0 - omega) * epsilon) - lam_eff
    beta = max(epsilon - eps_lam, omega * epsilon) / (c * (c1 + c2 * c_theta) * psi)
    return {"c_sf": c_sf, "lam_bound": lam_bound, "lam": lam_eff, "lam_raised": lam_eff > lam,
            "c_theta": c_theta, "eps_lambda": eps_lam, "lam_prime": lam_prime, "beta": beta}


def theorem_epsilon(epsilon: float, omega: float, eps_lam: float, beta: float, *, c: int,
                    psi: float, c1: float, c2: float, c_theta: float) -> float:
    """Theorem 1's ε of the calibrated run: Jacobian part min(ε_Λ, (1-ω)ε) + noise part cβ(c1+c2c_θ)Ψ."""
    return min(eps_lam, (1.0 - omega) * epsilon) + c * beta * (c1 + c2 * c_theta) * psi


def accountant_at(c_theta: float, *, beta: float, lam_total: float, c: int, d: int, n1: int,
                  psi: float, c1: float, c2: float, c3: float) -> tuple[float, float]:
    """(ε(c_θ), δ(c_θ)) of spec §3.3 for a run with noise rate β and regulariser Λ+Λ'."""
    eps = c * d * math.log1p((2 * c2 + c3 * c_theta) * psi / (d * n1 * lam_total)) \
        + c * beta * (c1 + c2 * c_theta) * psi
    tail = beta * n1 * (lam_total * c_theta - c1)
    delta = c * float(gamma_dist.sf(tail, a=d)) if tail > 0 else float(c)
    return eps, delta


def reverse_epsilon(delta: float, *, beta: float, lam_total: float, c: int, d: int, n1: int,
                    psi: float, c1: float, c2: float, c3: float) -> tuple[float, float, float]:
    """Spec §3.3: min ε(c_θ) s.t. δ(c_θ) ≤ δ. ε grows and δ falls with c_θ, so the optimum is the
    c_θ where c·P[Gamma(d) > βn1((Λ+Λ')c_θ − c1)] = δ. Returns (ε, δ(c_θ), c_θ)."""
    if math.isinf(beta):
        return 0.0, 0.0, math.inf
    tail = float(gamma_dist.isf(delta / c, a=d))
    c_theta = (tail / (beta * n1) + c1) / lam_total
    eps, dlt = accountant_at(c_theta, beta=beta, lam_total=lam_total, c=c, d=d, n1=n1, psi=psi,
                             c1=c1, c2=c2, c3=c3)
    return eps, dlt, c_theta


def gradient_at_zero(loss: str, classes: int, huber_delta: float = 0.2) -> float:
    """max over y ∈ {0, 1} of |ℓ'(0; y)|: 1/(2c) for msm, δ_l/(c·√(1 + δ_l²)) for pseudo-Huber (y = 1)."""
    if loss == "msm":
        return 0.5 / classes
    if loss == "huber":
        return huber_delta / (classes * math.sqrt(1.0 + huber_delta**2))
    raise ValueError(f"unknown loss {loss!r}")


def theta_bound(noise_norm: float, *, n1: int, lam: float, grad0: float) -> float:
    """A bound on ‖θ_j‖ at the exact minimiser, for any unit-row Z and any 0/1 labels.

    The first-order condition of column j is n1·λ·θ_j = −b_j − G(θ_j), G(θ) = Σ_i z_i ℓ'(z_iᵀθ; y_ij),
    λ the solver's whole regulariser. ℓ' is non-decreasing (ℓ convex), so x·ℓ'(x) ≥ x·ℓ'(0) and
    ⟨G(θ), θ⟩ ≥ ⟨G(0), θ⟩; taking the inner product with θ_j gives
    n1·λ·‖θ_j‖² ≤ (‖b_j‖ + ‖G(0)‖)·‖θ_j‖, and ‖G(0)‖ ≤ n1·max_y |ℓ'(0; y)| (‖z_i‖ ≤ 1). Hence
    ‖θ_j‖ ≤ (‖b_j‖/n1 + max_y |ℓ'(0; y)|)/λ, with ``grad0`` = max_y |ℓ'(0; y)|
    (:func:`gradient_at_zero`)."""
    return (noise_norm / n1 + grad0) / lam


def theta_bound_whp(*, c_sf: float, beta: float, n1: int, lam: float, grad0: float) -> float:
    """:func:`theta_bound` on Lemma 9's event ‖b_j‖ ≤ c_sf/β for every column j, which has
    probability ≥ 1 − δ (each ‖b_j‖·β ~ Gamma(d, 1), c_sf its upper δ/c quantile): a bound on
    max_j ‖θ_j‖ that holds with probability ≥ 1 − δ for any features and labels. It is at most
    Theorem 1's c_θ (λ ≥ Λ, max_y |ℓ'(0; y)| ≤ c1, β ≥ ω·ε/(c·(c1 + c2·c_θ)·Ψ))."""
    return theta_bound(c_sf / beta, n1=n1, lam=lam, grad0=grad0)


def sample_noise(d: int, c: int, beta: float, rng: torch.Generator) -> torch.Tensor:
    """B (d×c, float64, CPU): columns i.i.d. with density ∝ exp(−β‖b‖₂) (Algorithm 2).

    Radius ~ Gamma(d, rate β) drawn as a sum of d Exp(1) variables (d is an integer), direction
    a normalised standard Gaussian; both from `rng`.
    """
    u = torch.rand(d, c, generator=rng, dtype=torch.float64).clamp_min(torch.finfo(torch.float64).tiny)
    radius = -torch.log(u).sum(0) / beta
    g = torch.randn(d, c, generator=rng, dtype=torch.float64)
    return g / g.norm(dim=0, keepdim=True) * radius

