"""Empirical ε lower bounds with confidence (specs/auditing.md).

One entry point, :func:`estimate`, over two score samples (higher score = "the canary was in"):

* ``cp`` — exact binomial tests on *every* trial: a fixed grid of OUT-rank thresholds (FP counts
  0, 1, 2, 4, … below n/2, and 0.19n, 0.35n); at each, one joint test of (FPR, TPR) against
  "TPR ≤ e^ε FPR + δ" (OUT's FPR at an OUT order statistic is ≤ a Beta variable whatever the
  score law; IN's TP count is binomial given the threshold), Bonferroni over the grid; ε is the
  largest ε rejected (:func:`audit.stats.estimators.cp_every_trial.cp_grid`). Rigorous, no assumption on the mechanism. With
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

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from attacks.metrics import auc, roc, tpr_at_fpr  # noqa: F401 (re-exported)
from attacks.metrics import candidate_thresholds as _candidate_thresholds
from attacks.metrics import rates_at as _rates_at
from audit.stats.estimators.cp_every_trial import (HIGHER, REVERSED, cp_at_rank, REVERSED_SHARE as _REVERSED_SHARE,  # noqa: F401
                                                   count_grid, cp_both_tails, cp_grid_max)
from audit.stats.estimators.fixed_threshold import (bayes_bounds as _bayes_bounds, cp_bound, cp_lower,  # noqa: F401
                                                    cp_point_upper, cp_upper, cp_upper_vec, eps_from_rates,
                                                    gdp_mu_bound, gdp_mu_upper as _gdp_mu_upper)
from audit.stats.estimators.one_run_bound import (one_run_epsilon, one_run_grid as _one_run_grid,  # noqa: F401
                                                  one_run_p_value, tie_free_order)
from audit.stats.kinds import Method
from targets.common.accounting import check_delta, gdp_epsilon

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
# thresholds
# ---------------------------------------------------------------------------------------------
def split_indices(n: int, select_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A score-independent split of range(n) into (select, evaluate)."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    k = int(round(select_fraction * n))
    return np.sort(perm[:k]), np.sort(perm[k:])


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------
def estimate(scores_out: Sequence[float], scores_in: Sequence[float], *, delta: float,
             method: str = "cp", confidence: float = 0.95, select_fraction: float | None = None,
             threshold: float | None = None, seed: int = 0, samples: int = 1_000_000,
             fp_fraction: float | None = None) -> Estimate:
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
            threshold grid with a Bonferroni correction, :func:`~audit.stats.estimators.cp_every_trial.cp_grid` — give a fraction to get
            the held-out split instead); ignored when `threshold` is given.
        threshold: an explicit threshold chosen before seeing these scores (then all trials count).
        seed: seed of the score-independent split.
        fp_fraction: ``cp`` only: a share of the OUT trials allowed above the threshold, fixed before
            any score is seen (e.g. from the declared law of an exact loss, :mod:`audit.stats.pair_prior`):
            the one count of :func:`~audit.stats.estimators.cp_every_trial.cp_at_rank`, all trials count
            and the whole β goes to that one test in the attack's own order.
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
    if method == Method.CP and fp_fraction is not None:
        lb, t, fp, fn = cp_at_rank(out, inn, delta, beta, fp_fraction, seed)
        n_out, n_in = out.size, inn.size
        lo = cp_at_rank(out, inn, delta, beta / 2, fp_fraction, seed)[0]
        hi = float(cp_point_upper(fp, fn, n_out, n_in, delta, beta / 2))
        counts = {"fp": fp, "tn": n_out - fp, "fn": fn, "tp": n_in - fn, "n_out": n_out, "n_in": n_in}
        maxc = max_certifiable_eps("cp", n_out, n_in, delta=delta, confidence=confidence)
        return Estimate(lb, (min(lo, lb), max(hi, lb)), "cp", t, maxc, confidence, delta, counts=counts,
                        direction=HIGHER)
    if method == Method.CP and threshold is None and select_fraction is None:
        # every trial counts: a fixed grid of OUT-rank thresholds, Bonferroni-corrected (cp_every_trial.cp_grid),
        # on the scores with their ties broken at random (cp_every_trial._tie_broken), both orders (cp_both_tails)
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
