"""Trade-off-curve (f-DP) estimators (specs/auditing.md §2.3, §3, §5).

* :func:`fdp_band` / :func:`fdp` — an assumption-free simultaneous confidence band for the attack's
  ROC: upper bounds on FPR(t) and FNR(t) that hold for *every* threshold t at once, at confidence
  1 − β (β/2 per world). Any trade-off curve the mechanism could have lies on or above the band's
  points, so the band certifies the largest ε at δ that every curve inside it contradicts (the §0
  bound maximised over all thresholds, both directions) and the largest μ
  (max_t Φ⁻¹(1 − FPR_ub(t)) − Φ⁻¹(FNR_ub(t))): no μ'-GDP mechanism with μ' < μ_lb is consistent
  with it. No assumption on the mechanism or the scores.
* :func:`one_run_fdp` — one-run audit (one training run, m canaries) analysed with the Gaussian
  trade-off curve (Mahloujifar, Melis & Chaudhuri 2024, "Auditing f-differential privacy in one
  run"), beside Steinke et al.'s pure-ε analysis (:func:`audit.stats.estimators.one_run_epsilon`). It
  rejects μ-GDP claims; its ε is the ε at δ of the rejected Gaussian curve, i.e. a bound for
  mechanisms whose trade-off is Gaussian (the claim under test), not for arbitrary (ε, δ) claims.

The band (per world, β_w = β/2): for each count k of a fixed grid K, geometric from both ends
(0, 1, 2, 4, … and n − 1, n − 2, n − 3, n − 5, …), CP_upper(k, n, β_w/|K|) bounds the rate at every threshold whose empirical error count is ≤ k,
simultaneously for all such thresholds (the event "some t with count ≤ k has rate > u" is the
binomial event at the largest such t); the union over K costs β_w. This holds for any score law,
ties and discrete scores included.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri
from scipy.stats import norm

from attacks.metrics import rates_at
import audit.stats.estimators.core as _e
from targets.common.accounting import check_delta, gdp_epsilon

_BAND_RATIO = 2.0
_BAND_INTERIOR = 16
_ONE_RUN_FDP_GRID = (0.2,)  # one-sided guesses as a fraction of m: one fixed k (no Bonferroni), measured best
_MU_MAX = 50.0


@dataclass(frozen=True)
class RocBand:
    """Simultaneous upper bounds on the attack's error rates at thresholds ``thresholds``
    ("IN iff score ≥ t"); they hold jointly for all thresholds with probability ≥ confidence."""

    thresholds: np.ndarray
    fpr_ub: np.ndarray
    fnr_ub: np.ndarray
    confidence: float

    def epsilon(self, delta: float) -> tuple[float, int]:
        """(largest ε contradicted at δ by every curve in the band, index of the threshold)."""
        eps = _e.eps_from_rates(self.fpr_ub, self.fnr_ub, delta)
        i = int(np.argmax(eps))
        return float(eps[i]), i

    def mu(self) -> float:
        """Largest μ such that every μ'-GDP curve with μ' < μ is contradicted by the band."""
        with np.errstate(divide="ignore", invalid="ignore"):
            m = norm.isf(self.fpr_ub) - norm.ppf(self.fnr_ub)
        m = np.where(np.isnan(m), -np.inf, m)
        return float(max(0.0, min(np.max(m), math.inf)))

    def contradicts(self, tradeoff: Callable[[np.ndarray], np.ndarray]) -> bool:
        """Whether the claim "the mechanism is f-DP" (f = `tradeoff`, symmetric) is rejected: some
        band point has FNR_ub < f(FPR_ub) or FPR_ub < f(FNR_ub)."""
        a = np.asarray(tradeoff(self.fpr_ub), float)
        b = np.asarray(tradeoff(self.fnr_ub), float)
        return bool(np.any(self.fnr_ub < a - 1e-12) or np.any(self.fpr_ub < b - 1e-12))


def gaussian_tradeoff(mu: float) -> Callable[[np.ndarray], np.ndarray]:
    """G_μ(α) = Φ(Φ⁻¹(1 − α) − μ), the μ-GDP trade-off curve."""
    return lambda a: norm.cdf(norm.isf(np.clip(a, 0.0, 1.0)) - mu)


def _band_grid(n: int, ratio: float = _BAND_RATIO, interior: int = _BAND_INTERIOR) -> np.ndarray:
    """Counts of the band: geometric from both ends (0, 1, 2, 4, … and n − 1, n − 2, n − 3, n − 5, …)
    and `interior` counts evenly spaced on the variance-stabilising arcsine scale (n·sin²θ), where
    the geometric grid is coarse compared with the binomial's spread."""
    ks = _e.count_grid(n, ratio, limit=0.5)
    theta = np.linspace(0, np.pi / 2, interior + 2)[1:-1]
    ks = np.concatenate([ks, n - 1 - ks, np.floor(n * np.sin(theta) ** 2).astype(int)])
    return np.unique(ks[(ks >= 0) & (ks < n)])


def _band_upper(counts: np.ndarray, n: int, beta: float, ratio: float = _BAND_RATIO) -> np.ndarray:
    """Simultaneous (over all thresholds) upper bounds on a rate, given its empirical counts."""
    ks = _band_grid(n, ratio)
    band = np.append(_e.cp_upper_vec(ks, n, beta / ks.size), 1.0)
    return band[np.searchsorted(ks, np.asarray(counts), side="left")]


def fdp_band(scores_out: Sequence[float], scores_in: Sequence[float], *, confidence: float = 0.95,
             ratio: float = _BAND_RATIO) -> RocBand:
    """The ROC band of the module docstring at every distinct pooled score (and ±∞)."""
    out = _e.check_scores(scores_out, "scores_out")
    inn = _e.check_scores(scores_in, "scores_in")
    beta = 1.0 - _e.check_confidence(confidence)
    t = np.concatenate([[-np.inf], np.unique(np.concatenate([out, inn])), [np.inf]])
    fp, fn = rates_at(out, inn, t)
    return RocBand(t, _band_upper(fp, out.size, beta / 2, ratio), _band_upper(fn, inn.size, beta / 2, ratio),
                   confidence)


def fdp(scores_out: Sequence[float], scores_in: Sequence[float], *, delta: float,
        confidence: float = 0.95) -> "_e.Estimate":
    """ε (and μ) lower bounds from the simultaneous ROC band: assumption-free, all trials count,
    every threshold and both §0 directions searched at no extra cost; valid at δ = 0 (the band's
    points against TPR ≤ e^ε·FPR)."""
    check_delta(delta, pure=True)
    out = np.asarray(scores_out, float).ravel()
    inn = np.asarray(scores_in, float).ravel()
    beta = 1.0 - confidence
    eps, t, direction = _both_orders(out, inn, delta, beta)
    lo = _both_orders(out, inn, delta, beta / 2)[0]
    if direction == _e.REVERSED:
        out, inn, t = -out, -inn, -t
    fp, fn = (int(c[0]) for c in rates_at(out, inn, np.array([t])))
    hi = float(_e.cp_point_upper(fp, fn, out.size, inn.size, delta, beta / 2))
    counts = {"fp": fp, "tn": out.size - fp, "fn": fn, "tp": inn.size - fn, "n_out": out.size, "n_in": inn.size}
    maxc = _e.cp_grid_max(out.size, inn.size, delta, beta)
    share = 1 - _e._REVERSED_SHARE if direction == _e.HIGHER else _e._REVERSED_SHARE
    band = fdp_band(out, inn, confidence=1 - share * beta)
    return _e.Estimate(eps, (min(lo, eps), max(hi, eps)), "fdp", t if direction == _e.HIGHER else -t,
                       max(maxc, eps), confidence, delta, mu_lb=band.mu(), counts=counts, direction=direction)


def _both_orders(out: np.ndarray, inn: np.ndarray, delta: float, beta: float) -> tuple[float, float, str]:
    """The band's ε on both orders of the score, paid for as cp pays (:func:`_e.cp_both_tails`):
    (ε, threshold in the order's own scale, direction)."""
    r = _e._REVERSED_SHARE
    found = []
    for sign, share, direction in ((1.0, 1 - r, _e.HIGHER), (-1.0, r, _e.REVERSED)):
        band = fdp_band(sign * out, sign * inn, confidence=1 - share * beta)
        eps, i = band.epsilon(delta)
        found.append((eps, float(band.thresholds[i]), direction))
    return max(found, key=lambda f: f[0])


# ---------------------------------------------------------------------------------------------
# one run, f-DP analysis (Mahloujifar, Melis & Chaudhuri 2024)
# ---------------------------------------------------------------------------------------------
def _one_run_rejects(mu: float, m: int, k: int, v: int, beta: float) -> bool:
    """Whether v correct out of k guesses (m canaries) rejects μ-GDP at level β.

    The paper's recursive bound for a trade-off curve f: it tracks r (mass of correct guesses) and
    h (mass of wrong ones), starting from β·v/m and β·(k − v)/m, and walks back over the correct
    guesses; each step h may not fall below the smallest type-I error f allows for power r
    (for G_μ: Φ(Φ⁻¹(r) − μ)), and r grows by i/(k − i) times h's increase. The claim is
    rejected when the final r + h exceeds k/m.
    """
    if v <= 0:
        return False
    r = beta * v / m
    h = beta * (k - v) / m
    for i in range(v - 1, -1, -1):
        floor = float(ndtr(ndtri(r) - mu)) if r < 1.0 else 1.0
        if floor <= h:
            break  # neither r nor h can change any more
        r = min(r + (i / (k - i)) * (floor - h), 1.0)
        h = floor
    return r + h > k / m


def one_run_fdp_mu(m: int, k: int, v: int, beta: float) -> float:
    """sup{μ ≥ 0 : μ-GDP is rejected by v correct out of k guesses}; 0 if none is."""
    if not _one_run_rejects(0.0, m, k, v, beta):
        return 0.0
    lo, hi = 0.0, 1.0
    while _one_run_rejects(hi, m, k, v, beta):
        lo, hi = hi, hi * 2
        if hi > _MU_MAX:
            return math.inf
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if _one_run_rejects(mid, m, k, v, beta):
            lo = mid
        else:
            hi = mid
    return lo


def one_run_fdp_epsilon(m: int, k: int, v: int, delta: float, beta: float) -> float:
    """ε at δ of the Gaussian curve with μ = :func:`one_run_fdp_mu`."""
    return gdp_epsilon(one_run_fdp_mu(m, k, v, beta), delta)


def _one_run_fdp_grid(m: int) -> list[int]:
    return sorted({max(1, int(round(f * m))) for f in _ONE_RUN_FDP_GRID})


def _one_sided_guesses(scores_out: np.ndarray, scores_in: np.ndarray, k: int) -> int:
    """Correct guesses when the k highest scores are guessed IN (the rest abstain)."""
    scores = np.concatenate([scores_out, scores_in])
    truth = np.concatenate([np.zeros(scores_out.size, bool), np.ones(scores_in.size, bool)])
    order = _e.tie_free_order(-scores)  # ties broken independently of membership
    return int(truth[order[:k]].sum())


def one_run_fdp(scores_out: Sequence[float], scores_in: Sequence[float], *, delta: float,
                confidence: float = 0.95) -> "_e.Estimate":
    """One-run audit with the f-DP (Gaussian curve) analysis, next to Steinke et al.'s.

    Guesses are one-sided (as the paper's and jax_privacy's analysis): the k highest-scoring
    canaries are guessed IN, the rest abstain; k runs over a fixed grid of fractions of m
    (``_ONE_RUN_FDP_GRID``, today the single k = 0.2m, so no correction) with a Bonferroni
    correction. The Estimate's ``eps_lb`` is the f-DP bound (``mu_lb`` its μ); ``counts`` also holds
    ``steinke_eps`` — Steinke et al.'s pure-ε bound on exactly the guesses the f-DP bound used (the
    same k, the same correct count, the same level) — so both are reported, named. Steinke et al.'s
    own audit with its own choices is ``method="one-run"`` (two-sided guesses, its own grid).
    """
    out = _e.check_scores(scores_out, "scores_out")
    inn = _e.check_scores(scores_in, "scores_in")
    _e.check_method_delta("one-run-fdp", delta)
    beta = 1.0 - _e.check_confidence(confidence)
    m = out.size + inn.size
    grid = _one_run_fdp_grid(m)
    if not grid:
        raise ValueError("one-run needs at least 2 canaries")
    b = beta / len(grid)
    best = (-1.0, 0.0, grid[0], 0)
    for k in grid:
        v = _one_sided_guesses(out, inn, k)
        mu = one_run_fdp_mu(m, k, v, b)
        if mu > best[0]:
            best = (mu, gdp_epsilon(mu, delta), k, v)
    mu, eps, k, v = best
    steinke = _e.one_run_epsilon(m, k, v, delta, b)  # Steinke et al. on exactly these guesses and level
    maxc = _e.max_certifiable_eps("one-run-fdp", out.size, inn.size, delta=delta, confidence=confidence)
    counts = {"m": m, "guesses": k, "correct": v, "n_out": int(out.size), "n_in": int(inn.size),
              "steinke_eps": steinke}
    return _e.Estimate(eps, (eps, math.inf), "one-run-fdp", None, max(maxc, eps), confidence, delta, mu_lb=mu,
                       counts=counts, assumption="Gaussian trade-off curve (rejects μ-GDP claims)")


def _one_run_fdp_ceiling(m: int, delta: float, beta: float) -> float:
    """What perfect guesses (all correct) certify under :func:`one_run_fdp` with m canaries."""
    grid = _one_run_fdp_grid(m)
    return max(one_run_fdp_epsilon(m, k, k, delta, beta / len(grid)) for k in grid)


_e.EXTENSIONS["fdp"] = _e.Extension(estimate=fdp)
_e.EXTENSIONS["one-run-fdp"] = _e.Extension(estimate=one_run_fdp, ceiling=_one_run_fdp_ceiling)
