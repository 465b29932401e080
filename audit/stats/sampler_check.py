"""The sampler measured, not declared: checks of a DP-SGD run's Poisson sampling from what its trace
recorded per step (``DPSGDTrace.sampling_record``: the canary's inclusion and the realised batch
size), over the IN world's trials.

* **Inclusion rate**: a two-sided Clopper–Pearson interval at level β_q for the rate at which the
  canary was included. The subsampled-Gaussian fit (:mod:`audit.stats.estimators.subsampled_fit`) pays for
  it; a declared q outside it is said.
* **Batch-size variance**: under Poisson(q) sampling of N other examples the batch sizes are i.i.d.
  Binomial(N, q); fixed-size or shuffled batches have no variance. Given their total (sufficient for
  q) the batch sizes are multivariate hypergeometric whatever q is, so Σ size² is tested against that
  conditional law, exactly, both tails at level α.
* **Independence of inclusions across steps**: under Poisson sampling the canary's counts of
  inclusions over a run's T steps are i.i.d. Binomial(T, q); shuffled batches (each example once per
  epoch) make them nearly constant. Σ count² is tested, both tails at level α, against the same
  conditional law given the total number of inclusions.

Both tests are exact conditional tests with Monte Carlo p-values (:func:`mc_p_values`), not χ²
approximations: near q = 1 (GAP's B = N − 1) exclusions are rare events, and the χ² law of a
dispersion statistic refuses true Poisson samplers many times more often than α (issue #45).
``dispersion`` is still reported, as the χ² statistic Σ(K_i − T q̂)²/(T q̂(1 − q̂)), for reading only.

A failed check refuses the family fit (``failures`` says which); the checks only decide whether the
fit may run, so α is small (false refusals cost power, never validity).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from audit.stats.estimators import subsampled_fit

ALPHA = 1e-3
#: Besag–Clifford sequential Monte Carlo: a tail's draws stop at its H-th exceedance (p = H / draws)
EXCEEDANCES = 20
#: numpy's multivariate hypergeometric draws need fewer balls than this; above it the conditional law is
#: replaced by a parametric bootstrap at q̂ (said in the check's notes)
_MAX_BALLS = 10 ** 9
_MC_SEED = 0x5A3F1F  # the Monte Carlo draws' seed: a check is a function of its records


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


def mc_p_values(observed: float, draw: Callable[[np.random.Generator, int], np.ndarray], *, alpha: float,
                rng: np.random.Generator) -> tuple[float, float]:
    """(P(S ≤ observed), P(S ≥ observed)) for S drawn by ``draw(rng, m)`` (m statistics under the null), each
    by Besag & Clifford's sequential Monte Carlo p-value: draws stop at the :data:`EXCEEDANCES`-th draw at
    least as extreme, p = H/l after l draws, else (g + 1)/M after M − 1 draws with g such draws. Either
    is a valid p-value, P(p ≤ u) ≤ u; M = ⌈10/α⌉ lets a two-sided level-α test reject at p ≤ α/10."""
    most = int(np.ceil(10 / alpha))
    drawn, seen, p = 0, [0, 0], [None, None]
    chunk, tol = 64, 1e-9 * max(1.0, abs(observed))  # ties count as at least as extreme
    while drawn < most - 1 and None in p:
        m = min(chunk, most - 1 - drawn)
        stats = draw(rng, m)
        for tail, hit in enumerate((stats <= observed + tol, stats >= observed - tol)):
            if p[tail] is None:
                cum = seen[tail] + np.cumsum(hit)
                reached = np.flatnonzero(cum >= EXCEEDANCES)
                if reached.size:
                    p[tail] = EXCEEDANCES / (drawn + int(reached[0]) + 1)
                else:
                    seen[tail] = int(cum[-1])
        drawn, chunk = drawn + m, min(2 * chunk, 4096)
    return tuple(float(x) if x is not None else (seen[k] + 1) / most for k, x in enumerate(p))


def _refusal(low: float, high: float, alpha: float) -> str | None:
    """The p-value and tail that refuse at two-sided level α (e.g. "p = 0.0001 in the lower tail"), or None."""
    if min(low, high) >= alpha / 2:
        return None
    return f"p = {min(low, high):.2g} in the {'lower' if low < high else 'upper'} tail"


def conditional_binomial_test(counts: np.ndarray, capacity: int, *, alpha: float,
                              rng: np.random.Generator) -> tuple[float, float, str | None]:
    """Both tails' p-values of Σ x² for `counts`, cells i.i.d. Binomial(capacity, q) with q unknown, under
    their law given the total (multivariate hypergeometric: exact whatever q is), and a note where the
    balls are too many for that law and a parametric bootstrap at q̂ stands in. (1, 1) where the total
    is 0 or every ball: the law is then a point."""
    x = np.asarray(counts, dtype=np.int64).ravel()
    cells, total = x.size, int(x.sum())
    if total in (0, cells * capacity) or cells < 2:
        return 1.0, 1.0, None
    if cells * capacity < _MAX_BALLS:
        colors = np.full(cells, capacity, dtype=np.int64)

        def draw(g: np.random.Generator, m: int) -> np.ndarray:
            y = g.multivariate_hypergeometric(colors, total, size=m, method="marginals")
            return (y.astype(np.float64) ** 2).sum(axis=1)

        low, high = mc_p_values(float((x.astype(np.float64) ** 2).sum()), draw, alpha=alpha, rng=rng)
        return low, high, None
    q_hat = total / (cells * capacity)

    def spread(y: np.ndarray) -> np.ndarray:
        return ((y - y.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)

    low, high = mc_p_values(float(spread(x.astype(np.float64))),
                            lambda g, m: spread(g.binomial(capacity, q_hat, (m, cells)).astype(np.float64)),
                            alpha=alpha, rng=rng)
    return low, high, (f"{cells} cells of {capacity}: too many for the exact conditional law, the variance "
                       f"is tested by a parametric bootstrap at q̂ = {q_hat:.6g}")


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
    rng = np.random.default_rng(_MC_SEED)
    if population > 0 and sizes.size > 1:
        if not np.allclose(sizes, np.round(sizes)) or sizes.min() < 0 or sizes.max() > population:
            failures.append(f"batch sizes outside 0..N = {population}: the batches are not Poisson samples of the N "
                            f"other examples")
        else:
            low, high, note = conditional_binomial_test(np.round(sizes), population, alpha=alpha, rng=rng)
            notes += [note] if note else []
            rate = float(sizes.mean()) / population
            if refused := _refusal(low, high, alpha):
                failures.append(f"batch-size variance {var:.4g} is not Binomial(N = {population}, q)'s for any q "
                                f"(Binomial at the batches' rate {rate:.4g} has {population * rate * (1 - rate):.4g}; "
                                f"exact conditional test: {refused}, level {alpha:g}): the batches are not "
                                f"Poisson samples")
            if not lo <= rate <= hi:
                notes.append(f"the other examples' rate {rate:.4g} (mean batch size / N) is outside the canary's "
                             f"interval [{lo:.4g}, {hi:.4g}]")
    counts = inc.sum(axis=1)
    dispersion = float(((counts - steps * q) ** 2).sum() / (steps * q * (1 - q))) if 0 < q < 1 else 0.0
    if steps > 1 and 0 < q < 1:
        low, high, _ = conditional_binomial_test(counts, steps, alpha=alpha, rng=rng)
        if refused := _refusal(low, high, alpha):
            failures.append(f"the canary's inclusions are not independent across steps (dispersion {dispersion:.4g} "
                            f"on {n - 1} degrees of freedom; exact conditional test: {refused}, level {alpha:g})")
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
        scale = steps * p_in * (1 - p_in)
        stat = float(((per_run - steps * p_in) ** 2).sum() / scale)

        def draw(g: np.random.Generator, m: int) -> np.ndarray:  # p declared: the law of the counts is known
            return ((g.binomial(steps, p_in, (m, per_run.size)) - steps * p_in) ** 2).sum(axis=1) / scale

        if refused := _refusal(*mc_p_values(stat, draw, alpha=alpha, rng=np.random.default_rng(_MC_SEED)), alpha):
            failures.append(f"node scale: the steps holding z are not independent across steps (dispersion "
                            f"{stat:.1f} on {k.shape[0]} df; Monte Carlo {refused})")
    return tuple(failures)
