"""GCON's bound on ‖θ_j‖ at the exact minimiser (targets.gcon.accountant.theta_bound): it holds on every
release, is nearly attained by adversarial data, and a bound without the ℓ'(0) term fails."""
from __future__ import annotations

import pytest
import torch

from graphs.datasets import load
from targets.base import build
from targets.gcon import Problem, gradient_at_zero, sample_noise, solve_newton, theta_bound, theta_bound_whp


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("loss, extra", [("msm", {}), ("huber", {"huber_delta": 0.1})])
def test_released_theta_never_exceeds_the_bound(loss, extra):
    """200 fits on a small csbm: every column's ‖θ_j‖ ≤ (‖b_j‖/n1 + max_y |ℓ'(0; y)|)/λ with the run's
    own b_j, and max_j ‖θ_j‖ ≤ the claim's 1 − δ bound (δ = 1e-6: P[any of 200 exceeds] ≤ 2e-4)."""
    graph = load("csbm:n=120,features=8")
    target = build("gcon", epsilon=1.0, encoder_hidden=8, delta=1e-6, loss=loss, **extra)
    det = target.claim(graph).details
    seeds = range(200)
    releases = target.fit_batch(graph, [gen(s) for s in seeds])
    grad0 = gradient_at_zero(loss, det["classes"], det["huber_delta"])
    ratios = []
    for seed, release in zip(seeds, releases):
        theta = release.weights["theta"].double()
        b = sample_noise(det["d"], det["classes"], det["beta"], gen(seed))  # the fit's noise: same generator
        n1, lam = release.info["n1"], release.info["lam_solver"]
        assert release.info["exact_minimizer"]
        bound = torch.tensor([theta_bound(float(r), n1=n1, lam=lam, grad0=grad0) for r in b.norm(dim=0)])
        norms = theta.norm(dim=0)
        assert bool((norms <= bound * (1 + 1e-9)).all()), (seed, norms, bound)
        assert float(norms.max()) <= det["theta_bound"]
        ratios.append(float((norms / bound).max()))
    print(loss, max(ratios), det["theta_bound"], det["c_theta"])
    assert det["theta_bound"] <= det["c_theta"]
    assert max(ratios) > 0.3  # not vacuous on natural data either (≈ 0.49 for msm, 200 fits)


def _aligned_problem(noise_scale: float, lam: float, loss: str, seed: int) -> tuple[Problem, torch.Tensor]:
    """n1 copies of one unit row z, the label where |ℓ'(0; y)| is largest in every column (0 for msm,
    where ℓ'(0; 0) > 0; 1 for pseudo-Huber, where ℓ'(0; 1) < 0), and b_j = ±‖b_j‖·z with the sign of
    ℓ'(0; y): the noise and the loss's pull G(θ) = Σ z ℓ'(zᵀθ) point the same way, the case where the
    bound's inequalities meet."""
    n1, d, c = 50, 3, 2
    z = torch.nn.functional.normalize(torch.randn(d, generator=gen(seed), dtype=torch.float64), dim=0)
    radius = noise_scale * torch.rand(c, generator=gen(seed + 1), dtype=torch.float64)
    label, sign = (0.0, 1.0) if loss == "msm" else (1.0, -1.0)
    b = sign * z[:, None] * radius[None, :]
    y = torch.full((n1, c), label, dtype=torch.float64)
    return Problem(z.expand(n1, d).clone(), y, b, lam, loss, 0.1), radius


@pytest.mark.parametrize("loss", ["msm", "huber"])
def test_bound_is_nearly_attained_and_its_mutant_fails(loss):
    """On aligned data at a large λ (|zᵀθ| small, ℓ' near ℓ'(0)) ‖θ_j‖ reaches ≥ 0.95 of the bound;
    the mutant bound ‖b_j‖/(n1·λ), which drops max_y |ℓ'(0; y)|, is exceeded there."""
    grad0 = gradient_at_zero(loss, 2, 0.1)
    worst = 0.0
    for seed in range(20):
        problem, radius = _aligned_problem(noise_scale=2.0, lam=5.0, loss=loss, seed=seed)
        theta = solve_newton(problem, tol=1e-12)
        n1 = problem.z.size(0)
        for j in range(2):
            norm = float(theta[:, j].norm())
            bound = theta_bound(float(radius[j]), n1=n1, lam=problem.lam, grad0=grad0)
            assert norm <= bound * (1 + 1e-9)
            assert norm > float(radius[j]) / (n1 * problem.lam)  # the mutant
            worst = max(worst, norm / bound)
    assert worst >= 0.95


def test_whp_bound_is_below_theorem_1s_c_theta():
    """theta_bound_whp ≤ c_θ over configurations (λ ≥ Λ, max_y |ℓ'(0; y)| ≤ c1, β ≥ β at ω·ε)."""
    graph = load("csbm:n=120,features=8")
    for eps in (0.5, 4.0):
        for lam in (0.01, 0.2, 2.0):
            for loss, extra in (("msm", {}), ("huber", {"huber_delta": 0.5})):
                det = build("gcon", epsilon=eps, lam=lam, loss=loss, **extra).claim(graph).details
                again = theta_bound_whp(c_sf=det["c_sf"], beta=det["beta"], n1=det["n1"], lam=det["lam_solver"],
                                        grad0=gradient_at_zero(loss, det["classes"], det["huber_delta"]))
                assert again == pytest.approx(det["theta_bound"])
                assert 0 < det["theta_bound"] <= det["c_theta"] * (1 + 1e-12)
