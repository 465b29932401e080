"""White-box gradient-canary attacks on the ``trace`` view (every noisy update of a DP-SGD run).

Both attacks read the canary from the pair (``pair.g1.canary_gradient``, a Dirac ``C·e_j`` built
by :class:`canaries.gradient.DiracGradient`) and the *claimed* noise law from ``pair.info``
(``noise``, ``noise_std``, ``sampling_rate``), falling back to the trace's own fields.

:class:`ProjectedGradientCanary` (``gradient-projection``) — Algorithm 5 of the HeterPoisson paper
(Xiang et al. 2024) with the spec's corrections (specs/heterpoisson.md §9.9-10): the per-step
observation is the projection of the released noisy sum on the canary's *unit* direction,
``o_t = ⟨g_t, e_j⟩`` (not on ``g^c`` itself), in units of the canary's magnitude; there is no
subtraction of the canary on the OUT side (each world is a separate run: fresh noise for O*). The
run's score is ``Σ_t o_t / C`` (the all-iterates statistic of Nasr et al.). It does not use the
rest of the batch (``clean``): natural gradients on j are small by the choice of j. Its
distribution is not symmetric about a point known in advance, so it sets no
``natural_threshold`` (the estimator holds trials out to choose one).

:class:`FullVectorGradientCanary` (``gradient-lrt``) — spec §6.5(a): the exact log-likelihood
ratio of the whole released vector of every step, with the rest of the batch known to the auditor.
Per step, ``rest_t`` = the noiseless clipped sum without the canary (the trace's ``clean`` minus
the canary where the target inserted it; ``rest_t`` is the same function of the released history in
both worlds), ``x_t = g_t − rest_t``, and

* Gaussian noise N(0, s²I): ``ℓ_t = (⟨x_t, g^c⟩ − ‖g^c‖²/2)/s²``;
* SML noise √W·s·N(0, I_d), W ~ Exp(1) (one W per step): with
  ``L(r²) = ln ∫_0^∞ w^{-d/2} exp(−r²/(2ws²) − w) dw`` (the d-dimensional density up to a
  constant; = ln 2(a)^{ν/2}K_ν(2√a), ν = 1 − d/2, a = r²/2s²), ``ℓ_t = L(‖x_t − g^c‖²) − L(‖x_t‖²)``.
  The integral is evaluated by the trapezoid rule in u = ln w on a grid centred at the integrand's
  mode (the integrand is log-concave in u, so the rule converges exponentially fast); it is checked
  against scipy's Bessel K for small d in the tests.

With Poisson sampling (canary included with probability q each step) the step's likelihood ratio
is the mixture ``(1 − q) + q·e^{ℓ_t}``; the run's score is ``Σ_t ln((1 − q) + q·e^{ℓ_t})``, the
exact log-likelihood ratio of the whole transcript given the (auditor-known) batches. It is an
LLR, so 0 is the Neyman–Pearson threshold at equal priors, fixed before any trial is seen:
``natural_threshold = 0``. (For Gaussian noise and q = 1 its law is N(±μ²/2, μ²) in the two
worlds, exactly symmetric about 0.)

**A sampler that is not Poisson** (the pair's record says so: ``info["sampler"]`` = ``"not poisson: ..."``,
written where the sampler checks of :mod:`audit.stats.sampler_check` failed): the rest of the batch is no
longer independent of the canary's presence (under shuffled or fixed-size batches its size says
where the canary is), so reading it would score the auditor's instrumentation, not the release. The
score then subtracts nothing: ``x_t = g_t``. On a coordinate on which every other example's clipped
gradient is exactly 0 (the rest's component along the canary is 0) this is the same exact score;
elsewhere it is a plain statistic of the release, still valid under cp's held-out threshold.

Whole-node canaries (``canaries.gradient.DiracNode``): where a step records ``canary_scale`` = k_t,
the canary's contribution that step is k_t·g^c (k_t = 1[z central] + 2·#other stars keeping z), the
same in both worlds, so gradient-lrt scores the step with ``k_t·g^c`` in place of ``g^c``: the exact
LLR given k_t, N(±μ_t²/2, μ_t²) with μ_t = k_t‖g^c‖/s (Gaussian). k_t already says whether the
canary is in, so such steps take no Poisson mixture. Revealing k_t stays inside HeterPoisson's
Gaussian claim: with k ~ ρ in both worlds, the pair (k, release) has exactly
e^{(α−1)D_α} = Σ_k ρ(k)·e^{α(α−1)k²/(2σ²)} (k in units of 2c; either direction), which is
Theorem 2's Gaussian moment term for term.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from attacks.base import Attack
from targets.base import Level, Release
from targets.common.noise import NoiseLaw
from targets.common.pair_law import PairLaw

_GRID = 1201
_HALF_WIDTH = 40.0  # grid half-width in units of the mode's curvature scale


def sml_log_integral(r2: np.ndarray, d: int, std: float) -> np.ndarray:
    """ln ∫_0^∞ w^{-d/2} exp(−r²/(2w·std²) − w) dw, elementwise in r² (vectorised trapezoid in ln w).

    The SML log density of a d-vector x with ‖x‖² = r² is this minus (d/2)·ln(2π std²).
    """
    r2 = np.atleast_1d(np.asarray(r2, dtype=float))
    a = np.maximum(r2 / (2.0 * std**2), 1e-300)
    b = 1.0 - d / 2.0  # exponent of w after dw = w du
    disc = np.sqrt(b * b + 4.0 * a)
    w_star = np.where(b >= 0, 0.5 * (b + disc), 2.0 * a / (disc - b))
    u_star = np.log(w_star)
    scale = 1.0 / np.sqrt(a / w_star + w_star)
    t = np.linspace(-_HALF_WIDTH, _HALF_WIDTH, _GRID)
    u = u_star[:, None] + scale[:, None] * t[None, :]
    with np.errstate(over="ignore"):
        f = b * u - a[:, None] * np.exp(-u) - np.exp(u)
    step = scale * (t[1] - t[0])
    m = f.max(axis=1, keepdims=True)
    wts = np.ones(_GRID)
    wts[0] = wts[-1] = 0.5
    return (m[:, 0] + np.log((np.exp(f - m) * wts).sum(axis=1))) + np.log(step)


def canary_and_law(release: Release, pair) -> tuple[torch.Tensor, str, float, float, object]:
    """(the gradient canary of world 1, the noise law's name, its std, the sampling rate q, the trace):
    the pair's record first, the released trace where the record is silent."""
    trace = release.view(Level.TRACE)
    gc = getattr(pair.g1, "canary_gradient", None)
    if gc is None:
        raise ValueError("the gradient attacks need a gradient canary (pair.g1.canary_gradient; use --canary dirac-gradient)")
    law = PairLaw.of(pair)
    noise = law.noise if law.noise is not None else trace.noise
    std = law.noise_std if law.noise_std is not None else float(trace.noise_std)
    q = law.sampling_rate if law.sampling_rate is not None else float(trace.sampling_rate)
    return torch.as_tensor(gc, dtype=torch.float64), noise, std, q, trace


def drawn_with_batch(info: dict[str, Any]) -> bool:
    """A trace pair's record (``sampling_rate`` set) says the canary enters a step with a presence or a
    scale drawn with the batch: Poisson sampling at q < 1, or a whole node (its k_t). A score of such a
    trace is a mixture over that draw, whose trade-off is not a Gaussian curve."""
    return PairLaw.of(info).drawn_with_batch


def not_poisson(info: dict[str, Any]) -> bool:
    """The pair's record says the sampler checks failed: the rest of the batch may reveal the canary."""
    return PairLaw.of(info).not_poisson


def step_canary(gc: torch.Tensor, t: int) -> torch.Tensor:
    """The canary step t carried: one row per step, or the same vector at every step."""
    return gc[t] if gc.dim() == 2 else gc


class ProjectedGradientCanary(Attack):
    """Algorithm 5 (corrected): Σ_t ⟨g_t, e_j⟩ / C."""

    name = "gradient-projection"
    levels = (Level.TRACE,)
    canary_kind = "gradient"

    def score(self, release: Release, pair, graph=None) -> float:
        gc, _, _, _, trace = canary_and_law(release, pair)
        total = 0.0
        for t, step in enumerate(trace):
            c = step_canary(gc, t)
            norm = float(c.norm())
            if norm == 0:
                continue
            total += float((step.noisy.double() * c).sum()) / norm**2
        return total


class FullVectorGradientCanary(Attack):
    """Exact per-step LLR of the whole released update (Gaussian or SML), summed over steps."""

    name = "gradient-lrt"
    levels = (Level.TRACE,)
    canary_kind = "gradient"
    natural_threshold = 0.0
    exact_loss = True  # given the declared noise law and the auditor-known batches (module docstring)

    def linear_in_release(self, info: dict[str, Any]) -> bool:
        """The Gaussian LLR with the canary in every step (q = 1): Σ_t (⟨x_t, c_t⟩ − ‖c_t‖²/2)/s², x_t
        the step's release less the auditor-known rest of its batch, c_t fixed (a gradient canary). Not
        a whole-node canary (its record names the node): its c_t is scaled by a k_t drawn with the
        batch, so the score is a mixture."""
        law = PairLaw.of(info)
        return law.noise == NoiseLaw.GAUSSIAN and law.sampling_rate is not None and not law.drawn_with_batch

    def step_llrs(self, release: Release, pair) -> np.ndarray:
        """ℓ_t for every step (before the sampling mixture)."""
        gc, noise, std, _, trace = canary_and_law(release, pair)
        std = max(std, 1e-12)
        blind = not_poisson(pair.info)
        xs, cs = [], []
        for t, step in enumerate(trace):
            c = step_canary(gc, t)
            scale = _step_scale(step)
            if scale is not None:
                c = scale * c
            if step.clean is None:
                raise ValueError("the gradient-lrt attack needs the trace's clean sums (white-box instrumentation)")
            rest = step.clean.double() - (c if step.canary_in else 0.0)
            xs.append(step.noisy.double() - (0.0 if blind else rest))
            cs.append(c)
        x, c = torch.stack(xs), torch.stack(cs)
        dot = (x * c).sum(1).numpy()
        cc = (c * c).sum(1).numpy()
        if noise == NoiseLaw.GAUSSIAN:
            return (dot - 0.5 * cc) / std**2
        if noise == NoiseLaw.SML:
            r0 = (x * x).sum(1).numpy()
            r1 = np.maximum(r0 - 2.0 * dot + cc, 0.0)
            d = x.shape[1]
            return sml_log_integral(r1, d, std) - sml_log_integral(r0, d, std)
        raise ValueError(f"gradient-lrt knows the noise laws 'gaussian' and 'sml', not {noise!r}")

    def score(self, release: Release, pair, graph=None) -> float:
        _, _, _, q, trace = canary_and_law(release, pair)
        ell = self.step_llrs(release, pair)
        if q >= 1.0:
            return float(ell.sum())
        known = np.array([_step_scale(step) is not None for step in trace], dtype=bool)
        if known.any():  # a recorded scale says whether (and how much) the canary is in: no mixture
            mixed = np.logaddexp(math.log1p(-q), math.log(q) + ell[~known]).sum()
            return float(ell[known].sum() + mixed)
        return float(np.logaddexp(math.log1p(-q), math.log(q) + ell).sum())


def _step_scale(step) -> float | None:
    """The step's recorded multiplier of the canary gradient (a whole-node canary), if any."""
    return getattr(step, "canary_scale", None)


def _laplace_llr_terms(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """|x_i| − |x_i − c_i| written as clip(sign(c_i)·(2x_i − c_i), −|c_i|, |c_i|).

    The two forms agree in exact arithmetic, but only the clipped one returns exactly ±|c_i| on
    the saturated regions. The subtraction form leaves rounding residues there whose pattern
    depends on the world (x = n + c is rounded differently from x = n). A threshold search can
    separate those residues, which reports an ε above the true one; the clipped form keeps the
    point masses exact (tests/test_gradient_audit.py).
    """
    return torch.clamp(torch.sign(c) * (2 * x - c), -c.abs(), c.abs())


class ProductLaplaceGradientCanary(Attack):
    """Log-likelihood ratio of each step under a *product* of 1-D Laplace laws (scale s/√2 per
    coordinate, the marginal of the claimed SML noise): ``ℓ_t = Σ_i (|x_i| − |x_i − c_i|)/b``.

    Not the claimed law: a statistic for noise whose scale is drawn per coordinate, where it is
    the exact LLR. Pair it with :class:`canaries.gradient.SpreadGradient`, whose every coordinate
    carries a small part of the canary. Under the claimed spherical SML it is close to the
    projection statistic, so it gains nothing there. Threshold chosen on held-out trials.
    """

    name = "gradient-l1"
    levels = (Level.TRACE,)
    canary_kind = "gradient"

    def score(self, release: Release, pair, graph=None) -> float:
        gc, _, std, q, trace = canary_and_law(release, pair)
        b = max(std, 1e-12) / math.sqrt(2.0)
        ell = []
        for t, step in enumerate(trace):
            c = step_canary(gc, t)
            if step.clean is None:
                raise ValueError("the gradient-l1 attack needs the trace's clean sums (white-box instrumentation)")
            rest = 0.0 if not_poisson(pair.info) else step.clean.double() - (c if step.canary_in else 0.0)
            x = step.noisy.double() - rest
            ell.append(float(_laplace_llr_terms(x, c).sum()) / b)
        ell = np.asarray(ell)
        if q >= 1.0:
            return float(ell.sum())
        return float(np.logaddexp(math.log1p(-q), math.log(q) + ell).sum())
