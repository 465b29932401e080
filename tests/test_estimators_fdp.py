"""cp on every trial, the fdp ROC band, one-run f-DP, the sequential audit and the gdp shape check:
known answers, and fast coverage checks on mechanisms with known ε (the ε drawn in the test)."""
import math

import numpy as np
import pytest

from audit.stats import estimators as est
from audit.stats.estimators import cp_every_trial
from audit.stats.group_sequential import SequentialAudit
from audit.stats.shape_check import choose_method, gaussian_shape_check
from audit.stats.shape_check import auto_estimate
from targets.common.accounting import gdp_epsilon, gdp_mu
from audit.stats.estimators.known import MECHANISMS, gaussian as _gaussian, laplace as _laplace  # noqa: E402
from audit.stats.estimators.known import randomized_response as _rr  # noqa: E402
from size import count_exceedances, count_failures, stable_seed

DELTA = 1e-5










# --- known answers --------------------------------------------------------------------------
def _geometric(n, limit=0.5):
    """The documented count grid: 0 and the powers of 2 below max(1, limit·n)."""
    return [0] + [2**i for i in range(64) if 2**i < max(1.0, limit * n)]


def _arcsine(n, interior=16):
    """The band's documented interior counts: ⌊n sin²θ⌋, θ evenly spaced strictly inside (0, π/2)."""
    return [math.floor(n * math.sin(math.pi / 2 * j / (interior + 1)) ** 2) for j in range(1, interior + 1)]


@pytest.mark.parametrize("n, limit", [(100, 0.5), (100, 1.0), (1, 0.5), (1000, 0.5)])
def test_count_grid(n, limit):
    assert est.count_grid(n, limit=limit).tolist() == _geometric(n, limit)


def test_cp_perfect_separation_exact():
    """OUT 0..99, IN 100..199: the t_0 threshold has FP = FN = 0; the bound is the perfect attack's
    (max_certifiable_eps) and the p-value at it is β/|K| (the Bonferroni level of the grid)."""
    out, inn = np.arange(100.0), np.arange(100.0, 200.0)
    e = est.estimate(out, inn, delta=DELTA, method="cp")
    assert e.eps_lb == pytest.approx(e.max_certifiable_eps, abs=1e-9)
    assert e.counts["fp"] == 0 and e.counts["fn"] == 0 and 99 < e.threshold < 100
    ks = cp_every_trial.cp_counts(100)
    assert ks.tolist() == sorted(set(_geometric(100)) | {19, 35})  # and ⌊0.19n⌋, ⌊0.35n⌋
    w, q = cp_every_trial.mix_nodes(100, (0,))
    p = cp_every_trial.mix_p_value(np.array([e.eps_lb]), np.array([100]), 100, w, q, DELTA)[0]
    assert p == pytest.approx(0.05 * (1 - est.core._REVERSED_SHARE) / ks.size, rel=1e-6)  # the attack's order's share
    # the quadrature is an upper bound on the exact p-value E[min(1, e^ε V + δ)^100], V ~ Beta(1, 100)
    from scipy.integrate import quad
    exact = quad(lambda v: min(1.0, math.exp(e.eps_lb) * v + DELTA) ** 100 * 100 * (1 - v) ** 99, 0, 1, limit=200)[0]
    assert exact <= p <= exact * 1.2  # conservative by under 20% at n = 100 and this level


def test_cp_known_quantile_grid():
    """OUT 0..999, IN 500..1499 (half overlap). At the grid count k the threshold is just above
    OUT's (k+1)-th largest, 999 − k, so FP = k and TP = 500 + k (for k ≤ 500); the bound is the
    largest per-k ε of the exact tests at β/|K| — recomputed here."""
    out, inn = np.arange(1000.0), np.arange(500.0, 1500.0)
    ks = cp_every_trial.cp_counts(1000)
    share = 1 - est.core._REVERSED_SHARE  # the attack's order's share of β (cp_both_tails)
    want = float(np.max(cp_every_trial.mix_eps(500 + ks, ks, 1000, 1000, DELTA, 0.05 * share / ks.size)))
    assert est.estimate(out, inn, delta=DELTA, method="cp").eps_lb == pytest.approx(want, abs=1e-9)
    assert want > 0


def test_fdp_perfect_separation_exact_and_mu():
    out, inn = np.arange(100.0), np.arange(100.0, 200.0)
    e = est.fdp(out, inn, delta=DELTA)
    # each world (1 − r)·β/2 over the band's grid counts: the geometric ones, 99 − those, and 16
    # arcsine-spaced interior counts (two of which coincide with the geometric ones)
    from audit.stats.estimators.trade_off import _band_grid
    grid = sorted(set(_geometric(100)) | {99 - k for k in _geometric(100)} | set(_arcsine(100)))
    assert _band_grid(100).tolist() == grid and len(grid) == 28
    # CP upper bound at count 0 of 100 at the attack's order's share of β/2, over |K|
    u = 1 - (0.025 * (1 - est.core._REVERSED_SHARE) / len(grid)) ** (1 / 100)
    assert e.eps_lb == pytest.approx(math.log((1 - DELTA - u) / u), abs=1e-9)
    from scipy.stats import norm
    assert e.mu_lb == pytest.approx(2 * norm.isf(u), abs=1e-9)


def test_fdp_band_contradicts_gaussian_claims():
    from audit.stats.estimators.trade_off import gaussian_tradeoff
    rng = np.random.default_rng(0)
    out, inn, _ = _gaussian(rng, 5000, 4.4)  # μ = 1
    band = est.fdp_band(out, inn)
    assert band.contradicts(gaussian_tradeoff(0.5))
    assert not band.contradicts(gaussian_tradeoff(1.0))
    assert 0.5 < band.mu() < 1.0


@pytest.mark.parametrize("m, k, v, eps", [
    # the Gaussian-curve one-run bound; cross-checked against jax_privacy 2.0.0's epsilon_one_run_fdp
    (1000, 100, 100, 5.549028), (1000, 100, 90, 2.456405), (1000, 500, 400, 2.076807), (10000, 1000, 1000, 8.987740)])
def test_one_run_fdp_vectors(m, k, v, eps):
    assert est.one_run_fdp_epsilon(m, k, v, DELTA, 0.05) == pytest.approx(eps, abs=1e-4)


def test_one_run_fdp_beats_steinke_on_the_same_counts():
    for m, r, v in [(1000, 100, 100), (1000, 100, 90), (5000, 200, 190)]:
        assert est.one_run_fdp_epsilon(m, r, v, DELTA, 0.05) > est.one_run_epsilon(m, r, v, DELTA, 0.05)


# --- coverage --------------------------------------------------------------------------------
# Every coverage test here runs at confidence 0.8 (nominal rate β = 0.2) and fails above the limit
# of tests/size.py: 100 runs, limit 30, P(fail | rate 0.4) = 0.975 (80 runs: limit 25, 0.933).
@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
@pytest.mark.parametrize("method", ["cp", "fdp", "auto"])
def test_validity_drawn_eps(mechanism, method):
    """100 runs at 1,000 trials per world, ε ~ U[0.5, 4.5] drawn per run, β = 0.2: limit 30,
    P(fail | rate 0.4) = 0.975. At 95 % confidence (200 runs per row, every estimator): the dated
    table of benchmarks/estimators_issue24.md (2026-11-26; at 200 runs a rate of 10 % shows as
    such, but no limit there has power 0.9 against it: this test is the one with power)."""
    rng = np.random.default_rng(stable_seed(mechanism, method, "validity"))

    def draw(r):
        out, inn, truth = MECHANISMS[mechanism](rng, 1000, float(rng.uniform(0.5, 4.5)))
        if method == "auto":
            e = auto_estimate(out, inn, delta=DELTA, claim_is_gdp=True, confidence=0.8, seed=r)[0]
        else:
            e = est.estimate(out, inn, delta=DELTA, method=method, confidence=0.8)
        return e.eps_lb, truth

    count_exceedances(draw, 100, 0.2, f"{method} on {mechanism}")


def test_cp_uses_every_trial_and_beats_the_split():
    rng = np.random.default_rng(4)
    new, old = [], []
    for r in range(20):
        out, inn, _ = _gaussian(rng, 2000, 4.4)
        new.append(est.estimate(out, inn, delta=DELTA, method="cp").eps_lb)
        old.append(est.estimate(out, inn, delta=DELTA, method="cp", select_fraction=0.5, seed=r).eps_lb)
    assert np.median(new) > np.median(old)


def test_cp_no_false_alarm_on_identical_worlds():
    """ε = 0: 100 runs of 300 trials per world, β = 0.2: limit 30, P(fail | rate 0.4) = 0.975."""
    rng = np.random.default_rng(9)

    def draw(r):
        return est.estimate(rng.standard_normal(300), rng.standard_normal(300), delta=DELTA, confidence=0.8).eps_lb, 0.0

    count_exceedances(draw, 100, 0.2, "cp on identical worlds")


def test_one_run_fdp_reports_both_analyses():
    """one-run-fdp names its analysis and Steinke et al.'s bound on the same guesses, which is the
    smaller (its coverage: the size check "one-run-fdp" of tests/test_estimator_size.py)."""
    rng = np.random.default_rng(5)
    s = rng.random(1000) < 0.5
    y = rng.standard_normal(1000) + gdp_mu(4.0, DELTA) * s
    e = est.one_run_fdp(y[~s], y[s], delta=DELTA)
    assert e.method == "one-run-fdp" and 0 < e.counts["steinke_eps"] < e.eps_lb < 4.0
    assert e.eps_lb == pytest.approx(gdp_epsilon(e.mu_lb, DELTA))


# --- sequential --------------------------------------------------------------------------------
def test_sequential_schedule_and_spending():
    sa = SequentialAudit(DELTA, 2.0, 0.95, "cp", max_trials=4000)
    assert sa.looks == [250, 500, 1000, 2000, 4000]
    assert sum(sa.betas) == pytest.approx(0.05) and sa.betas == sorted(sa.betas)
    d = sa.look(np.zeros(100), np.ones(100))
    assert not d.stop and d.verdict == "continue" and d.estimate is None


def test_sequential_stops_early_on_a_clear_violation():
    rng = np.random.default_rng(1)
    out, inn, _ = _gaussian(rng, 8000, 10.0)
    sa = SequentialAudit(DELTA, 1.0, max_trials=8000)
    d = None
    for n in (250, 500, 1000):
        d = sa.look(out[:n], inn[:n])
        if d.stop:
            break
    assert d.stop and d.verdict == "violation" and d.n == 250


def test_sequential_futility_and_ceiling():
    rng = np.random.default_rng(2)
    sa = SequentialAudit(DELTA, 3.0, max_trials=2000)
    d = sa.look(rng.standard_normal(250), rng.standard_normal(250))
    assert not d.stop  # no futility stop before max_trials/4
    d = sa.look(rng.standard_normal(500), rng.standard_normal(500))
    assert d.stop and d.verdict == "consistent" and "futility" in d.reason and d.n == 500
    d = SequentialAudit(DELTA, 20.0, max_trials=1000).look([0.0] * 10, [1.0] * 10)
    assert d.stop and d.verdict == "consistent" and "no attack can certify" in d.reason


def test_sequential_false_violations_within_beta():
    """A claim at the true ε, looks at 250 … 2,000 trials per world: 80 runs at confidence 0.8,
    limit 25, P(fail | rate 0.4) = 0.933."""
    rng = np.random.default_rng(3)

    def violated(r):
        out, inn, truth = _gaussian(rng, 2000, 2.0)
        sa = SequentialAudit(DELTA, truth, 0.8, max_trials=2000)
        for n in sa.looks:
            d = sa.look(out[:n], inn[:n])
            if d.stop:
                break
        return d.verdict == "violation"

    count_failures(violated, 80, 0.2, "a sequential audit of the true ε said violation")


# --- gdp's assumption, checked ------------------------------------------------------------------
def test_shape_check_passes_gaussian_and_rejects_rr_and_laplace():
    rng = np.random.default_rng(6)
    g = [gaussian_shape_check(*_gaussian(rng, 300, 2.0)[:2]).passed for _ in range(40)]
    lap = [gaussian_shape_check(*_laplace(rng, 300, 1.37)[:2]).passed for _ in range(40)]
    rr = [gaussian_shape_check(*_rr(rng, 300, 1.3)[:2]).passed for _ in range(5)]
    assert np.mean(g) >= 0.85 and np.mean(lap) <= 0.1 and not any(rr)


def test_choose_method_reasons():
    assert choose_method(False, False)[0] == "cp"
    assert choose_method(True, True)[0] == "gdp"
    m, why = choose_method(True, False, [0.0, 1.0] * 20, [1.0, 0.0] * 20)
    assert m == "cp" and "discrete" in why


@pytest.mark.parametrize("mechanism, eps", [("laplace", 1.37), ("rr", 1.3)])
def test_auto_false_alarms_within_confidence(mechanism, eps):
    """100 runs at 1,000 trials per world, β = 0.2: limit 30, P(fail | rate 0.4) = 0.975."""
    rng = np.random.default_rng(8)

    def draw(r):
        out, inn, truth = MECHANISMS[mechanism](rng, 1000, eps)
        return auto_estimate(out, inn, delta=DELTA, claim_is_gdp=True, confidence=0.8, seed=r)[0].eps_lb, truth

    count_exceedances(draw, 100, 0.2, f"auto on {mechanism}")


@pytest.mark.parametrize("module", ["audit.stats.estimators.trade_off", "audit.stats.group_sequential", "audit.stats.shape_check"])
def test_modules_import_in_any_order(module):
    import subprocess
    import sys
    code = (f"import {module}; from audit.stats.estimators import fdp; from audit.stats.group_sequential import SequentialAudit; "
            "from audit.stats.shape_check import choose_method; print('ok')")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "ok"


def test_the_names_once_handed_out_lazily_warn_and_still_work():
    """Issue #46: no lazy module handout; the old names are deprecated aliases until 0.3.0."""
    from audit.stats import estimators, group_sequential, shape_check

    with pytest.warns(DeprecationWarning, match="moved to audit.stats.group_sequential.SequentialAudit"):
        assert estimators.SequentialAudit is group_sequential.SequentialAudit
    with pytest.warns(DeprecationWarning, match="moved to audit.stats.shape_check.choose_method"):
        assert estimators.choose_method is shape_check.choose_method
    with pytest.raises(AttributeError):
        estimators.no_such_name
