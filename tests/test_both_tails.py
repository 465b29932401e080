"""Scores read both ways: cp and fdp test both orders of the score and pay for it; gdp and bayes
choose the order on held-out trials; the power reading names a reversed order."""
from __future__ import annotations

import numpy as np
import pytest

from audit.stats import estimators as est
from audit.declared_model.declared_joint import deterministic_distinguisher
from audit.stats.estimators.known import gaussian, randomized_response
from audit.records.power import power
from size import count_exceedances

DELTA = 1e-5


@pytest.mark.parametrize("method, mechanism", [("cp", gaussian), ("cp", randomized_response), ("fdp", gaussian)])
def test_two_tailed_bounds_cover_the_truth_with_the_order_reversed(method, mechanism):
    """On exact mechanisms with the score negated (lower means IN), the bound exceeds the true ε at
    most as often as its confidence allows, and still certifies a good share of it (the order is
    read; the attack's own order is covered by tests/test_estimators.py). 80 runs at confidence 0.8:
    limit 25, P(fail | rate 0.4) = 0.933 (tests/size.py)."""
    rng = np.random.default_rng(17)
    bounds, natural = [], []

    def draw(r):
        out, inn, truth = mechanism(rng, 400, 2.0)
        bounds.append(est.estimate(-out, -inn, delta=DELTA, method=method, confidence=0.8, seed=r).eps_lb)
        if r < 10:
            natural.append(est.estimate(out, inn, delta=DELTA, method=method, confidence=0.8, seed=r).eps_lb)
        return bounds[-1], truth

    count_exceedances(draw, 80, 0.2, f"{method} on the reversed {mechanism.__name__}")
    # reversed, the order is paid at a tenth of β: smaller bounds than the attack's order, not all 0
    assert np.median(bounds) <= np.median(natural)
    assert np.mean(np.array(bounds) > 0) >= 0.3


def test_identical_worlds_give_no_false_alarm_in_either_order():
    """ε = 0: 100 runs at confidence 0.8, limit 30, P(fail | rate 0.4) = 0.975 (tests/size.py)."""
    rng = np.random.default_rng(3)

    def draw(i):
        return est.estimate(rng.standard_normal(200), rng.standard_normal(200), delta=DELTA, method="cp",
                            confidence=0.8, seed=i).eps_lb, 0.0

    count_exceedances(draw, 100, 0.2, "cp on identical worlds")


def test_a_reversed_deterministic_distinguisher_is_certified_and_named():
    out, inn = np.ones(500), np.zeros(500)          # lower means IN, no error
    e = est.estimate(out, inn, delta=DELTA, method="cp")
    assert e.direction == est.core.REVERSED
    assert e.eps_lb > 4.0 and e.eps_lb <= e.max_certifiable_eps
    natural = est.estimate(inn, out, delta=DELTA, method="cp")
    assert natural.direction == est.core.HIGHER and natural.eps_lb == pytest.approx(natural.max_certifiable_eps)
    assert e.eps_lb < natural.eps_lb                # the reversed order is paid at a smaller share of β
    why = deterministic_distinguisher(out, inn, e)
    assert why.startswith("deterministic distinguisher") and "lower means IN" in why
    assert deterministic_distinguisher(np.r_[out[:-1], 0.5], inn, e) is None
    assert deterministic_distinguisher(out + 1e-12 * np.arange(500), inn, e) is not None   # float rounding
    assert deterministic_distinguisher(np.zeros(10), np.zeros(10), e) is None
    fdp = est.estimate(out, inn, delta=DELTA, method="fdp")
    assert fdp.direction == est.core.REVERSED and fdp.eps_lb > 3.5


@pytest.mark.parametrize("method", ["gdp", "bayes"])
def test_held_out_methods_choose_the_order_on_held_out_trials(method):
    rng = np.random.default_rng(5)
    out, inn, truth = gaussian(rng, 2000, 2.0)
    e = est.estimate(-out, -inn, delta=DELTA, method=method, samples=100_000)
    same = est.estimate(out, inn, delta=DELTA, method=method, samples=100_000)
    assert same.direction == est.core.HIGHER and e.direction == est.core.REVERSED
    # the negated score in the order chosen on held-out trials is the same test as the score itself
    assert 0 < e.eps_lb <= truth and e.eps_lb == pytest.approx(same.eps_lb, rel=0.02)


def test_power_names_an_auc_far_below_one_half():
    rng = np.random.default_rng(0)
    out, inn = rng.standard_normal(300) + 1.0, rng.standard_normal(300)
    reading = power(verdict="CONSISTENT", claimed_epsilon=1.0, max_certifiable_eps=5.0, scores_out=out,
                    scores_in=inn)
    assert reading.reading == "conclusive" and "reversed" in reading.sentence
    assert reading.auc_interval[1] < 0.5
    natural = power(verdict="CONSISTENT", claimed_epsilon=1.0, max_certifiable_eps=5.0, scores_out=inn,
                    scores_in=out)
    assert "reversed" not in natural.sentence
    flagged = power(verdict="VIOLATION", claimed_epsilon=1.0, max_certifiable_eps=5.0, scores_out=out,
                    scores_in=inn)
    assert "reversed" in flagged.sentence
