"""The measured-law score (:mod:`attacks.measured_law`): exact noise-free constraints only where the
residuals are exactly 0 and numerous enough to say so, shrinkage where they are few, and a size test
with power on a Gaussian mechanism of known ε, with its mutant (the score fitted on the very trials
that certify it) failing the same test."""
from __future__ import annotations

import numpy as np
import pytest

from attacks.measured_law import N_FIT_MIN, MeasuredLaw, MeasuredLawLRT, ledoit_wolf
from audit.stats import estimators as est
from size import count_exceedances, limit, stable_seed
from targets.common.accounting import gdp_epsilon

P, MU, RHO = 80, 1.0, 0.6
#: δ where the cp bound of a few hundred trials can reach the truth (ε(δ) of μ-GDP)
DELTA = 0.1
REPS, BETA = 400, 0.05
#: the false-positive rate the frozen threshold aims at
FPR = 0.1


def _mechanism(p: int = P, mu: float = MU):
    """A Gaussian mechanism with AR(1) noise of correlation RHO: (mean shift d, Cholesky L)."""
    cov = RHO ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    L = np.linalg.cholesky(cov)
    d = np.ones(p)
    d *= mu / np.sqrt(d @ np.linalg.solve(cov, d))  # ‖Σ^{-1/2} d‖ = μ: the mechanism is μ-GDP, exactly
    return d, L


def _draw(rng, n, shift, L):
    return rng.standard_normal((n, L.shape[0])) @ L.T + shift


def _audit(r: int, *, mutant: bool, trials: int = 100) -> tuple[float, float]:
    """One audit: the score and its threshold (world 0's upper FPR-quantile of the fit releases)
    frozen, then cp at that one threshold on the certification trials."""
    rng = np.random.default_rng(stable_seed("measured-law size", r))
    d, L = _mechanism()
    out, inn = _draw(rng, trials, 0.0, L), _draw(rng, trials, d, L)
    if mutant:  # the score fitted on the certification trials themselves
        fit0, fit1 = out, inn
    else:       # fitted on releases of its own, then read on fresh trials
        n = max(N_FIT_MIN, 2 * P + 8)
        fit0, fit1 = _draw(rng, n, 0.0, L), _draw(rng, n, d, L)
    law = MeasuredLaw(fit0, fit1)
    threshold = float(np.quantile(law.scores(fit0), 1 - FPR))
    e = est.estimate(law.scores(out), law.scores(inn), delta=DELTA, method="cp", confidence=1 - BETA,
                     threshold=threshold)
    return e.eps_lb, gdp_epsilon(MU, DELTA)


@pytest.fixture
def one_blas_thread():
    """Small SVDs under many BLAS threads on a loaded box take seconds each; one thread, milliseconds."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(1):
        yield


def test_size_of_the_measured_law_score_on_a_gaussian_mechanism(one_blas_thread):
    count_exceedances(lambda r: _audit(r, mutant=False), REPS, BETA, "measured-law (fitted apart)")


def test_the_mutant_fitted_on_the_certification_trials_fails_the_size_test(one_blas_thread):
    with pytest.raises(AssertionError, match="the bound exceeded the true ε"):
        count_exceedances(lambda r: _audit(r, mutant=True), REPS, BETA, "measured-law (fitted on its trials)")


def test_the_size_limit_has_power_against_twice_the_nominal_rate():
    assert limit(REPS, BETA) < REPS  # limit() raises where P(fail | rate 2β) < 0.9


def test_a_null_direction_of_too_few_residuals_is_shrunk_never_inverted():
    rng = np.random.default_rng(0)
    d, L = _mechanism()
    law = MeasuredLaw(_draw(rng, 10, 0.0, L), _draw(rng, 10, d, L))  # 18 residuals, 40 entries: singular
    assert law.constraints == []
    x = _draw(rng, 200, 0.0, L)
    s = law.scores(x)
    assert np.isfinite(s).all() and np.abs(s).max() < 1e3  # no direction weighted as if noise-free
    assert np.linalg.eigvalsh(ledoit_wolf(x - x.mean(0))).min() > 0


def test_a_combination_without_noise_is_a_constraint_that_separates_the_worlds():
    """Noise shared by two entries (their difference exact) while the canary moves only one."""
    rng = np.random.default_rng(1)

    def draw(n, shift):
        z = rng.standard_normal((n, 1)) * 5.0
        x = np.hstack([z, z, rng.standard_normal((n, 3))])
        x[:, 0] += shift
        return x

    law = MeasuredLaw(draw(64, 0.0), draw(64, 0.3))
    assert law.constraints
    s0, s1 = law.scores(draw(100, 0.0)), law.scores(draw(100, 0.3))
    assert s0.max() < s1.min()


def test_the_attack_separates_a_users_target_whose_steps_share_one_draw(small_csbm):
    import torch

    from canaries.edge import RandomEdge
    from targets.base import get
    from test_user_targets import _path

    target = get(_path("shared_noise.py:SharedNoise"))()
    pair = RandomEdge().worlds(small_csbm, np.random.default_rng(0))
    attack = MeasuredLawLRT()
    attack.bind_target(target)
    attack.bind_run(0)
    scores = [attack.score_batch([target.fit(pair.world(b), torch.Generator().manual_seed(100 + 2 * j + b))
                                  for j in range(20)], pair, small_csbm) for b in (0, 1)]
    assert max(scores[0]) < min(scores[1])


def test_a_deviation_puts_the_measured_law_first_among_the_scores_that_exploit_it():
    from audit.plan import portfolio, portfolio_choice

    pool = [portfolio.Candidate("mechanism", a, "worst-edge")
            for a in ("mechanism-lrt", "learned-mechanism", "exact-rows", "measured-law")]
    rows = [{"level": "mechanism", "attack": "mechanism-lrt", "canary": "auto", "status": "piloted"}]
    left = portfolio_choice.act_on_deviation("mechanism", "noise-free: 40 entries without noise", pool, rows)
    assert [c.attack for c in left] == ["exact-rows", "measured-law", "learned-mechanism"]  # the named test's first
    assert all("exploits" in c.pointed_by for c in left)
    rows = [{"level": "mechanism", "attack": "mechanism-lrt", "canary": "auto", "status": "piloted"}]
    left = portfolio_choice.act_on_deviation("mechanism", "shared-steps: correlation 1", pool, rows)
    assert [c.attack for c in left] == ["measured-law", "learned-mechanism", "exact-rows"]


def test_without_a_deviation_the_measured_law_waits_behind_every_other_candidate():
    from audit.plan import portfolio, portfolio_choice
    from audit.play.data import load
    from targets.base import get
    from test_user_targets import _path

    target = get(_path("aggregation.py:Aggregation"))()
    pool, _ = portfolio.candidates(target, load("csbm:n=120,features=8"))
    names = [c.attack for c in pool]
    first = names.index("measured-law")
    assert first > 0 and set(names[first:]) == {"measured-law", "measured-scale"}  # the scores fitted per pair


def test_the_fit_releases_come_from_the_run_seed_apart_from_the_trial_streams(small_csbm):
    """Two runs of different seeds fit on different releases, one seed on the same ones; the fit's
    generators are four-word SeedSequences (the trial streams' are three words: never equal)."""
    import torch

    from canaries.edge import RandomEdge
    from targets.base import get
    from test_user_targets import _path

    target = get(_path("aggregation.py:Aggregation"))()
    pair = RandomEdge().worlds(small_csbm, np.random.default_rng(0))

    def first_fit(seed: int) -> torch.Tensor:
        attack = MeasuredLawLRT()
        attack.bind_target(target)
        attack.bind_run(seed)
        return attack.fit_releases(pair, 1, 2)[0].mechanism[0].output

    assert torch.equal(first_fit(0), first_fit(0)) and not torch.equal(first_fit(0), first_fit(1))
    unbound = MeasuredLawLRT()
    unbound.bind_target(target)
    with pytest.raises(ValueError, match="bind_run"):
        unbound.fit_releases(pair, 0, 1)


def test_the_budget_charges_the_fit_it_draws(small_csbm):
    """pair_units_on counts the fit releases the Layout's entries ask for (2 × fit_count × the view's
    cost), never more than pair_units, the most; the Meter charges it once per pair."""
    import time

    import torch

    from attacks.measured_law import N_FIT_MAX, fit_count
    from audit.plan import portfolio, portfolio_choice
    from audit.plan.budget import Budget
    from targets.base import get
    from test_user_targets import _path

    target = get(_path("aggregation.py:Aggregation"))()
    release = target.fit(small_csbm, torch.Generator().manual_seed(0))
    cols = release.mechanism[0].output.shape[1]
    cost = target.trial_cost("mechanism")
    expected = 2 * fit_count(7 * cols) * cost  # 6 rows read and the column sums, one step
    assert MeasuredLawLRT.pair_units_on(target, "mechanism", release) == pytest.approx(expected)
    most = MeasuredLawLRT.pair_units(target, "mechanism")
    assert most == pytest.approx(2 * N_FIT_MAX * cost) and most >= expected
    meter = portfolio.Meter(Budget(units=120.0), target, time.time(), lambda: release)
    cand = portfolio.Candidate("mechanism", "measured-law", "auto")
    meter.charge(cand, 40)
    again = portfolio.Candidate("mechanism", "measured-law", "auto")
    assert meter.setup_units(again) == 0.0
    assert meter.units == pytest.approx(target.setup_cost() + expected + 40 * cost)
