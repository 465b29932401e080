"""``gradient-max``: the max-over-steps test of a gradient canary, for batches that are shuffled or of
fixed size while the accountant charges Poisson sampling (Opacus #80).

A shuffled epoch of L = round(1/q) steps holds each example, the canary too, in exactly one step, so
the canary's step is the one whose release moves most along it. Per step the statistic is the
projection ``o_t = ⟨g_t, c_t⟩/‖c_t‖²`` of the released noisy sum on the canary (its coordinate, where
every other example's clipped gradient is 0 by the Dirac canary's choice: nothing of the rest of the
batch is subtracted, so the score never reads where the canary is), and the run's score is
``Σ_epochs max_{t in the epoch} o_t`` (the last epoch may be short). Its threshold is held out.

The attack is a candidate only where one probe release (no canary) shows batches that are not
Poisson: under Poisson(q) sampling of N = E/q examples (E the declared expected batch) the batch
size is Binomial(N, q); the probe's T sizes are tested for too little variance, ``(T − 1)·s²/(Nq(1 − q))``
in the lower tail of χ²(T − 1) at :data:`ALPHA` (fixed or shuffled batches have almost none).
"""
from __future__ import annotations

import numpy as np
from scipy.stats import chi2

from attacks.base import Attack
from attacks.gradient import canary_and_law, step_canary
from targets.base import Level, Release

#: level of the probe's batch-size variance test (a correct sampler is refused this rarely)
ALPHA = 1e-3


def epoch_of(q: float) -> int:
    """Steps per shuffled epoch at the declared rate q."""
    return max(1, round(1.0 / q)) if q > 0 else 1


def fixed_batches(trace) -> str | None:
    """Why the probe trace's batch sizes are not Poisson's (too little variance), or None (Poisson-like,
    q = 1, or too few steps or records to tell)."""
    q = float(getattr(trace, "sampling_rate", 1.0)) if trace is not None else 1.0
    if trace is None or not 0.0 < q < 1.0 or len(trace) < 3 or any(st.central is None for st in trace):
        return None
    population = float(getattr(trace, "expected_batch", 0.0)) / q
    expected = population * q * (1.0 - q)
    if expected <= 0:
        return None
    sizes = np.array([int(st.central.numel()) for st in trace], dtype=float)
    stat = (len(sizes) - 1) * sizes.var(ddof=1) / expected
    p = float(chi2.cdf(stat, len(sizes) - 1))
    if p >= ALPHA:
        return None
    return (f"the probe's {len(sizes)} batch sizes vary by {sizes.var(ddof=1):.3g}, not Binomial(N = {population:.0f}, "
            f"q = {q:g})'s {expected:.3g} (χ² lower tail p = {p:.2g}): fixed-size or shuffled batches")


class StepMax(Attack):
    """Σ over epochs of the largest projection of a step's release on the canary."""

    name = "gradient-max"
    levels = (Level.TRACE,)
    canary_kind = "gradient"

    def applies_to(self, release: Release) -> bool:
        return fixed_batches(release.trace) is not None

    def pointed_by(self, release: Release) -> str | None:
        return fixed_batches(release.trace)

    def projections(self, release: Release, pair) -> np.ndarray:
        gc, _, _, _, trace = canary_and_law(release, pair)
        out = []
        for t, st in enumerate(trace):
            c = step_canary(gc, t)
            norm2 = float((c * c).sum())
            out.append(float((st.noisy.double() * c).sum()) / norm2 if norm2 > 0 else 0.0)
        return np.asarray(out)

    def score(self, release: Release, pair, graph=None) -> float:
        _, _, _, q, _ = canary_and_law(release, pair)
        o = self.projections(release, pair)
        epoch = epoch_of(q)
        return float(sum(o[i:i + epoch].max() for i in range(0, len(o), epoch)))
