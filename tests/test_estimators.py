"""Estimator tests: the spec's test vectors, and coverage on mechanisms whose exact ε is known."""

import numpy as np
import pytest
from scipy.stats import binom, norm

from audit import estimators as est
from targets.common.accounting import gdp_epsilon, gdp_mu
from audit.estimators.known import gaussian as _gaussian, laplace as _laplace  # noqa: E402
from audit.estimators.known import randomized_response as _randomized_response  # noqa: E402

DELTA = 1e-5


def _allowed_exceedances(reps: int, beta: float = 0.05) -> int:
    return int(binom.ppf(0.999, reps, beta))


@pytest.mark.parametrize("tp, fn, fp, tn, eps", [
    (500, 0, 0, 500, 4.906), (1000, 0, 0, 1000, 5.601), (900, 100, 10, 990, 3.872), (600, 400, 100, 900, 1.554)])
def test_cp_spec_vectors(tp, fn, fp, tn, eps):
    assert float(est.cp_bound(fp, fn, fp + tn, tp + fn, DELTA, 0.05)) == pytest.approx(eps, abs=1e-3)


@pytest.mark.parametrize("m, r, v, delta, eps", [
    (1000, 100, 100, 0, 3.493), (1000, 100, 90, 0, 1.631), (1000, 500, 400, 0, 1.199),
    (1000, 1000, 1000, 0, 5.809), (1000, 100, 100, 1e-5, 3.465), (10000, 1000, 1000, 1e-5, 5.529),
    (5000, 200, 190, 1e-5, 2.376)])
def test_one_run_spec_vectors(m, r, v, delta, eps):
    assert est.one_run_epsilon(m, r, v, delta, 0.05) == pytest.approx(eps, abs=2e-3)


def test_bayes_spec_vectors():
    lo, hi = est._bayes_quantiles(512, 0, 513, 487, 1e-5, [0.05, 0.95])
    assert lo == pytest.approx(0.145, abs=0.01) and hi == pytest.approx(6.40, abs=0.05)
    lo, hi = est._bayes_quantiles(10, 100, 1000, 1000, 1e-5, [0.05, 0.95])
    assert lo == pytest.approx(4.01, abs=0.03) and hi == pytest.approx(5.04, abs=0.03)


def _quantile_scores(mu, n):
    z = norm.ppf((np.arange(n) + 0.5) / n)
    return z, z + mu


@pytest.mark.parametrize("method", ["cp", "gdp", "bayes"])
def test_bound_below_truth_and_reasonably_tight_on_noiseless_grid(method):
    mu = 1.0
    out, inn = _quantile_scores(mu, 20_000)
    e = est.estimate(out, inn, delta=DELTA, method=method, samples=200_000)
    truth = gdp_epsilon(mu, DELTA)
    assert e.eps_lb <= truth
    assert e.eps_lb >= {"cp": 0.45, "gdp": 0.9, "bayes": 0.45}[method] * truth


# --- coverage: the bound exceeds the true ε at most β of the time (binomial slack) ---------






@pytest.mark.parametrize("mechanism", [_gaussian, _laplace, _randomized_response])
@pytest.mark.parametrize("method", ["cp", "bayes"])
def test_rigorous_methods_cover_on_known_mechanisms(mechanism, method):
    rng = np.random.default_rng(7)
    reps = 120 if method == "bayes" else 300
    exceed = 0
    for r in range(reps):
        out, inn, truth = mechanism(rng, 600, 2.0)
        e = est.estimate(out, inn, delta=DELTA, method=method, seed=r, samples=100_000)
        exceed += e.eps_lb > truth
    assert exceed <= _allowed_exceedances(reps)


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_cp_breaks_ties_at_random_and_still_covers(eps):
    """Discrete scores (randomised response): cp orders tied scores by an independent uniform per
    trial (a randomised test), so its count grid meets the achievable false-positive counts; the
    bound still covers the true ε, and at ε = 1 it is tighter than the grid on the raw ties."""
    rng = np.random.default_rng(23)
    reps, exceed, bounds, raw = 150, 0, [], []
    for r in range(reps):
        out, inn, truth = _randomized_response(rng, 500, eps)
        e = est.estimate(out, inn, delta=DELTA, method="cp", seed=r)
        exceed += e.eps_lb > truth
        bounds.append(e.eps_lb)
        if r < 20:
            raw.append(est.core._cp_grid(out, inn, DELTA, 0.05)[0])
    assert exceed <= _allowed_exceedances(reps)
    if eps == 1.0:
        assert np.median(bounds) > 0.65 and np.median(bounds) > np.median(raw) + 0.1


def test_cp_without_ties_is_the_grid_on_the_scores_themselves():
    rng = np.random.default_rng(5)
    out, inn = rng.standard_normal(400), rng.standard_normal(400) + 1.0
    e = est.estimate(out, inn, delta=DELTA, method="cp", seed=3)
    # the attack's order at its share of β (the reversed order is paid the rest: cp_both_tails)
    lb, t, fp, fn = est.core._cp_grid(out, inn, DELTA, 0.05 * (1 - est.core._REVERSED_SHARE))
    assert (e.eps_lb, e.threshold, e.counts["fp"], e.counts["fn"]) == (lb, t, fp, fn)
    assert e.direction == "higher means IN"


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_gdp_covers_on_gaussian_mechanisms(eps):
    rng = np.random.default_rng(11)
    reps, exceed, bounds = 300, 0, []
    for r in range(reps):
        out, inn, truth = _gaussian(rng, 1500, eps)
        e = est.estimate(out, inn, delta=DELTA, method="gdp", seed=r)
        exceed += e.eps_lb > truth
        bounds.append(e.eps_lb)
    assert exceed <= _allowed_exceedances(reps)
    assert np.median(bounds) > 0.4 * eps  # and it is informative


def test_gdp_is_not_a_bound_for_non_gaussian_curves():
    """Why the report flags gdp's assumption: on Laplace it overshoots the true ε."""
    rng = np.random.default_rng(0)
    out, inn, truth = _laplace(rng, 5000, 1.0)
    assert est.estimate(out, inn, delta=DELTA, method="gdp").eps_lb > truth


def test_one_run_covers_on_gaussian_canaries():
    rng = np.random.default_rng(3)
    mu = gdp_mu(2.0, DELTA)
    exceed = 0
    for _ in range(200):
        s = rng.random(1000) < 0.5
        scores = rng.standard_normal(1000) + mu * s
        e = est.estimate(scores[~s], scores[s], delta=DELTA, method="one-run")
        exceed += e.eps_lb > 2.0
    assert exceed <= _allowed_exceedances(200)


def test_threshold_is_chosen_on_held_out_trials():
    """A threshold tuned on the evaluation trials would exploit noise; the split must prevent it."""
    rng = np.random.default_rng(1)
    bounds = [est.estimate(rng.standard_normal(200), rng.standard_normal(200), delta=DELTA, method="cp", seed=i).eps_lb
              for i in range(100)]
    assert np.mean(np.array(bounds) > 0) <= 0.1  # identical worlds: a positive bound is a false alarm


def test_max_certifiable_grows_with_trials_and_bounds_every_estimate():
    # the held-out split's ceiling is the spec's vector; cp on every trial pays a Bonferroni grid of exact joint tests
    assert est.max_certifiable_eps("cp", 500, 500, delta=DELTA, select_fraction=0.5) == pytest.approx(4.906, abs=1e-3)
    small = est.max_certifiable_eps("cp", 500, 500, delta=DELTA)
    big = est.max_certifiable_eps("cp", 5000, 5000, delta=DELTA)
    # a perfect attack in the attack's own order, at that order's share of β (cp_both_tails)
    perfect = est.core._cp_grid(np.zeros(500), np.ones(500), DELTA, 0.05 * (1 - est.core._REVERSED_SHARE))[0]
    assert small == pytest.approx(perfect, abs=1e-9) and 4.4 < small < 4.510 and big > small
    # 1,000 trials per world, all counted, beat 500 evaluated after a 50% hold-out
    assert est.max_certifiable_eps("cp", 1000, 1000, delta=DELTA) > 4.906
    out, inn = _quantile_scores(10.0, 2000)
    e = est.estimate(out, inn, delta=DELTA, method="cp")
    assert e.eps_lb <= e.max_certifiable_eps + 1e-9
    assert est.trial_budget("cp", 4.0, delta=DELTA) >= 256


@pytest.mark.parametrize("bad, match", [
    (dict(scores_out=[]), "empty"), (dict(scores_out=[0.0, float("nan")] * 4), "non-finite"),
    (dict(delta=0.0), "delta"), (dict(delta=1.5), "delta"), (dict(method="nope"), "unknown method"),
    (dict(confidence=1.2), "confidence")])
def test_bad_inputs_are_rejected(bad, match):
    kwargs = dict(scores_out=[0.0, 1.0] * 4, scores_in=[1.0, 2.0] * 4, delta=1e-5, method="cp")
    kwargs.update(bad)
    with pytest.raises(ValueError, match=match):
        est.estimate(kwargs.pop("scores_out"), kwargs.pop("scores_in"), **kwargs)


def test_auc_and_tpr_descriptives():
    out = np.arange(100.0)
    inn = np.arange(100.0) + 9.5
    assert est.auc(out, inn) == pytest.approx(0.5905, abs=1e-4)
    assert 0 <= est.tpr_at_fpr(out, inn, 0.01) <= 0.11


@pytest.mark.parametrize("method", ["cp", "gdp"])
def test_two_sided_interval_covers_the_truth_and_contains_the_bound(method):
    """`interval` is an equal-tailed interval at the stated confidence; `eps_lb` (one-sided) lies in it."""
    rng = np.random.default_rng(5)
    eps, reps, misses = 2.0, 300, 0
    mu = gdp_mu(eps, DELTA)
    for r in range(reps):
        out, inn, truth = _gaussian(rng, 1000, eps)
        # the exact LLR's symmetric threshold (μ/2 on these scores): the point whose ε is the truth
        e = est.estimate(out, inn, delta=DELTA, method=method, threshold=mu / 2)
        lo, hi = e.interval
        assert lo <= e.eps_lb <= hi
        # cp's interval is about the ε of this one test point, which for μ-GDP at the symmetric
        # point is below the truth; only gdp's is an interval for the truth itself
        misses += not (lo <= truth <= hi) if method == "gdp" else hi < gdp_epsilon_at_point(mu)
    assert misses <= _allowed_exceedances(reps)


def gdp_epsilon_at_point(mu: float) -> float:
    """ε of the (FPR, FNR) = (Φ(−μ/2), Φ(−μ/2)) test point by §0's formula."""
    p = norm.cdf(-mu / 2)
    return float(est.eps_from_rates(p, p, DELTA))
