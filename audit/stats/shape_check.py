"""Checking gdp's assumption before using it, and the ``auto`` method resolver.

``gdp`` is a bound only where the mechanism's trade-off curve is Gaussian. Where that is not proven,
:func:`gaussian_shape_check` tests the equal-variance binormal model on held-out trials — each
world's scores normal (Shapiro–Wilk, D'Agostino's K² above 5,000), equal variances (Bartlett), and
enough distinct values for a continuous law — Bonferroni-combined at level ``alpha``. Failing any
part sends :func:`choose_method` / :func:`auto_estimate` to the assumption-free bound. The check can
only fail safe: a Gaussian mechanism read through a non-linear score is rejected (and audited
with cp), never the other way round on purpose; its power against Laplace and randomized-response
scores is measured in benchmarks/estimator_validity.py.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from audit.stats import estimators as _e
from audit.stats.kinds import Method

CHECK_FRACTION = 0.3
_MIN_DISTINCT = 20


@dataclass(frozen=True)
class ShapeCheck:
    passed: bool
    p_value: float
    reason: str
    details: dict[str, float] = field(default_factory=dict)


def _normal_p(x: np.ndarray) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if x.size <= 5000:
            return float(stats.shapiro(x).pvalue)
        return float(stats.normaltest(x).pvalue)


def gaussian_shape_check(scores_out: Sequence[float], scores_in: Sequence[float], *, alpha: float = 0.05,
                         min_distinct: int = _MIN_DISTINCT) -> ShapeCheck:
    """Test "OUT ~ N(a, s²), IN ~ N(b, s²)" on these (held-out) scores; passed = not rejected."""
    out = _e.check_scores(scores_out, "scores_out")
    inn = _e.check_scores(scores_in, "scores_in")
    if min(out.size, inn.size) < 8:
        return ShapeCheck(False, 0.0, "too few trials to check the Gaussian shape (< 8 per world)")
    d_out, d_in = np.unique(out).size, np.unique(inn).size
    if min(d_out, d_in) < min(min_distinct, min(out.size, inn.size)):
        return ShapeCheck(False, 0.0, f"discrete scores ({d_out} and {d_in} distinct values): not binormal",
                          {"distinct_out": d_out, "distinct_in": d_in})
    p = {"normal_out": _normal_p(out), "normal_in": _normal_p(inn),
         "equal_variance": float(stats.bartlett(out, inn).pvalue)}
    pmin = min(p.values())
    adj = min(1.0, pmin * len(p))
    worst = min(p, key=p.get)
    if adj < alpha:
        return ShapeCheck(False, adj, f"Gaussian shape rejected ({worst}: p = {p[worst]:.2g}, Bonferroni-adjusted "
                          f"{adj:.2g} < {alpha})", p)
    return ShapeCheck(True, adj, f"Gaussian shape not rejected (adjusted p = {adj:.2g} ≥ {alpha})", p)


def choose_method(claim_is_gdp: bool, proven_gaussian: bool, scores_out: Sequence[float] | None = None,
                  scores_in: Sequence[float] | None = None, *, alpha: float = 0.05) -> tuple[str, str]:
    """(method, reason). gdp only for a μ-GDP claim whose trade-off is proven Gaussian or whose
    given (held-out!) scores pass :func:`gaussian_shape_check`; cp otherwise."""
    if not claim_is_gdp:
        return "cp", "the claim is not μ-GDP: assumption-free cp"
    if proven_gaussian:
        return "gdp", "μ-GDP claim, trade-off proven Gaussian (e.g. a Gaussian mechanism read by its LLR)"
    if scores_out is None or scores_in is None:
        return "cp", "μ-GDP claim but the Gaussian shape is neither proven nor checked: assumption-free cp"
    chk = gaussian_shape_check(scores_out, scores_in, alpha=alpha)
    if chk.passed:
        return "gdp", f"μ-GDP claim; held-out check: {chk.reason}"
    return "cp", f"μ-GDP claim but held-out check failed: {chk.reason}; assumption-free cp"


def auto_estimate(scores_out: Sequence[float], scores_in: Sequence[float], *, delta: float, claim_is_gdp: bool,
                  proven_gaussian: bool = False, confidence: float = 0.95, check_fraction: float = CHECK_FRACTION,
                  seed: int = 0, alpha: float = 0.05) -> tuple["_e.Estimate", str, str]:
    """The ``auto`` path: (estimate, method, reason).

    The shape check runs on a fixed, score-independent `check_fraction` of each world; gdp, if
    chosen, is computed on the other trials; the cp fallback uses all trials (cp is valid
    unconditionally, so P(fallback and cp > ε) ≤ β).
    """
    out = _e.check_scores(scores_out, "scores_out")
    inn = _e.check_scores(scores_in, "scores_in")
    if delta == 0:  # gdp is refused at δ = 0 (a Gaussian curve's ε there is infinite): cp on all trials
        return (_e.estimate(out, inn, delta=delta, method="cp", confidence=confidence, seed=seed), "cp",
                "δ = 0 (pure ε-DP): gdp refused, assumption-free cp")
    if claim_is_gdp and not proven_gaussian:
        c_out, r_out = _e.split_indices(out.size, check_fraction, seed + 17)
        c_in, r_in = _e.split_indices(inn.size, check_fraction, seed + 18)
        method, reason = choose_method(True, False, out[c_out], inn[c_in], alpha=alpha)
        if method == Method.GDP:
            return _e.estimate(out[r_out], inn[r_in], delta=delta, method="gdp", confidence=confidence,
                               seed=seed), method, reason
    else:
        method, reason = choose_method(claim_is_gdp, proven_gaussian)
    return _e.estimate(out, inn, delta=delta, method=method, confidence=confidence, seed=seed), method, reason
