"""The sampler measured, not declared: checks of a DP-SGD run's Poisson sampling from what its trace
recorded per step (``DPSGDTrace.sampling_record``: the canary's inclusion and the realised batch
size), over the IN world's trials.

* **Inclusion rate**: a two-sided Clopper–Pearson interval at level β_q for the rate at which the
  canary was included. The subsampled-Gaussian fit (:mod:`audit.stats.estimators.subsampled_fit`) pays for
  it; a declared q outside it is said.
* **Batch-size variance**: under Poisson(q) sampling of N other examples the batch size is
  Binomial(N, q), variance Nq(1 − q); fixed-size or shuffled batches have none. The sample variance
  is tested against the χ² law of (n − 1)s²/(Nq(1 − q)) (normal approximation of the binomial), both
  tails at level α, and fails only where it fails for every q in q's interval.
* **Independence of inclusions across steps**: under Poisson sampling the canary's count of
  inclusions over a run's T steps is Binomial(T, q); shuffled batches (each example once per epoch)
  make it nearly constant. The dispersion statistic Σ(K_i − T p̂)²/(T p̂(1 − p̂)) ~ χ²(n − 1) is
  tested, both tails at level α, beside the lag-1 correlation of inclusions.

A failed check refuses the family fit (``failures`` says which); the checks only decide whether the
fit may run, so α is small (false refusals cost power, never validity).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from audit.stats.estimators import subsampled_fit

ALPHA = 1e-3


@dataclass(frozen=True)
class SamplerCheck:
    """What the trace showed of the sampler, and which checks failed (empty: the family fit may run)."""

    q_interval: tuple[float, float]
    q_level: float
    trials: int
    steps: int
    batch_variance: float
    poisson_variance: float
    dispersion: float
    failures: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failures


def _two_sided(stat: float, df: int, alpha: float) -> bool:
    """Whether a χ²(df) statistic lies in either tail at total level α."""
    return bool(chi2.sf(stat, df) < alpha / 2 or chi2.cdf(stat, df) < alpha / 2)


def check_sampler(canary_in: Sequence[Sequence[bool]], batch_size: Sequence[Sequence[int]], *, population: int,
                  declared_q: float | None = None, q_level: float = 0.005, alpha: float = ALPHA) -> SamplerCheck:
    """The checks of the module docstring, from `canary_in` and `batch_size` (trials × steps, the IN
    world's) and `population`, the number of examples other than the canary the sampler draws from."""
    inc = np.asarray(canary_in, dtype=bool)
    sizes = np.asarray(batch_size, dtype=float)
    if inc.ndim != 2 or inc.shape[0] < 2 or inc.shape[1] < 1:
        raise ValueError(f"inclusions must be trials × steps with at least 2 trials, got shape {inc.shape}")
    if sizes.shape != inc.shape:
        raise ValueError(f"batch sizes {sizes.shape} and inclusions {inc.shape} differ in shape")
    n, steps = inc.shape
    lo, hi = subsampled_fit.inclusion_interval(inc, q_level)
    failures, notes = [], []
    if declared_q is not None and not lo <= declared_q <= hi:
        notes.append(f"the declared q = {declared_q:g} is outside the measured interval [{lo:.4g}, {hi:.4g}]")
    q = inc.mean()
    expected = population * q * (1 - q)
    var = float(sizes.var(ddof=1))
    # against every q in the interval, not the plug-in q̂ alone: near q = 1 (GAP's B = N − 1) q(1 − q) moves by
    # tens of percent across the interval, and a plug-in test refuses true Poisson batches (level ≤ α + β_q)
    ends = [population * x * (1 - x) for x in (lo, hi, *((0.5,) if lo < 0.5 < hi else ()))]
    low, high, df = min(ends), max(ends), sizes.size - 1
    if (high > 0 and chi2.sf(df * var / high, df) < alpha / 2) or (low > 0 and chi2.cdf(df * var / low, df) < alpha / 2) \
            or (high == 0 and var > 0):
        failures.append(f"batch-size variance {var:.4g} is not Binomial(N = {population}, q)'s {low:.4g}-{high:.4g} "
                        f"for any q in [{lo:.4g}, {hi:.4g}]: the batches are not Poisson samples")
    counts = inc.sum(axis=1)
    dispersion = float(((counts - steps * q) ** 2).sum() / (steps * q * (1 - q))) if 0 < q < 1 else 0.0
    if steps > 1 and 0 < q < 1 and _two_sided(dispersion, n - 1, alpha):
        failures.append(f"the canary's inclusions are not independent across steps (dispersion {dispersion:.4g} "
                        f"on {n - 1} degrees of freedom)")
    return SamplerCheck((lo, hi), q_level, n, steps, var, expected, dispersion, tuple(failures), tuple(notes))


def check_node_scales(scales: Sequence[Sequence[float]], *, values: np.ndarray, probs: np.ndarray,
                      alpha: float = ALPHA) -> tuple[str, ...]:
    """The failures (empty where none) of a whole node's recorded per-step scales k_t (releases × steps)
    against the declared law (`values`, `probs`: :func:`audit.stats.node_curve.scale_law`): a value the law
    does not have; the pooled counts against the law by Pearson's χ² (cells of expected count < 5 merged
    into the largest value's), at level `alpha`; the count of nonzero steps per release against
    Binomial(T, P(k ≠ 0)), P declared, by a dispersion test as :func:`check_sampler`'s (steps independent)."""
    k = np.asarray(scales, float)
    if k.ndim != 2 or k.size == 0:
        return ("unmeasured: no recorded whole-node scales (TraceStep.canary_scale)",)
    values, probs = np.asarray(values, float), np.asarray(probs, float) / float(np.sum(probs))
    index = np.array([np.flatnonzero(np.isclose(values, x))[:1] for x in k.ravel()], dtype=object)
    unknown = sorted({float(x) for x, i in zip(k.ravel(), index) if len(i) == 0})
    if unknown:
        return (f"node scale: recorded k_t values {unknown[:5]} the declared law does not have",)
    counts = np.bincount([int(i[0]) for i in index], minlength=values.size).astype(float)
    expected = probs * k.size
    order = np.argsort(values)
    obs, exp_, acc_o, acc_e = [], [], 0.0, 0.0
    for i in order:  # merge small cells upward (the tail of large k)
        acc_o, acc_e = acc_o + counts[i], acc_e + expected[i]
        if acc_e >= 5:
            obs.append(acc_o)
            exp_.append(acc_e)
            acc_o, acc_e = 0.0, 0.0
    if acc_e > 0 and exp_:
        obs[-1], exp_[-1] = obs[-1] + acc_o, exp_[-1] + acc_e
    failures = []
    if len(exp_) >= 2:
        stat = float(((np.array(obs) - np.array(exp_)) ** 2 / np.array(exp_)).sum())
        if chi2.sf(stat, len(exp_) - 1) < alpha:
            failures.append(f"node scale: the recorded k_t do not follow the declared law (χ² {stat:.1f} on "
                            f"{len(exp_) - 1} df)")
    p_in = 1.0 - float(probs[np.isclose(values, 0.0)].sum())
    steps = k.shape[1]
    if steps > 1 and 0.0 < p_in < 1.0 and k.shape[0] > 1:
        per_run = (k != 0).sum(axis=1)
        stat = float(((per_run - steps * p_in) ** 2).sum() / (steps * p_in * (1 - p_in)))
        if _two_sided(stat, k.shape[0], alpha):  # p known: χ²(n)
            failures.append(f"node scale: the steps holding z are not independent across steps (dispersion "
                            f"{stat:.1f} on {k.shape[0]} df)")
    return tuple(failures)
