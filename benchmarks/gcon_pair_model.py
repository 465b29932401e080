"""What a GCON edge pair can read once the noise's isotropy is counted: a model of the noise term.

Theorem 1's noise term charges β·Σ_j ‖Δb_j‖ (the edge moves b_j(D) = −Σ_i z_i ℓ'(z_iᵀθ_j; y_ij) − n1·λ·θ_j
by Δb_j at a fixed output), the privacy loss at the one output where every b̂_j ∥ Δb_j. At any other
output the loss is β·Σ_j (‖b_j + Δb_j‖ − ‖b_j‖) ≈ β·Σ_j ‖Δb_j‖·u_j, u_j = cos(b_j, Δb_j), and b_j is
isotropic in d = s·d1 dimensions: u_j has the law of one coordinate of a uniform point on the sphere
(≈ N(0, 1/d)), independently in each column. Δb_j itself moves with θ_j only inside the span of the
moved rows Δz_i and their z_i (a few directions, fixed by the pair), so the model fixes it.

The model pair: c columns, column j shifted by a fixed Δ_j with β‖Δ_j‖ = S_j, b_j of density
∝ exp(−β‖b‖). Its exact ε at δ is computed by Monte Carlo of the privacy loss
L = Σ_j (√(r_j² + 2 r_j S_j u_j + S_j²) − r_j) (β = 1 units; r_j ~ Gamma(d, 1)):
δ(ε) = E[(1 − e^{ε − L})₊] under world 0, bisected for ε (the pair is symmetric by reflection).

S_j are set at what the valid θ bound allows (``gcon_ceiling.py``): each column at most
βΨ·(max_y sup_{|x| ≤ t} |ℓ'(x; y)| + c2·t), all columns together at most βΨ·(S(t) + c·c2·t) (the
label-aware reach), filled column by column (the largest Σ S_j², the worst case for a fixed total).
The model grants ψ = Ψ, Δz_i ∥ θ_j, the Jacobian term ε_J whole, and a Δb_j of full norm at every
output; it is a model of the pair that reads most, not a proof (a Δb_j whose sign follows b_j folds
u_j onto |u_j|: at most twice the tail mass).

    nice -n 10 python benchmarks/gcon_pair_model.py
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gcon_ceiling import row_sum  # noqa: E402
from graphs.datasets import load  # noqa: E402
from targets import base as targets  # noqa: E402


def loss_samples(shifts: np.ndarray, d: int, n: int, seed: int = 0) -> np.ndarray:
    """n draws of the model pair's privacy loss L under world 0 (β = 1 units)."""
    rng = np.random.default_rng(seed)
    total = np.zeros(n)
    for s in shifts:
        r = rng.gamma(d, 1.0, n)
        u = 2.0 * rng.beta((d - 1) / 2.0, (d - 1) / 2.0, n) - 1.0 if d > 1 else rng.choice([-1.0, 1.0], n)
        total += np.sqrt(np.maximum(r * r + 2.0 * r * s * u + s * s, 0.0)) - r
    return total


def epsilon_at(losses: np.ndarray, delta: float) -> float:
    """The smallest ε with E[(1 − e^{ε − L})₊] ≤ δ (bisection)."""
    def hockey(eps: float) -> float:
        return float(np.mean(np.clip(1.0 - np.exp(eps - losses), 0.0, None)))
    lo, hi = 0.0, float(losses.max())
    if hockey(0.0) <= delta:
        return 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if hockey(mid) > delta else (lo, mid)
    return hi


def column_shifts(det: dict, t: float) -> np.ndarray:
    """S_j (β units): each column at its cap, all together at the label-aware reach (module docstring)."""
    c, c2, beta, sens = det["classes"], det["c2"], det["beta"], det["sensitivity"]
    if det["loss"] == "msm":
        cap = 1.0 / (1.0 + math.exp(-t)) / c + c2 * t
    else:
        hd = det["huber_delta"]
        cap = (1.0 + t) / math.sqrt(1.0 + ((1.0 + t) / hd) ** 2) / c + c2 * t
    total = row_sum(det["loss"], c, det.get("huber_delta", 0.2), t) + c * c2 * t
    out, left = [], total
    for _ in range(c):
        out.append(min(cap, left))
        left -= out[-1]
    return beta * sens * np.array(out)


def model(graph, *, epsilon: float, n: int = 400_000, **params) -> dict[str, float]:
    claim = targets.build("gcon", epsilon=epsilon, **params).claim(graph)
    det = claim.to_dict()["details"]
    eps_j = min(det["eps_lambda"], (1.0 - det["omega"]) * epsilon)
    shifts = column_shifts(det, det["theta_bound"])
    losses = loss_samples(shifts, det["d"], n)
    eps_pair = epsilon_at(losses, claim.delta)
    return {"claim": claim.epsilon, "delta": claim.delta, "d": det["d"], "c": det["classes"],
            "charged": float(shifts.sum()), "aligned": (eps_j + float(shifts.sum())) / claim.epsilon,
            "eps_pair": eps_pair, "share": (eps_j + eps_pair) / claim.epsilon,
            "share_noise": eps_pair / (claim.epsilon - eps_j)}


CONFIGS = [
    ("csbm", 1.0, {}),
    ("csbm", 4.0, {"loss": "huber", "huber_delta": 0.1}),
    ("csbm", 1.0, {"loss": "huber", "huber_delta": 0.1, "steps": "1"}),
    ("Cora", 4.0, {"loss": "huber", "huber_delta": 0.1, "steps": "1", "lam": 0.01}),
    ("Cora", 1.0, {"steps": "inf", "lam": 0.01}),
    ("Cora", 4.0, {"loss": "huber", "huber_delta": 0.1, "steps": "1", "lam": 0.01, "encoder_hidden": 8}),
    ("csbm", 4.0, {"loss": "huber", "huber_delta": 0.1, "steps": "1", "encoder_hidden": 8}),
    ("csbm:classes=2", 4.0, {"loss": "huber", "huber_delta": 0.1, "steps": "1", "encoder_hidden": 8}),
    ("csbm:classes=2", 8.0, {"loss": "huber", "huber_delta": 0.1, "steps": "1", "encoder_hidden": 8}),
]


def main() -> int:
    print("| dataset | ε | options | d | c | δ | claim ε | ceiling (aligned, valid θ bound) | exact ε of the model pair | "
          "model share of the claim |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for ds, eps, params in CONFIGS:
        r = model(load(ds), epsilon=eps, **params)
        opts = " ".join(f"{k}={v}" for k, v in params.items()) or "defaults"
        print(f"| {ds} | {eps:g} | {opts} | {r['d']} | {r['c']} | {r['delta']:.2g} | {r['claim']:.3f} | "
              f"{r['aligned']:.3f} | {r['eps_pair']:.3f} | {r['share']:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
