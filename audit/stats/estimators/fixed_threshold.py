"""The estimators' bounds at a fixed threshold (counts in, bound out), for
:mod:`audit.stats.estimators.core`: Clopper–Pearson bounds on a rate, the ε of the privacy region
(specs/auditing.md §0) at given error rates, ``cp``'s rectangle, ``gdp``'s bound on μ and ``bayes``'s
posterior bounds.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import norm


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
# the methods at a fixed threshold (counts in, bound out)
# ---------------------------------------------------------------------------------------------
def cp_bound(fp, fn, n_out, n_in, delta, beta):
    fpr_ub = cp_upper_vec(fp, n_out, beta / 2)
    fnr_ub = cp_upper_vec(fn, n_in, beta / 2)
    return eps_from_rates(fpr_ub, fnr_ub, delta)


def cp_point_upper(fp, fn, n_out, n_in, delta, beta):
    """ε at the opposite confidence ends (upper end of the attack's ε interval)."""
    return eps_from_rates(_cp_lower_vec(fp, n_out, beta / 2), _cp_lower_vec(fn, n_in, beta / 2), delta)


def gdp_mu_bound(fp, fn, n_out, n_in, beta):
    """Lower confidence bound on μ under a Gaussian trade-off curve.

    With equal world sizes the errors FP + FN are a sum of n_out + n_in independent Bernoullis
    with mean p̄ = (FPR + FNR)/2, so a CP bound on p̄ holds (Hoeffding 1956: such sums are more
    concentrated than Binomial(N, p̄)). A μ-GDP test has FPR + FNR ≥ 2Φ(−μ/2) at any threshold,
    hence μ ≥ −2Φ⁻¹(p̄_ub). With unequal sizes: each rate at β/2 and μ ≥ Φ⁻¹(1 − FPR_ub) − Φ⁻¹(FNR_ub).
    """
    return _gdp_mu_from_rate_bounds(fp, fn, n_out, n_in, beta, cp_upper_vec)


def gdp_mu_upper(fp, fn, n_out, n_in, beta):
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


def bayes_bounds(fp: int, fn: int, n_out: int, n_in: int, delta: float, beta: float,
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


def bayes_quantiles(fp: int, fn: int, n_out: int, n_in: int, delta: float,
                     qs: Sequence[float], samples: int = 1_000_000, seed: int = 0) -> np.ndarray:
    """Quantiles of ε under the joint-beta posterior, points above the diagonal reflected (the
    package's credible interval, specs/auditing.md §4). Descriptive; the bound is
    :func:`bayes_bounds`, which fixes the test's direction instead of reflecting after the fact."""
    rng = np.random.default_rng(seed)
    fpr = rng.beta(fp + 0.5, n_out - fp + 0.5, size=samples)
    fnr = rng.beta(fn + 0.5, n_in - fn + 0.5, size=samples)
    swap = fpr + fnr > 1.0
    return np.quantile(eps_from_rates(np.where(swap, 1.0 - fnr, fpr), np.where(swap, 1.0 - fpr, fnr), delta), qs)


def _bayes_select_score(fp, fn, n_out, n_in, delta, beta):
    # a cheap proxy for threshold selection: the CP bound (selection data only)
    return cp_bound(fp, fn, n_out, n_in, delta, beta)
