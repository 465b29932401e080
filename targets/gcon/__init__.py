"""GCON: edge-level DP graph convolution by objective perturbation.

Paper: Wei, Zhu, Xiao, Bao, Yang, Cai, Ooi, "GCON: Differentially Private Graph Convolutional
Network via Objective Perturbation" (arXiv 2407.05034, ICDE 2025); spec ``specs/gcon.md``.

Pipeline (Algorithm 1):

1. **Encoder** (edge-free, Algorithm 3): a 2-layer MLP Linear(d0→d1) → ReLU → Linear(d1→c) trained
   with cross-entropy on the labelled training nodes (Adam, early stopping on validation accuracy);
   every node is encoded with the first block and each row scaled to unit L2 norm (all-zero rows
   stay zero). With ``pseudo_labels`` every non-training node gets the encoder's argmax as a
   one-hot label, so the loss runs over n1 = n rows instead of n1 = n0.
2. **Propagation** (Eqs. 4-11): Ã = D⁻¹(A + I) (row-normalised, self-loops), R_m =
   (1-α)ÃR_{m-1} + αI, R_∞ = α(I − (1-α)Ã)⁻¹, Z = (1/s)[R_{m_1}X | … | R_{m_s}X], d = s·d1.
3. **Objective perturbation** (Eq. 13): Θ_priv = argmin (1/n1) Σ_i Σ_j ℓ(z_iᵀθ_j; y_ij)
   + (Λ/2)‖Θ‖² + (1/n1)⟨B, Θ⟩ + (Λ'/2)‖Θ‖², with ℓ the multi-label soft margin ("msm") or the
   pseudo-Huber loss ("huber"), and B's c columns i.i.d. with density ∝ exp(−β‖b‖₂) (radius
   Gamma(d, rate β), direction uniform). The minimiser is computed exactly (float64 damped Newton
   or L-BFGS to ‖∇‖ ≤ ``tol``) by default; ``optimizer="adam"`` reproduces the paper's
   experiments and is *not* covered by Theorem 1 (its proof needs ∇L_priv(Θ_priv) = 0).

Release: Θ_priv (d×c, no bias). Views: ``weights`` {"theta": Θ_priv}, ``mechanism`` (one step:
Θ_priv, whose noiseless mean under a graph is the minimiser with B = 0 and everything public held
fixed; ``noise_std=None`` since the law is not Gaussian) and ``api`` — inference as Algorithm 4
does it on the private graph: node u's logits are [R̂_{m_1}X | … | R̂_{m_s}X]_u Θ_priv with R̂ = I
for m = 0 and (1-α_I)Ã + α_I I otherwise (one hop, the query node's own edges, **no noise**).
Theorem 1 covers the *weights only*; the predictions read incident edges of every queried node
exactly, which the paper argues is harmless to that node but which no DP claim covers when one
party sees many predictions (spec §4.2) — ``Claim.note("covers")`` says so.

Unit: one **undirected** edge (add or remove; A stays symmetric so both directions flip).
Features, labels and the node set are public.

Accountant (spec §3.2, Theorem 1): Ψ = (1/s)Σ 2(1-α)/α·(1-(1-α)^{m_i}); c_sf = Gamma(d).isf(δ/c);
Λ ← max(Λ, c·c2·Ψ·c_sf/(n1·ω·ε) + ξ); c_θ; ε_Λ; Λ'; β = max(ε − ε_Λ, ωε)/(c(c1 + c2c_θ)Ψ). The claim
is ε = min(ε_Λ, (1-ω)ε) + cβ(c1 + c2c_θ)Ψ (= the target ε), δ = 1/|E| with |E| the *directed* edge
count (the paper's Table II convention) unless ``delta`` or ``num_edges`` is set. The spec's
reverse accountant (§3.3: minimise ε(c_θ) subject to δ(c_θ) ≤ δ for the run's β, Λ+Λ') is
reported in the claim's note ``reverse_epsilon``.

Caching: the encoder depends only on public data (features, labels, masks) and, with the default
``encoder_seed=0``, on no randomness at all, so it is memoised per feature/label fingerprint
(``prepare`` warms the cache); fit gives the same release with or without ``prepare``. With
``encoder_seed=None`` the encoder is trained from the fit's ``rng`` and nothing is cached.

Batched trials: ``fit_batch(graph, rngs)`` computes what does not depend on the noise once (claim,
encoder, Z, the Hessians of the first Newton step, the accuracy's features) and what an auditor
computes from a graph once per graph for the batch (:mod:`targets.gcon.densities`); each run's
noise draw and solve are its own, so run k is bitwise ``fit(graph, rngs[k])`` (``fit`` is the
batch of one). The solves are not stacked: on CPU the Hessians are most of a trial and a stacked
einsum is slower than one per run, and MKL's small products can round differently for an operand
at another alignment, as a run's slice of a stack is (benchmarks/throughput.md, "GCON's batch").

Shapes: X (n×d1), Z (n×d, d = s·d1), Θ_priv (d×c), B (d×c), posteriors (n_query×c).
"""
from __future__ import annotations

from targets.gcon.accountant import (
    accountant_at,
    calibrate,
    gradient_at_zero,
    psi,
    psi_single,
    reverse_epsilon,
    sample_noise,
    theorem_epsilon,
    theta_bound,
    theta_bound_whp,
)
from targets.gcon.config import ACTIVATIONS, APPROX_STEPS, INFERENCE, LOSSES, OPTIMIZERS, GCONConfig, parse_steps
from targets.gcon.model import Encoded, one_hop, propagate
from targets.gcon.objective import Problem, loss_constants, loss_terms, solve_adam, solve_lbfgs, solve_newton
from targets.gcon.target import GCON

__all__ = [
    "ACTIVATIONS", "APPROX_STEPS", "GCON", "GCONConfig", "INFERENCE", "LOSSES", "OPTIMIZERS", "Encoded", "Problem",
    "accountant_at", "calibrate", "gradient_at_zero", "loss_constants", "loss_terms", "one_hop", "parse_steps", "propagate", "psi",
    "psi_single", "reverse_epsilon", "sample_noise", "solve_adam", "solve_lbfgs", "solve_newton", "theorem_epsilon",
    "theta_bound", "theta_bound_whp",
]
