"""``realised-mean-lrt``: the gradient-canary log-likelihood ratio of a DP-SGD trace whose update is the
noisy sum divided by the *realised* batch size (Opacus #571), not by the expected one.

A correct DP-SGD step releases ``S_t + z_t`` (S_t the clipped sum, z_t ~ N(0, s²I)) and divides it by
a data-independent E (the expected batch q·N). Divided instead by the realised size B_t, the update in
the trace's units (sums over E) is ``(S_t + z_t)·E/B_t``. The canary, counted when in, makes the
divisor one larger: in world 1 the whole release shrinks by B_o/(B_o + 1) (B_o the rest of the batch),
its mean along the rest of the batch and its noise scale with it. Per step, with the rest r_t and
B_o known to the white-box auditor (the trace's batches and clean sums, as for ``gradient-lrt``):

* world 0: ``y ~ N(r·E/B_o, (s·E/B_o)² I)``; world 1, canary in: ``y ~ N((r + c)·E/(B_o + 1), (s·E/(B_o + 1))² I)``;
* ``ℓ_t`` is the exact log-ratio of these two d-dimensional Gaussians, and the run's score is
  ``Σ_t ln((1 − q) + q·e^{ℓ_t})`` (``Σ_t ℓ_t`` at q = 1).

It is the exact ratio only under that alternative, so it sets no natural threshold: the estimator
holds trials out, and on any other release the score is merely weak, never invalid.

:meth:`RealisedMeanLRT.applies_to` reads one probe release (no canary): it compares the likelihood
of the probe's trace under the declared release (``clean + N(0, s²I)``) and under the realised-mean
one (``(clean + N(0, s²I))·E/B``), each with one common factor on its std fitted (so a std that is merely
off, which the declared check names, does not point here). Where the latter wins by :data:`MARGIN` nats the attack is a
candidate, piloted early; elsewhere (every correct target, and q = 1, where B = E in the probe) it is
not. A target that records no batches or clean sums is not one it applies to.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from attacks.base import Attack
from attacks.gradient import canary_and_law, step_canary
from targets.base import Level, Release
from targets.common.noise import NoiseLaw

#: the probe's log-likelihood ratio (realised mean over declared sum) that makes the attack a candidate
MARGIN = 20.0


def _declared(trace) -> tuple[float, float] | None:
    """(the declared noise std, the expected batch E) of a Gaussian trace with batches and clean sums."""
    if trace is None or getattr(trace, "noise", None) != NoiseLaw.GAUSSIAN or not len(trace):
        return None
    std, expected = float(getattr(trace, "noise_std", 0.0)), float(getattr(trace, "expected_batch", 0.0))
    if std <= 0 or expected <= 0 or any(st.clean is None or st.central is None for st in trace):
        return None
    return std, expected


def _gauss_loglik(y: torch.Tensor, mean: torch.Tensor, scale: float) -> float:
    d = y.numel()
    return float(-d * math.log(scale) - ((y - mean) ** 2).sum() / (2 * scale**2))


def probe_margin(trace) -> float | None:
    """ln p(probe | realised mean) − ln p(probe | declared sum), over the probe's steps; None where the
    trace does not say enough to compute it."""
    law = _declared(trace)
    if law is None:
        return None
    std, expected = law
    lams = [expected / max(int(st.central.numel()), 1) for st in trace]
    realised = _profiled_loglik([(st.noisy.double(), st.clean.double() * lam, std * lam) for st, lam in zip(trace, lams)])
    declared = _profiled_loglik([(st.noisy.double(), st.clean.double(), std) for st in trace])
    return realised - declared


def _profiled_loglik(steps: list[tuple[torch.Tensor, torch.Tensor, float]]) -> float:
    """The Gaussian log-likelihood of (release, mean, std) steps with one common factor κ on every std at its
    maximum, κ̂² = mean of the squared standardised residuals: the two models are compared whatever the noise's
    overall scale, so a std that is merely off (a trace at half its declared noise) does not read as a
    realised-batch division, which moves the steps' means and their relative scales."""
    n = sum(y.numel() for y, _, _ in steps)
    ss = sum(float(((y - m) ** 2).sum()) / scale**2 for y, m, scale in steps)
    return float(-sum(y.numel() * math.log(scale) for y, _, scale in steps) - 0.5 * n * math.log(max(ss / n, 1e-300))
                 - 0.5 * n)


class RealisedMeanLRT(Attack):
    """Exact per-step LLR under the realised-batch normalisation, mixed over the canary's coin."""

    name = "realised-mean-lrt"
    levels = (Level.TRACE,)
    canary_kind = "gradient"

    def applies_to(self, release: Release) -> bool:
        margin = probe_margin(release.trace)
        return margin is not None and margin > MARGIN

    def pointed_by(self, release: Release) -> str | None:
        margin = probe_margin(release.trace)
        if margin is None or margin <= MARGIN:
            return None
        return (f"the probe's trace is {margin:.3g} nats likelier as the noisy sum over the realised batch size than "
                "as the declared noisy sum over the expected one")

    def step_llrs(self, release: Release, pair) -> np.ndarray:
        gc, _, std, _, trace = canary_and_law(release, pair)
        law = _declared(trace)
        if law is None:
            raise ValueError("realised-mean-lrt needs a Gaussian trace with its batches and clean sums")
        expected = law[1]
        std = max(std, 1e-12)
        out = []
        for t, st in enumerate(trace):
            c = step_canary(gc, t)
            rest = st.clean.double() - (c if st.canary_in else 0.0)
            others = int(st.central.numel())
            y = st.noisy.double()
            lam0, lam1 = expected / max(others, 1), expected / (others + 1)
            out.append(_gauss_loglik(y, (rest + c) * lam1, std * lam1) - _gauss_loglik(y, rest * lam0, std * lam0))
        return np.asarray(out)

    def score(self, release: Release, pair, graph=None) -> float:
        _, _, _, q, _ = canary_and_law(release, pair)
        ell = self.step_llrs(release, pair)
        if q >= 1.0:
            return float(ell.sum())
        return float(np.logaddexp(math.log1p(-q), math.log(q) + ell).sum())
