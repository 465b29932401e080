"""The privacy loss of a pair of output laws, and ε(δ) from it: pure functions.

* μ-GDP: μ = sqrt(Σ_i (d_i / s_i)²) for Gaussian shifts d with noise scales s; ε(δ) solves
  δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong, Roth & Su 2019, Cor. 2.13).
* Monte Carlo: on samples of the loss L = log p_P/p_Q under P, δ(ε) = E_P[(1 − e^{ε−L})₊] (the
  hockey-stick divergence of P from Q written over the loss); ε(δ) is the larger over the two
  orderings, with a confidence interval read from the normal-approximation interval of δ(ε) at
  each ε (two sides × two orderings, Bonferroni). n samples see no loss beyond their largest, so a
  tail of mass below ~1/n is invisible to them: the caller reports how many lay beyond ε. Where
  fewer than :data:`TAIL_SAMPLES` lie beyond the upper end, the normal approximation does not hold
  there, and the upper end is also bounded through δ(ε) ≤ P(L > ε), with P(L > L₍ₘ₊₁₎) (the
  (m+1)-th largest sample) ≤ its Clopper–Pearson bound Beta(m + 1, n − m) at the same level: the
  largest ε whose tail the samples can bound below δ. At a δ below what n samples resolve
  (≈ ln(4/β)/n; always at δ = 0, where ε is the loss's supremum) the upper end is ∞: a Monte Carlo
  of the loss cannot bound a tail it never saw (a Laplace pair's ε at δ = 0 is Δ₁/b, reached by
  the loss on a set of mass 2^−k for k changed coordinates).
* Gaussian laws with full covariances (columns independent): the loss sampled from the laws.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
from scipy.stats import beta as beta_dist
from scipy.stats import norm

from targets.common.accounting import gdp_epsilon

#: samples beyond the upper end below which its normal approximation is not trusted (module doc)
TAIL_SAMPLES = 30


def gaussian_mu(shifts: Iterable[tuple[Any, Any]]) -> float:
    """μ = sqrt(Σ_steps Σ_i (d_i / s_i)²) of Gaussian steps given as (mean shift d, noise scale s),
    s a scalar or one scale per coordinate (module docstring)."""
    total = 0.0
    for d, s in shifts:
        z = np.asarray(d, dtype=float) / np.asarray(s, dtype=float)
        total += float(np.sum(z * z))
    return math.sqrt(total)


def gdp_pair_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of a μ-GDP pair: :func:`targets.common.accounting.gdp_epsilon`; at δ = 0, ∞ unless μ = 0."""
    if delta <= 0:
        return 0.0 if mu <= 0 else math.inf
    return gdp_epsilon(mu, delta)


class LossSample:
    """Samples of the privacy loss L = log p_P/p_Q under P, and δ(ε) = E[(1 − e^{ε−L})₊] with its
    normal-approximation interval (module docstring)."""

    def __init__(self, losses: Sequence[float]) -> None:
        self.losses = np.sort(np.asarray(losses, dtype=float))[::-1]  # largest first
        if not self.losses.size or not np.all(np.isfinite(self.losses)):
            raise ValueError("privacy-loss samples must be a non-empty array of finite numbers")

    @property
    def n(self) -> int:
        return int(self.losses.size)

    def beyond(self, eps: float) -> int:
        """How many samples lie beyond ε (the only ones that add to δ(ε))."""
        return int(np.searchsorted(-self.losses, -eps, side="left"))

    def delta(self, eps: float, z: float = 0.0) -> float:
        """δ̂(ε) + z · its standard error (z < 0: the lower end, floored at 0)."""
        tail = self.losses[: self.beyond(eps)]
        if not tail.size:
            return 0.0
        terms = -np.expm1(eps - tail)
        mean = float(terms.sum()) / self.n
        if z == 0.0:
            return mean
        var = max(float((terms * terms).sum()) / self.n - mean * mean, 0.0)
        return max(0.0, mean + z * math.sqrt(var / self.n))

    def epsilon(self, delta: float, z: float = 0.0) -> float:
        """The smallest ε ≥ 0 with δ̂(ε) + z·se ≤ δ (by bisection; δ̂ is non-increasing in ε and 0
        from the largest sample on)."""
        hi = max(float(self.losses[0]), 0.0)
        if self.delta(0.0, z) <= delta:
            return 0.0
        lo = 0.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if self.delta(mid, z) <= delta else (mid, hi)
            if hi - lo <= 1e-12 * max(1.0, hi):
                break
        return hi

    def epsilon_upper(self, delta: float, z: float, level: float) -> float:
        """The upper end of ε at δ: the normal approximation's (z > 0) where at least
        :data:`TAIL_SAMPLES` samples lie beyond it, else also the order-statistic bound at `level`
        (module docstring); ∞ where no sample bounds the tail below δ."""
        hi = self.epsilon(delta, z)
        if self.beyond(hi) >= TAIL_SAMPLES:
            return hi
        return max(hi, self.tail_epsilon(delta, level))

    def tail_epsilon(self, delta: float, level: float) -> float:
        """The smallest (m+1)-th largest sample whose exceedance probability, Beta(m + 1, n − m)
        for continuous losses (stochastically smaller with atoms), is ≤ δ at `level`; ∞ if none."""
        m = np.arange(min(self.n, 4 * TAIL_SAMPLES + 1))
        bound = beta_dist.ppf(1.0 - level, m + 1, self.n - m)
        ok = np.flatnonzero(bound <= delta)
        return math.inf if not ok.size else float(self.losses[int(ok[-1])])


def monte_carlo_epsilon(loss_0: Sequence[float], loss_1: Sequence[float], delta: float, confidence: float,
                        sup: float | None = None) -> tuple[float, tuple[float, float], int]:
    """ε(δ) from privacy-loss samples of both orderings (`loss_0`: log p0/p1 on world-0 releases,
    `loss_1`: log p1/p0 on world-1 releases): (the larger ordering's ε, its two-sided interval at
    `confidence` (two sides × two orderings, Bonferroni; the upper end ∞ where the samples cannot bound
    the tail: :meth:`LossSample.epsilon_upper`), the fewest samples beyond ε of either). `sup`: a
    known supremum of both losses (a Laplace pair's Σ‖d‖₁/b), which bounds ε at every δ: the upper end
    is at most `sup`."""
    level = (1.0 - confidence) / 4.0
    z = float(norm.isf(level))
    samples = [LossSample(loss_0), LossSample(loss_1)]
    value = max(s.epsilon(delta) for s in samples)
    lo = max(s.epsilon(delta, -z) for s in samples)
    hi = max(s.epsilon_upper(delta, z, level) for s in samples)
    if sup is not None:
        hi = min(hi, float(sup))
    return value, (lo, hi), min(s.beyond(value) for s in samples)


def law_losses(own: tuple[torch.Tensor, torch.Tensor], other: tuple[torch.Tensor, torch.Tensor], samples: int,
                rng: np.random.Generator, chunk_entries: int = 1 << 22) -> np.ndarray:
    """log p_own(x) − log p_other(x) on `samples` draws x ~ own (columns independent Gaussians,
    each law given as (mean, Cholesky factor of its covariance))."""
    (m, chol), (m_q, chol_q) = own, other
    n, h = m.shape
    log_det = float(chol.diagonal().log().sum() - chol_q.diagonal().log().sum())
    per_chunk = max(1, chunk_entries // (n * h))
    out = []
    for start in range(0, samples, per_chunk):
        k = min(per_chunk, samples - start)
        z = torch.from_numpy(rng.standard_normal((n, k * h)))
        x = (m.repeat(1, k) + chol @ z)  # column j·h + c is draw j's column c
        r = torch.linalg.solve_triangular(chol_q, x - m_q.repeat(1, k), upper=False)
        quad = (r * r - z * z).reshape(n, k, h).sum((0, 2))
        out.append((0.5 * quad - h * log_det).numpy())
    return np.concatenate(out)
