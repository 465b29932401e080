"""Estimator tests: the spec's test vectors, and coverage on mechanisms whose exact ε is known."""

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.stats import norm

from audit.stats import estimators as est
from audit.stats.estimators import cp_every_trial, fixed_threshold
from targets.common.accounting import gdp_epsilon, gdp_mu
from audit.stats.estimators.known import gaussian as _gaussian, laplace as _laplace  # noqa: E402
from audit.stats.estimators.known import randomized_response as _randomized_response  # noqa: E402
from size import count_exceedances, count_failures, stable_seed

DELTA = 1e-5


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
    lo, hi = fixed_threshold.bayes_quantiles(512, 0, 513, 487, 1e-5, [0.05, 0.95])
    assert lo == pytest.approx(0.145, abs=0.01) and hi == pytest.approx(6.40, abs=0.05)
    lo, hi = fixed_threshold.bayes_quantiles(10, 100, 1000, 1000, 1e-5, [0.05, 0.95])
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


# --- coverage on varied mechanisms (the tight size checks: tests/test_estimator_size.py) ---------
# Each test runs at confidence 0.8 (nominal rate β = 0.2): 100 runs, at most 30 exceedances; a
# correct estimator fails w.p. ≤ 0.01, one at rate 2β = 0.4 fails w.p. 0.975 (tests/size.py).
@pytest.mark.parametrize("mechanism", [_gaussian, _laplace, _randomized_response])
def test_bayes_covers_on_known_mechanisms(mechanism):
    """100 runs, 600 trials per world, ε = 2, β = 0.2: limit 30, P(fail | rate 0.4) = 0.975 (cp on
    the same laws: tests/test_estimators_fdp.py::test_validity_drawn_eps)."""
    rng = np.random.default_rng(stable_seed(mechanism.__name__, "bayes"))

    def draw(r):
        out, inn, truth = mechanism(rng, 600, 2.0)
        return est.estimate(out, inn, delta=DELTA, method="bayes", confidence=0.8, seed=r, samples=100_000).eps_lb, truth

    count_exceedances(draw, 100, 0.2, f"bayes on {mechanism.__name__}")


def test_cp_breaks_ties_at_random():
    """Discrete scores (randomised response): cp orders tied scores by an independent uniform per
    trial (a randomised test), so its count grid meets the achievable false-positive counts, and at
    ε = 1 it is tighter than the grid on the raw ties (its coverage on ties: the size check "cp" of
    tests/test_estimator_size.py, and test_validity_drawn_eps[cp-rr])."""
    rng = np.random.default_rng(23)
    bounds, raw = [], []
    for r in range(20):
        out, inn, _ = _randomized_response(rng, 500, 1.0)
        bounds.append(est.estimate(out, inn, delta=DELTA, method="cp", seed=r).eps_lb)
        raw.append(cp_every_trial.cp_grid(out, inn, DELTA, 0.05 * (1 - est.core._REVERSED_SHARE))[0])
    assert np.median(bounds) > np.median(raw) + 0.1


def test_cp_without_ties_is_the_grid_on_the_scores_themselves():
    rng = np.random.default_rng(5)
    out, inn = rng.standard_normal(400), rng.standard_normal(400) + 1.0
    e = est.estimate(out, inn, delta=DELTA, method="cp", seed=3)
    # the attack's order at its share of β (the reversed order is paid the rest: cp_both_tails)
    lb, t, fp, fn = cp_every_trial.cp_grid(out, inn, DELTA, 0.05 * (1 - est.core._REVERSED_SHARE))
    assert (e.eps_lb, e.threshold, e.counts["fp"], e.counts["fn"]) == (lb, t, fp, fn)
    assert e.direction == "higher means IN"


@pytest.mark.parametrize("eps", [1.0, 4.0])
def test_gdp_covers_on_gaussian_mechanisms(eps):
    """100 runs, 1,500 trials per world, β = 0.2: limit 30, P(fail | rate 0.4) = 0.975."""
    rng = np.random.default_rng(11)
    bounds = []

    def draw(r):
        out, inn, truth = _gaussian(rng, 1500, eps)
        bounds.append(est.estimate(out, inn, delta=DELTA, method="gdp", confidence=0.8, seed=r).eps_lb)
        return bounds[-1], truth

    count_exceedances(draw, 100, 0.2, f"gdp on the Gaussian, ε = {eps}")
    assert np.median(bounds) > 0.4 * eps  # and it is informative


def test_gdp_is_not_a_bound_for_non_gaussian_curves():
    """Why the report flags gdp's assumption: on Laplace it overshoots the true ε."""
    rng = np.random.default_rng(0)
    out, inn, truth = _laplace(rng, 5000, 1.0)
    assert est.estimate(out, inn, delta=DELTA, method="gdp").eps_lb > truth


def test_one_run_covers_on_gaussian_canaries():
    """100 runs of 1,000 canaries (each in w.p. ½), ε = 2, β = 0.2: limit 30, P(fail | rate 0.4) = 0.975."""
    rng = np.random.default_rng(3)
    mu = gdp_mu(2.0, DELTA)

    def draw(r):
        s = rng.random(1000) < 0.5
        scores = rng.standard_normal(1000) + mu * s
        return est.estimate(scores[~s], scores[s], delta=DELTA, method="one-run", confidence=0.8).eps_lb, 2.0

    count_exceedances(draw, 100, 0.2, "one-run on Gaussian canaries")


@pytest.mark.parametrize("method, options", [("cp", {"select_fraction": 0.5}), ("gdp", {}), ("bayes", {"samples": 100_000})])
def test_held_out_thresholds_give_no_false_alarm_on_identical_worlds(method, options):
    """Identical worlds (ε = 0): a threshold tuned on the evaluation trials would exploit noise and
    certify ε > 0; the held-out split (cp with select_fraction, gdp's and bayes' defaults) must
    not. 100 runs at β = 0.2: limit 30, P(fail | rate 0.4) = 0.975."""
    rng = np.random.default_rng(stable_seed("identical", method))

    def draw(r):
        e = est.estimate(rng.standard_normal(200), rng.standard_normal(200), delta=DELTA, method=method,
                         confidence=0.8, seed=r, **options)
        return e.eps_lb, 0.0

    count_exceedances(draw, 100, 0.2, f"{method} on identical worlds")


def test_max_certifiable_grows_with_trials_and_bounds_every_estimate():
    # the held-out split's ceiling is the spec's vector; cp on every trial pays a Bonferroni grid of exact joint tests
    assert est.max_certifiable_eps("cp", 500, 500, delta=DELTA, select_fraction=0.5) == pytest.approx(4.906, abs=1e-3)
    small = est.max_certifiable_eps("cp", 500, 500, delta=DELTA)
    big = est.max_certifiable_eps("cp", 5000, 5000, delta=DELTA)
    # the attack's own order gets (1 − r)·β; the reversed order the rest (cp_both_tails)
    exact = _perfect_attack_eps(500, 500, 0.05 * (1 - est.core._REVERSED_SHARE))
    assert exact - 0.05 < small <= exact and big > small  # the quadrature's p-value is an upper bound
    # 1,000 trials per world, all counted, beat 500 evaluated after a 50% hold-out
    assert est.max_certifiable_eps("cp", 1000, 1000, delta=DELTA) > 4.906
    out, inn = _quantile_scores(10.0, 2000)
    e = est.estimate(out, inn, delta=DELTA, method="cp")
    assert e.eps_lb <= e.max_certifiable_eps + 1e-9
    assert est.trial_budget("cp", 4.0, delta=DELTA) >= 256


def _perfect_attack_eps(n_out: int, n_in: int, beta: float) -> float:
    """The ε that cp's k = 0 test certifies with no error, by numerical integration: the largest ε
    whose p-value E[min(1, e^ε V + δ)^n_in], V ~ Beta(1, n_out) (the top OUT score's FPR), is at
    most β/|K|, with K the grid of the estimator's docstring: 0 and the powers of 2 below n/2, and
    ⌊0.19n⌋, ⌊0.35n⌋."""
    grid = {0, int(0.19 * n_out), int(0.35 * n_out)} | {2**i for i in range(40) if 2**i < n_out / 2}

    def p_value(eps: float) -> float:
        kink = (1 - DELTA) / np.exp(eps)  # where e^ε v + δ reaches 1
        body = quad(lambda v: (np.exp(eps) * v + DELTA) ** n_in * n_out * (1 - v) ** (n_out - 1), 0, kink,
                    limit=400, points=[min(kink, 1 / n_out)])[0]
        return body + (1 - kink) ** n_out - beta / len(grid)

    return brentq(p_value, 0.01, 20)


@pytest.mark.parametrize("bad, match", [
    (dict(scores_out=[]), "empty"), (dict(scores_out=[0.0, float("nan")] * 4), "non-finite"),
    (dict(delta=-0.1), "delta"), (dict(delta=1.5), "delta"), (dict(delta=0.0, method="gdp"), "refused at δ = 0"), (dict(method="nope"), "unknown method"),
    (dict(confidence=1.2), "confidence")])
def test_bad_inputs_are_rejected(bad, match):
    kwargs = dict(scores_out=[0.0, 1.0] * 4, scores_in=[1.0, 2.0] * 4, delta=1e-5, method="cp")
    kwargs.update(bad)
    with pytest.raises(ValueError, match=match):
        est.estimate(kwargs.pop("scores_out"), kwargs.pop("scores_in"), **kwargs)


def test_auc_and_tpr_descriptives():
    out = np.arange(100.0)
    inn = np.arange(100.0) + 9.5
    # IN score 9.5 + j is above min(100, 10 + j) OUT scores: AUC = Σ_j min(100, 10 + j) / 100²
    assert est.auc(out, inn) == pytest.approx(sum(min(100, 10 + j) for j in range(100)) / 100**2, abs=1e-12)
    assert 0 <= est.tpr_at_fpr(out, inn, 0.01) <= 0.11


@pytest.mark.parametrize("method", ["cp", "gdp"])
def test_two_sided_interval_covers_the_truth_and_contains_the_bound(method):
    """`interval` is an equal-tailed interval at the stated confidence; `eps_lb` (one-sided) lies in
    it. Misses over 400 runs at 95 % (nominal 0.05): limit 31, P(fail | miss rate 0.1) = 0.925."""
    rng = np.random.default_rng(5)
    eps = 2.0
    mu = gdp_mu(eps, DELTA)

    def missed(r):
        out, inn, truth = _gaussian(rng, 1000, eps)
        # the exact LLR's symmetric threshold (μ/2 on these scores): the point whose ε is the truth
        e = est.estimate(out, inn, delta=DELTA, method=method, threshold=mu / 2)
        lo, hi = e.interval
        assert lo <= e.eps_lb <= hi
        # cp's interval is about the ε of this one test point, which for μ-GDP at the symmetric
        # point is below the truth; only gdp's is an interval for the truth itself
        return not (lo <= truth <= hi) if method == "gdp" else hi < gdp_epsilon_at_point(mu)

    count_failures(missed, 400, 0.05, f"{method}'s interval missed")


def gdp_epsilon_at_point(mu: float) -> float:
    """ε of the (FPR, FNR) = (Φ(−μ/2), Φ(−μ/2)) test point by §0's formula."""
    p = norm.cdf(-mu / 2)
    return float(est.eps_from_rates(p, p, DELTA))
