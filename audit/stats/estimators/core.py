"""Empirical ε lower bounds with confidence (specs/auditing.md).

One entry point, :func:`estimate`, over two score samples (higher score = "the canary was in"):

* ``cp`` — exact binomial tests on *every* trial: a fixed grid of OUT-rank thresholds (FP counts
  0, 1, 2, 4, … below n/2, and 0.19n, 0.35n); at each, one joint test of (FPR, TPR) against
  "TPR ≤ e^ε FPR + δ" (OUT's FPR at an OUT order statistic is ≤ a Beta variable whatever the
  score law; IN's TP count is binomial given the threshold), Bonferroni over the grid; ε is the
  largest ε rejected (:func:`_cp_grid`). Rigorous, no assumption on the mechanism. With
  ``select_fraction`` (or a ``threshold``) the former one-threshold Clopper–Pearson version (each
  rate at β/2, both §0 inequalities).
* ``fdp`` — a simultaneous confidence band for the attack's ROC (both worlds), and the largest ε at δ
  and μ that every curve inside it contradicts (:mod:`audit.stats.estimators.trade_off`). Assumption-free.
* ``one-run-fdp`` — one-run audit with the f-DP (Gaussian curve) analysis of Mahloujifar et al.,
  Steinke et al.'s bound on the same guesses beside it (:func:`audit.stats.estimators.trade_off.one_run_fdp`).
* Sequential audits with early stopping: :class:`audit.stats.group_sequential.SequentialAudit`. gdp's
  assumption checked on held-out trials: :func:`audit.stats.shape_check.gaussian_shape_check`,
  :func:`audit.stats.shape_check.choose_method`, :func:`audit.stats.shape_check.auto_estimate`.
* ``gdp`` — Gaussian-DP (Nasr et al. 2023): a lower bound on μ from a confidence bound on the
  test's error, converted to ε at δ. **Assumes the mechanism's trade-off curve is Gaussian**
  (exact for Gaussian mechanisms and their compositions); not a bound for other curves.
* ``bayes`` — Bayesian credible bound (Zanella-Béguelin et al. 2023): Jeffreys (joint-beta)
  posteriors on FPR and FNR; the larger of the two §0 directions' β/2 posterior quantiles.
* ``one-run`` — Steinke, Nasr & Jagielski 2023: m canaries in one run, top/bottom guesses with
  abstention, the exact p-value for the number of correct guesses.

Validity: the threshold (or guess count) is never chosen on the trials that are reported without
paying for the choice. ``cp`` and ``fdp`` pay with Bonferroni-corrected grids fixed in advance. For
``gdp``/``bayes`` a fixed, score-independent split holds out ``select_fraction`` of each world's
trials to choose the threshold; the bound is computed on the rest. For ``one-run`` the
number of guesses is chosen from a fixed grid with a Bonferroni correction.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import binom, norm

from attacks.metrics import auc, roc, tpr_at_fpr  # noqa: F401 (re-exported)
from attacks.metrics import candidate_thresholds as _candidate_thresholds
from attacks.metrics import rates_at as _rates_at
from targets.common.accounting import check_delta, gdp_epsilon
from audit.stats.kinds import Method

METHODS = (Method.CP, Method.GDP, Method.BAYES, Method.ONE_RUN, Method.FDP, Method.ONE_RUN_FDP)
#: the methods whose bound is the ε of a Gaussian trade-off curve: refused at δ = 0 (pure_refusal)
GAUSSIAN_CURVE_METHODS = (Method.GDP, Method.ONE_RUN_FDP)


def pure_refusal(method: str) -> str:
    """Why `method` gives no bound at δ = 0 (for a method of :data:`GAUSSIAN_CURVE_METHODS`)."""
    return (f"{method} is refused at δ = 0: its bound is the ε of a Gaussian trade-off curve, and a Gaussian "
            "curve's ε at δ = 0 is infinite for every μ > 0, so it would certify any pure ε-DP claim broken; "
            "cp, bayes, fdp and one-run audit δ = 0")


def check_method_delta(method: str, delta: float) -> float:
    """`delta` in [0, 1), and not 0 for a Gaussian-curve method (:func:`pure_refusal`)."""
    delta = check_delta(delta, pure=True)
    if delta == 0.0 and method in GAUSSIAN_CURVE_METHODS:
        raise ValueError(pure_refusal(method))
    return delta


@dataclass(frozen=True)
class Extension:
    """An estimator implemented in a module built on this one (:mod:`audit.stats.estimators.trade_off`),
    which registers it in :data:`EXTENSIONS` when imported (``audit.stats.estimators`` imports it)."""

    estimate: Callable[..., Any]
    ceiling: Callable[[int, float, float], float] | None = None  # one-run: m, delta, beta -> max ε


EXTENSIONS: dict[str, Extension] = {}
_SELECT_FRACTION = {"cp": 0.5, "gdp": 0.2, "bayes": 0.5}  # cp: only when a split is asked for
_CP_GRID_RATIO = 2.0    # consecutive false-positive counts of cp's threshold grid differ by this factor
_CP_TWO_SIDED = False   # cp spends its whole β on the "s ≥ t says IN" direction (see _cp_grid)
#: the share of β that cp and fdp spend on the reversed order ("lower score means IN"): both tails
#: are tested and paid for (Bonferroni), so a score whose order a deviation reversed still certifies
_REVERSED_SHARE = 0.1
_CP_MID = (0.19, 0.35)  # extra OUT false-positive fractions in cp's grid (low ε: the best FPR is large)
_ONE_RUN_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)  # guesses as a fraction of m


@dataclass(frozen=True)
class Estimate:
    """An empirical ε lower bound and what it rests on.

    ``eps_lb`` is a one-sided lower confidence bound at ``confidence`` (the verdict compares it
    with the claim); ``interval`` is the equal-tailed two-sided interval at ``confidence`` (each
    end at β/2) of the ε the attack demonstrates at its threshold, so ``interval[0] ≤ eps_lb``;
    ``max_certifiable_eps`` is the bound a perfect attack would get with this many trials.
    """

    eps_lb: float
    interval: tuple[float, float]
    method: str
    threshold: float | None
    max_certifiable_eps: float
    confidence: float
    delta: float
    mu_lb: float | None = None
    counts: dict[str, int] = field(default_factory=dict)
    assumption: str | None = None
    #: the score order the bound rests on: the attack's ("higher means IN") or, where both tails were
    #: tested and paid for (cp, fdp), possibly the reversed one
    direction: str = "higher means IN"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["interval"] = [_finite(x) for x in self.interval]
        d["eps_lb"] = _finite(self.eps_lb)
        d["max_certifiable_eps"] = _finite(self.max_certifiable_eps)
        return d


def _finite(x: float | None) -> float | str | None:
    if x is None:
        return None
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


# ---------------------------------------------------------------------------------------------
# input checks
# ---------------------------------------------------------------------------------------------
def check_scores(scores: Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(scores, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name} has a non-finite score at position {bad}: {arr[bad]!r}")
    return arr


def check_confidence(confidence: float) -> float:
    confidence = float(confidence)
    if not (0.5 <= confidence < 1.0):
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence!r}")
    return confidence


# ---------------------------------------------------------------------------------------------
# binomial bounds and the privacy region (§0)
# ---------------------------------------------------------------------------------------------
def cp_upper(k: int, n: int, beta: float) -> float:
    """One-sided Clopper–Pearson upper bound on a proportion at level β."""
    if n == 0:
        return 1.0
    if k >= n:
        return 1.0
    return float(beta_dist.ppf(1.0 - beta, k + 1, n - k))


def cp_lower(k: int, n: int, beta: float) -> float:
    """One-sided Clopper–Pearson lower bound on a proportion at level β."""
    if n == 0 or k <= 0:
        return 0.0
    return float(beta_dist.ppf(beta, k, n - k + 1))


def eps_from_rates(fpr: np.ndarray | float, fnr: np.ndarray | float, delta: float) -> np.ndarray:
    """ε implied by a test with (FPR, FNR) under (ε, δ)-DP (specs/auditing.md §0), vectorised.

    ε ≥ max{ ln((1 − δ − FNR)/FPR), ln((1 − δ − FPR)/FNR), 0 }.
    """
    fpr = np.asarray(fpr, dtype=float)
    fnr = np.asarray(fnr, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.clip(1.0 - delta - fnr, 0, None)) - np.log(fpr)
        b = np.log(np.clip(1.0 - delta - fpr, 0, None)) - np.log(fnr)
    a = np.where(np.isnan(a), -np.inf, a)
    b = np.where(np.isnan(b), -np.inf, b)
    out = np.fmax(np.fmax(a, b), 0.0)
    return out


def cp_upper_vec(k: np.ndarray, n: int, beta: float) -> np.ndarray:
    k = np.asarray(k)
    out = np.ones(k.shape, dtype=float)
    ok = k < n
    out[ok] = beta_dist.ppf(1.0 - beta, k[ok] + 1, n - k[ok])
    return out


def _cp_lower_vec(k: np.ndarray, n: int, beta: float) -> np.ndarray:
    k = np.asarray(k)
    out = np.zeros(k.shape, dtype=float)
    ok = k > 0
    out[ok] = beta_dist.ppf(beta, k[ok], n - k[ok] + 1)
    return out


# ---------------------------------------------------------------------------------------------
# thresholds
# ---------------------------------------------------------------------------------------------
def split_indices(n: int, select_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A score-independent split of range(n) into (select, evaluate)."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    k = int(round(select_fraction * n))
    return np.sort(perm[:k]), np.sort(perm[k:])


# ---------------------------------------------------------------------------------------------
# the methods at a fixed threshold (counts in, bound out)
# ---------------------------------------------------------------------------------------------
def cp_bound(fp, fn, n_out, n_in, delta, beta):
    fpr_ub = cp_upper_vec(fp, n_out, beta / 2)
    fnr_ub = cp_upper_vec(fn, n_in, beta / 2)
    return eps_from_rates(fpr_ub, fnr_ub, delta)


def cp_point_upper(fp, fn, n_out, n_in, delta, beta):
    """ε at the opposite confidence ends (upper end of the attack's ε interval)."""
    return eps_from_rates(_cp_lower_vec(fp, n_out, beta / 2), _cp_lower_vec(fn, n_in, beta / 2), delta)


def count_grid(n: int, ratio: float = _CP_GRID_RATIO, limit: float = 0.5) -> np.ndarray:
    """0, 1, 2, … then counts growing geometrically by `ratio`; all below max(1, limit·n).

    The default limit n/2: the "s ≥ t says IN" inequality of §0 is best at FPR below the
    trade-off curve's symmetric point, which is ≤ 1/2."""
    if n <= 0:
        return np.zeros(0, dtype=int)
    ks, x = {0}, 1.0
    while x < max(1.0, limit * n):
        ks.add(int(x))
        x = max(x * ratio, x + 1.0)
    return np.array(sorted(ks), dtype=int)


def _cp_counts(n: int, ratio: float = _CP_GRID_RATIO) -> np.ndarray:
    """cp's OUT false-positive counts: :func:`count_grid` and the fractions ``_CP_MID`` of n."""
    ks = count_grid(n, ratio)
    if n > 0:
        ks = np.unique(np.concatenate([ks, np.floor(np.asarray(_CP_MID) * n).astype(int)]))
    return ks[(ks >= 0) & (ks < max(n, 1))]


_MIX_LEVELS = np.unique(np.concatenate([np.linspace(0.0, 1.0 - 1e-3, 1000), 1.0 - np.logspace(-3, -12, 200), [1.0]]))


@functools.lru_cache(maxsize=128)
def _mix_nodes(n_out: int, ks: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature of V ~ Beta(k + 1, n_out − k) for each k: bin masses (the steps of ``_MIX_LEVELS``)
    and each bin's upper quantile (the last bin's upper end is 1)."""
    w = np.diff(_MIX_LEVELS)
    q = beta_dist.ppf(_MIX_LEVELS[1:][None, :], np.asarray(ks)[:, None] + 1, n_out - np.asarray(ks)[:, None])
    q[:, -1] = 1.0
    return w, np.nan_to_num(q, nan=1.0)


def _mix_p_value(eps: np.ndarray, tp: np.ndarray, n_in: int, w: np.ndarray, q: np.ndarray,
                 delta: float) -> np.ndarray:
    """Upper bound on P(Bin(n_in, min(1, e^ε V + δ)) ≥ tp), V ~ Beta(k + 1, n_out − k), per row.

    An upper Riemann sum over `_mix_nodes`' bins (the tail is increasing in V), so never below the
    exact value."""
    from scipy.special import betainc
    p = np.minimum(1.0, np.exp(eps)[:, None] * q + delta)
    t = np.asarray(tp, dtype=float)[:, None]
    s = betainc(np.maximum(t, 1.0), np.maximum(n_in - t + 1.0, 1e-300), p)
    s = np.where(t <= 0, 1.0, np.where(t > n_in, 0.0, s))
    return (s * w).sum(axis=1)


def _mix_eps(tp: np.ndarray, ks: np.ndarray, n_out: int, n_in: int, delta: float, level: float) -> np.ndarray:
    """Per grid count k: sup{ε ≥ 0 : the test of k rejects (ε, δ)-DP at `level`} (0 if none)."""
    w, q = _mix_nodes(int(n_out), tuple(int(k) for k in ks))
    tp = np.asarray(tp)
    lo, hi = np.zeros(ks.size), np.full(ks.size, 40.0)
    ok = _mix_p_value(lo, tp, n_in, w, q, delta) <= level
    for _ in range(32):  # 40 / 2^32: ε to 1e-8
        mid = 0.5 * (lo + hi)
        r = _mix_p_value(mid, tp, n_in, w, q, delta) <= level
        lo, hi = np.where(r, mid, lo), np.where(r, hi, mid)
    return np.where(ok, lo, 0.0)


def _cp_one_direction(out: np.ndarray, inn: np.ndarray, delta: float, beta: float
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(ε per grid count, thresholds, FP, FN) for "s ≥ t says IN" at total level β (see _cp_grid)."""
    n0, n1 = out.size, inn.size
    ks = _cp_counts(n0)
    thresholds = np.nextafter(np.sort(out)[n0 - 1 - ks], np.inf)
    fp, fn = _rates_at(out, inn, thresholds)
    return _mix_eps(n1 - fn, ks, n0, n1, delta, beta / ks.size), thresholds, fp, fn


def _cp_grid(out: np.ndarray, inn: np.ndarray, delta: float, beta: float,
             two_sided: bool = _CP_TWO_SIDED) -> tuple[float, float, int, int]:
    """cp on every trial: (ε lower bound, threshold, FP, FN) at the best threshold of a grid.

    The grid is anchored on the OUT world's order statistics: for each count k of a fixed grid K
    (:func:`_cp_counts`, chosen before any score is seen), t_k is the lowest threshold with at
    most k OUT scores ≥ t_k. For each k one exact test of "(ε, δ)-DP", at level β/|K| (Bonferroni
    over K):

    * OUT: write each OUT score as Q(U_i), Q the law's quantile function and U_i iid uniform (any
      law, ties included); the scores ≥ t are those with U_i above a cut, so N_out(t_k) ≤ k gives
      FPR(t_k) ≤ V_(k+1), the (k+1)-th smallest of V_i = 1 − U_i, and V_(k+1) ~ Beta(k + 1, n_out − k).
    * IN: t_k is a function of the OUT scores alone, independent of the IN scores; given it,
      TP(t_k) ~ Binomial(n_in, TPR(t_k)), and (ε, δ)-DP gives TPR(t_k) ≤ e^ε FPR(t_k) + δ ≤
      e^ε V_(k+1) + δ. So TP(t_k) is stochastically below Y ~ Binomial(n_in, min(1, e^ε V + δ)),
      V ~ Beta(k + 1, n_out − k), and P(Y ≥ TP) (:func:`_mix_p_value`, an upper bound by quadrature)
      is a valid p-value.

    This is one joint test of the pair (FPR, TPR) per threshold — not a Clopper–Pearson rectangle
    (an upper bound on FPR and one on FNR, each at its own share of β), which spends β on both
    tails separately. ε is the largest ε rejected at some k. `two_sided` adds the mirrored test
    (IN and OUT swapped, scores negated: the other §0 inequality), each direction at β/2.
    """
    if two_sided:
        a = _cp_grid(out, inn, delta, beta / 2)
        b = _cp_grid(-inn, -out, delta, beta / 2)
        if b[0] > a[0]:  # report the mirrored threshold in the original orientation ("s ≤ t says IN")
            return b[0], -b[1], b[3], b[2]
        return a
    n0, n1 = out.size, inn.size
    eps, thresholds, fp, fn = _cp_one_direction(out, inn, delta, beta)
    i = int(np.argmax(eps - 1e-12 * (fp / n0 + fn / n1)))
    return float(eps[i]), float(thresholds[i]), int(fp[i]), int(fn[i])


def cp_both_tails(out: np.ndarray, inn: np.ndarray, delta: float, beta: float, seed: int = 0
                  ) -> tuple[float, float, int, int, str]:
    """:func:`_cp_grid` on both orders of the score (ties broken at random, :func:`_tie_broken`),
    paid for: "higher means IN" at (1 − r)·β and "lower means IN" (the scores negated) at r·β,
    r = :data:`_REVERSED_SHARE` (Bonferroni over the two). Returns (ε lower bound, threshold, FP,
    FN, direction); the threshold is a score: IN iff s ≥ t, or s ≤ t where reversed."""
    found = []
    for sign, share, direction in ((1.0, 1 - _REVERSED_SHARE, HIGHER), (-1.0, _REVERSED_SHARE, REVERSED)):
        key_out, key_in, boundary = _tie_broken(sign * out, sign * inn, seed)
        lb, t, fp, fn = _cp_grid(key_out, key_in, delta, share * beta)
        found.append((lb, sign * boundary(t), fp, fn, direction))
    return found[1] if found[1][0] > found[0][0] else found[0]


#: the two orders of a score: the attack's own, and the reversed one
HIGHER, REVERSED = "higher means IN", "lower means IN"


def _tie_broken(out: np.ndarray, inn: np.ndarray, seed: int
                ) -> tuple[np.ndarray, np.ndarray, Callable[[float], float]]:
    """The scores as keys with no ties, and a map from a key threshold back to a score.

    Where scores tie (a discrete score: randomised response, a bug that releases the truth), each
    trial gets a uniform U_i of a generator of its own (seeded by `seed`, independent of the
    scores and of the worlds), and the scores are ordered by (s_i, U_i): a randomised test that
    says IN on a tied score with a probability, which DP bounds like any other test (TPR ≤ e^ε FPR
    + δ holds for every randomised decision rule). The pairs stay iid within each world, so
    :func:`_cp_grid`'s argument holds, and its count grid now meets every false-positive count
    exactly: with ties, a grid count between two achievable counts paid for the larger one (on
    randomised response at ε = 1, 1,000 trials: 0.56 instead of 0.86). The keys are the ranks of
    (s, U) in both worlds together. Without ties the scores are returned unchanged (every bound as
    before)."""
    scores = np.concatenate([out, inn])
    if np.unique(scores).size == scores.size:
        return out, inn, lambda t: t
    u = np.random.default_rng([int(seed), 0x71E5]).random(scores.size)
    order = np.lexsort((u, scores))
    keys = np.empty(scores.size)
    keys[order] = np.arange(scores.size, dtype=float)
    ranked = scores[order]

    def boundary(t: float) -> float:  # the score at the key threshold (a tie there is split at random)
        return float(ranked[min(int(np.ceil(t)), ranked.size - 1)]) if np.isfinite(t) else t

    return keys[:out.size], keys[out.size:], boundary


def cp_grid_max(n_out: int, n_in: int, delta: float, beta: float) -> float:
    """`_cp_grid`'s bound for a perfect attack (no errors) with these trial counts."""
    ks = _cp_counts(n_out)
    level = (1 - _REVERSED_SHARE) * beta / ks.size  # the attack's own order's share (cp_both_tails)
    return float(np.max(_mix_eps(np.full(ks.size, n_in), ks, n_out, n_in, delta, level)))


def gdp_mu_bound(fp, fn, n_out, n_in, beta):
    """Lower confidence bound on μ under a Gaussian trade-off curve.

    With equal world sizes the errors FP + FN are a sum of n_out + n_in independent Bernoullis
    with mean p̄ = (FPR + FNR)/2, so a CP bound on p̄ holds (Hoeffding 1956: such sums are more
    concentrated than Binomial(N, p̄)). A μ-GDP test has FPR + FNR ≥ 2Φ(−μ/2) at any threshold,
    hence μ ≥ −2Φ⁻¹(p̄_ub). With unequal sizes: each rate at β/2 and μ ≥ Φ⁻¹(1 − FPR_ub) − Φ⁻¹(FNR_ub).
    """
    return _gdp_mu_from_rate_bounds(fp, fn, n_out, n_in, beta, cp_upper_vec)


def _gdp_mu_upper(fp, fn, n_out, n_in, beta):
    """Upper confidence bound on μ: :func:`gdp_mu_bound`'s rule on the rates' lower CP bounds."""
    return _gdp_mu_from_rate_bounds(fp, fn, n_out, n_in, beta, _cp_lower_vec)


def _gdp_mu_from_rate_bounds(fp, fn, n_out, n_in, beta, rate_bound):
    """μ of the Gaussian trade-off curve through the error rates' CP bounds (`rate_bound`)."""
    if n_out == n_in:
        p = rate_bound(np.asarray(fp) + np.asarray(fn), n_out + n_in, beta)
        return np.fmax(-2.0 * norm.ppf(np.clip(p, 0, 1)), 0.0)
    return np.fmax(norm.isf(rate_bound(fp, n_out, beta / 2)) - norm.ppf(rate_bound(fn, n_in, beta / 2)), 0.0)


def _bayes_posterior(fp: int, fn: int, n_out: int, n_in: int, delta: float, samples: int = 1_000_000,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Posterior draws of the two §0 directions under Jeffreys priors
    FPR ~ Beta(FP+½, TN+½), FNR ~ Beta(FN+½, TP+½): (ln((1−δ−FNR)/FPR), ln((1−δ−FPR)/FNR))."""
    rng = np.random.default_rng(seed)
    fpr = rng.beta(fp + 0.5, n_out - fp + 0.5, size=samples)
    fnr = rng.beta(fn + 0.5, n_in - fn + 0.5, size=samples)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.clip(1.0 - delta - fnr, 1e-300, None)) - np.log(fpr)
        b = np.log(np.clip(1.0 - delta - fpr, 1e-300, None)) - np.log(fnr)
    return a, b


def _bayes_bounds(fp: int, fn: int, n_out: int, n_in: int, delta: float, beta: float,
                  samples: int = 1_000_000) -> tuple[float, float, float]:
    """(lower bound, interval low, interval high) of ε.

    The lower bound is the larger of the two directions' β/2 posterior quantiles. Taking the
    β-quantile of their maximum instead is biased upwards when the directions are close (a
    randomized-response coverage test exceeds the truth ~20% of the time at β = 5%); the union
    over the two directions keeps the frequentist coverage, as Clopper–Pearson's does.
    """
    a, b = _bayes_posterior(fp, fn, n_out, n_in, delta, samples)
    lb = max(0.0, float(np.quantile(a, beta / 2)), float(np.quantile(b, beta / 2)))
    lo = max(0.0, float(np.quantile(a, beta / 4)), float(np.quantile(b, beta / 4)))
    hi = max(0.0, float(np.quantile(np.fmax(a, b), 1 - beta / 2)))
    return lb, lo, hi


def _bayes_quantiles(fp: int, fn: int, n_out: int, n_in: int, delta: float,
                     qs: Sequence[float], samples: int = 1_000_000, seed: int = 0) -> np.ndarray:
    """Quantiles of ε under the joint-beta posterior, points above the diagonal reflected (the
    package's credible interval, specs/auditing.md §4). Descriptive; the bound is
    :func:`_bayes_bounds`, which fixes the test's direction instead of reflecting after the fact."""
    rng = np.random.default_rng(seed)
    fpr = rng.beta(fp + 0.5, n_out - fp + 0.5, size=samples)
    fnr = rng.beta(fn + 0.5, n_in - fn + 0.5, size=samples)
    swap = fpr + fnr > 1.0
    return np.quantile(eps_from_rates(np.where(swap, 1.0 - fnr, fpr), np.where(swap, 1.0 - fpr, fnr), delta), qs)


def _bayes_select_score(fp, fn, n_out, n_in, delta, beta):
    # a cheap proxy for threshold selection: the CP bound (selection data only)
    return cp_bound(fp, fn, n_out, n_in, delta, beta)


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------
def estimate(scores_out: Sequence[float], scores_in: Sequence[float], *, delta: float,
             method: str = "cp", confidence: float = 0.95, select_fraction: float | None = None,
             threshold: float | None = None, seed: int = 0, samples: int = 1_000_000) -> Estimate:
    """An ε lower bound from OUT-world and IN-world scores (higher = IN).

    Args:
        scores_out, scores_in: one score per trial in each world (for ``one-run``: one per canary,
            split by whether the canary was inserted).
        delta: the δ of the (ε, δ) claim under test, in [0, 1) (0: a pure ε-DP claim, which the
            Gaussian-curve methods ``gdp`` and ``one-run-fdp`` refuse: :func:`pure_refusal`).
        method: ``cp``, ``gdp``, ``bayes`` or ``one-run``.
        confidence: 1 − β.
        select_fraction: share of each world's trials held out to choose the threshold
            (default: 0.5 for bayes, 0.2 for gdp; cp by default holds nothing out and pays for its
            threshold grid with a Bonferroni correction, :func:`_cp_grid` — give a fraction to get
            the held-out split instead); ignored when `threshold` is given.
        threshold: an explicit threshold chosen before seeing these scores (then all trials count).
        seed: seed of the score-independent split.
        samples: Monte-Carlo draws of the ``bayes`` posterior (fixed seed).
    """
    out = check_scores(scores_out, "scores_out")
    inn = check_scores(scores_in, "scores_in")
    confidence = check_confidence(confidence)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    check_method_delta(method, delta)
    if method == Method.ONE_RUN:
        return one_run(out, inn, delta=delta, confidence=confidence)
    if method in EXTENSIONS:  # the trade-off (f-DP) estimators of audit.stats.estimators.trade_off
        return EXTENSIONS[method].estimate(out, inn, delta=delta, confidence=confidence)
    beta = 1.0 - confidence
    if method == Method.CP and threshold is None and select_fraction is None:
        # every trial counts: a fixed grid of OUT-rank thresholds, Bonferroni-corrected (_cp_grid),
        # on the scores with their ties broken at random (_tie_broken)
        # on the scores with their ties broken at random (_tie_broken), both orders (cp_both_tails)
        lb, t, fp, fn, direction = cp_both_tails(out, inn, delta, beta, seed)
        lo = cp_both_tails(out, inn, delta, beta / 2, seed)[0]
        n_out, n_in = out.size, inn.size
        hi = float(cp_point_upper(fp, fn, n_out, n_in, delta, beta / 2))
        counts = {"fp": fp, "tn": n_out - fp, "fn": fn, "tp": n_in - fn, "n_out": n_out, "n_in": n_in}
        maxc = max_certifiable_eps("cp", n_out, n_in, delta=delta, confidence=confidence)
        return Estimate(lb, (min(lo, lb), max(hi, lb)), "cp", t, maxc, confidence, delta, counts=counts,
                        direction=direction)
    if threshold is None:
        frac = _SELECT_FRACTION[method] if select_fraction is None else float(select_fraction)
        if not (0.0 < frac < 1.0):
            raise ValueError(f"select_fraction must be in (0, 1), got {frac!r}")
        if min(out.size, inn.size) < 4:
            raise ValueError("need at least 4 trials per world to hold out a threshold-selection set")
        s_out, e_out = split_indices(out.size, frac, seed)
        s_in, e_in = split_indices(inn.size, frac, seed + 1)
        # the score's order is chosen on the held-out trials too
        sign, threshold = _select_order(method, out[s_out], inn[s_in], delta, beta)
        out, inn = sign * out[e_out], sign * inn[e_in]
        if sign < 0:
            e = estimate(out, inn, delta=delta, method=method, confidence=confidence, threshold=threshold,
                         samples=samples)
            return replace(e, threshold=-threshold, direction=REVERSED)
    fp, fn = (int(c[0]) for c in _rates_at(out, inn, np.array([threshold])))
    n_out, n_in = out.size, inn.size
    counts = {"fp": fp, "tn": n_out - fp, "fn": fn, "tp": n_in - fn, "n_out": n_out, "n_in": n_in}
    maxc = max_certifiable_eps(method, n_out, n_in, delta=delta, confidence=confidence)
    if method == Method.CP:
        lb = float(cp_bound(fp, fn, n_out, n_in, delta, beta))
        lo = float(cp_bound(fp, fn, n_out, n_in, delta, beta / 2))
        hi = float(cp_point_upper(fp, fn, n_out, n_in, delta, beta / 2))
        return Estimate(lb, (lo, hi), "cp", float(threshold), maxc, confidence, delta, counts=counts)
    if method == Method.GDP:
        mu_lb = float(gdp_mu_bound(fp, fn, n_out, n_in, beta))
        mu_lo = float(gdp_mu_bound(fp, fn, n_out, n_in, beta / 2))
        mu_hi = float(_gdp_mu_upper(fp, fn, n_out, n_in, beta / 2))
        lb, lo, hi = gdp_epsilon(mu_lb, delta), gdp_epsilon(mu_lo, delta), gdp_epsilon(mu_hi, delta)
        return Estimate(lb, (lo, hi), "gdp", float(threshold), maxc, confidence, delta, mu_lb=mu_lb,
                        counts=counts, assumption="Gaussian trade-off curve (μ-GDP)")
    lb, lo, hi = _bayes_bounds(fp, fn, n_out, n_in, delta, beta, samples=samples)
    return Estimate(lb, (lo, hi), "bayes", float(threshold), maxc, confidence,
                    delta, counts=counts, assumption="Jeffreys priors on FPR and FNR (credible bound)")


def select_threshold(method: str, scores_out: Sequence[float], scores_in: Sequence[float], *, delta: float,
                     confidence: float = 0.95) -> float:
    """The threshold `method`'s selection rule picks on these scores (for scores drawn apart from
    the trials that will be reported, e.g. from a model of the mechanism)."""
    out = check_scores(scores_out, "scores_out")
    inn = check_scores(scores_in, "scores_in")
    check_delta(delta, pure=True)  # gdp's rule reads no δ (the best symmetric-error point)
    return _select_threshold(method, out, inn, delta, 1.0 - check_confidence(confidence))


def _select_order(method: str, out: np.ndarray, inn: np.ndarray, delta: float, beta: float) -> tuple[float, float]:
    """(sign, threshold) on held-out scores: the attack's order (+1) unless the reversed one (−1,
    the threshold then on the negated scores) has the smaller balanced error there."""
    best = []
    for sign in (1.0, -1.0):
        t = _select_threshold(method, sign * out, sign * inn, delta, beta)
        fp, fn = (int(c[0]) for c in _rates_at(sign * out, sign * inn, np.array([t])))
        best.append((fp / out.size + fn / inn.size, -sign, sign, t))
    _, _, sign, t = min(best)
    return sign, t


def _select_threshold(method: str, out: np.ndarray, inn: np.ndarray, delta: float, beta: float) -> float:
    thresholds = _candidate_thresholds(out, inn)
    fp, fn = _rates_at(out, inn, thresholds)
    n_out, n_in = out.size, inn.size
    if method == Method.GDP:
        # the best symmetric-error point: smallest FP/n_out + FN/n_in
        value = -(fp / n_out + fn / n_in)
    else:
        value = cp_bound(fp, fn, n_out, n_in, delta, beta)
        # break ties (e.g. all zero) by balanced error, so the choice is still informative
        value = value - 1e-9 * (fp / n_out + fn / n_in)
    return float(thresholds[int(np.argmax(value))])


def max_certifiable_eps(method: str, n_out: int, n_in: int, *, delta: float, confidence: float = 0.95,
                        select_fraction: float | None = None) -> float:
    """The bound a perfect attack (no errors) would give with these evaluation trials.

    For ``one-run``, n_out + n_in is the number of canaries m. At δ = 0 ``gdp`` and ``one-run-fdp``
    are refused (:func:`pure_refusal`).
    """
    check_method_delta(method, delta)
    beta = 1.0 - confidence
    if method in (Method.CP, Method.FDP) and select_fraction is None:
        # both spend β on the same kind of grid; fdp's band is the wider of the two
        return cp_grid_max(n_out, n_in, delta, beta)
    if method in (Method.CP, Method.BAYES):
        if method == Method.BAYES:
            return _bayes_bounds(0, 0, n_out, n_in, delta, beta, samples=200_000)[0]
        return float(cp_bound(0, 0, n_out, n_in, delta, beta))
    if method == Method.GDP:
        return gdp_epsilon(float(gdp_mu_bound(0, 0, n_out, n_in, beta)), delta)
    if method in (Method.ONE_RUN, Method.ONE_RUN_FDP):
        m = n_out + n_in
        grid = _one_run_grid(m)
        if method in EXTENSIONS:
            return EXTENSIONS[method].ceiling(m, delta, beta)
        return max(one_run_epsilon(m, r, r, delta, beta / len(grid)) for r in grid)
    raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")


def trial_budget(method: str, epsilon: float, *, delta: float, confidence: float = 0.95) -> int:
    """Smallest balanced number of trials (both worlds, before the selection hold-out) whose
    ``max_certifiable_eps`` reaches `epsilon` — the budget below which no attack could certify it."""
    frac = _SELECT_FRACTION.get(method, 0.0) if method not in (Method.CP, Method.FDP) else 0.0
    n = 8
    while n < 10**8:
        per_world = int((n // 2) * (1 - frac))
        if max_certifiable_eps(method, per_world, per_world, delta=delta, confidence=confidence) >= epsilon:
            return n
        n *= 2
    return n


# ---------------------------------------------------------------------------------------------
# one run (Steinke, Nasr & Jagielski 2023)
# ---------------------------------------------------------------------------------------------
def one_run_p_value(epsilon: float, delta: float, m: int, r: int, v: int) -> float:
    """p-value of "the mechanism is (ε, δ)-DP" after v correct guesses out of r, m canaries (§3)."""
    if v <= 0:
        return 1.0
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = binom.sf(v - 1, r, q)  # P[Bin(r, q) ≥ v]
    if delta == 0:
        return float(min(1.0, tail))
    i = np.arange(1, v + 1)
    a = np.max((binom.sf(v - i - 1, r, q) - tail) / i)
    return float(min(1.0, tail + a * delta * 2 * m))


def one_run_epsilon(m: int, r: int, v: int, delta: float, beta: float) -> float:
    """sup{ε ≥ 0 : p(ε, δ) ≤ β}, by bisection (p is increasing in ε)."""
    if one_run_p_value(0.0, delta, m, r, v) > beta:
        return 0.0
    lo, hi = 0.0, 1.0
    while one_run_p_value(hi, delta, m, r, v) <= beta:
        lo, hi = hi, hi * 2
        if hi > 200:
            return math.inf
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if one_run_p_value(mid, delta, m, r, v) <= beta:
            lo = mid
        else:
            hi = mid
    return lo


def tie_free_order(scores: np.ndarray, seed: int = 0) -> np.ndarray:
    """Ascending order of `scores` with ties broken by a fixed random permutation.

    The caller concatenates OUT canaries before IN canaries, so a stable sort would break ties by
    membership: with discrete scores (randomized response) the bottom guesses would be the OUT
    canaries among the tied ones and the top ones the IN canaries — information the guesser must
    not have. A label-independent random order among ties keeps the guesses a function of the
    scores alone."""
    perm = np.random.default_rng(seed).permutation(scores.size)
    return perm[np.argsort(scores[perm], kind="stable")]


def _one_run_grid(m: int) -> list[int]:
    return sorted({max(2, int(round(f * m))) // 2 * 2 for f in _ONE_RUN_GRID if f * m >= 2})


def one_run(scores_out: np.ndarray, scores_in: np.ndarray, *, delta: float, confidence: float = 0.95
            ) -> Estimate:
    """One-run audit: canaries not inserted (OUT) and inserted (IN), one score each.

    Guesses: the r/2 highest scores say IN and the r/2 lowest say OUT; r runs over a fixed grid
    of fractions of m, paid for with a Bonferroni correction (β / grid size).
    """
    beta = 1.0 - confidence
    scores = np.concatenate([scores_out, scores_in])
    truth = np.concatenate([np.zeros(scores_out.size, bool), np.ones(scores_in.size, bool)])
    m = scores.size
    grid = _one_run_grid(m)
    if not grid:
        raise ValueError("one-run needs at least 2 canaries")
    order = tie_free_order(scores)
    best = (0.0, grid[0], 0)
    for r in grid:
        k = r // 2
        v = int((~truth[order[:k]]).sum() + truth[order[m - k:]].sum())
        eps = one_run_epsilon(m, r, v, delta, beta / len(grid))
        if eps > best[0]:
            best = (eps, r, v)
    eps, r, v = best
    maxc = max_certifiable_eps("one-run", scores_out.size, scores_in.size, delta=delta, confidence=confidence)
    counts = {"m": m, "guesses": r, "correct": v, "n_out": int(scores_out.size), "n_in": int(scores_in.size)}
    return Estimate(eps, (eps, math.inf), "one-run", None, maxc, confidence, delta, counts=counts)


# ---------------------------------------------------------------------------------------------
# descriptives (not bounds)
# ---------------------------------------------------------------------------------------------
ESTIMATORS: dict[str, Callable[..., Estimate]] = {
    m: (lambda m_: (lambda o, i, **kw: estimate(o, i, method=m_, **kw)))(m) for m in METHODS
}
