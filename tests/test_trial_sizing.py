"""One module sizes trials (audit.play.trial_sizing): the sizes it gives, pinned from before it gathered
the rules (game.auto_trials and portfolio._certification_trials at 8ea448f), and the old homes' names."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from audit.plan.budget import Budget
from audit.plan.portfolio import Meter
from audit.play import game, trial_sizing
from audit.play.trial_sizing import auto_trials, certification_trials
from targets.base import Level


def _claim(epsilon: float) -> SimpleNamespace:
    return SimpleNamespace(epsilon=epsilon, delta=1e-5)


@pytest.mark.parametrize("epsilon, level, trials", [
    (1.0, Level.MECHANISM, 1000),   # the floor
    (4.0, Level.MECHANISM, 4700),   # cp reaches 1.5 × 4 at 4,700
    (2.0, Level.WEIGHTS, 1000),
    (8.0, Level.WEIGHTS, 4000),     # the training cap: cannot certify 1.5 × 8
    (math.inf, Level.TRACE, 1000),
])
def test_auto_trials_as_before(epsilon, level, trials):
    n, note = auto_trials(_claim(epsilon), level, 0.95)
    assert n == trials
    assert f"{trials:,}" in note or f"{trials}" in note


def test_auto_trials_says_when_the_cap_cannot_certify():
    _, note = auto_trials(_claim(8.0), Level.WEIGHTS, 0.95)
    assert "cannot confirm the claim" in note


class _FixedCostMeter(Meter):
    """The portfolio's meter, its pilots' spending given and every trial and setup at a fixed cost."""

    def __init__(self, budget: Budget, *, trials: int, units: float, cost: float, setup: float) -> None:
        super().__init__(budget, target=None, t0=0.0)
        self.trials, self.units, self._cost, self._setup = trials, units, cost, setup

    def trial_cost(self, cand):
        return self._cost

    def setup_units(self, cand):
        return self._setup


def _meter(budget: Budget, *, trials: int = 400, units: float = 30.0, cost: float = 0.05, setup: float = 2.0):
    return _FixedCostMeter(budget, trials=trials, units=units, cost=cost, setup=setup)


MECHANISM = SimpleNamespace(level=Level.MECHANISM, attack="mechanism-lrt", canary="worst-edge")
WEIGHTS = SimpleNamespace(level=Level.WEIGHTS, attack="lira", canary="worst-edge")


@pytest.mark.parametrize("meter, winner, epsilon, trials, how", [
    (_meter(Budget(units=120.0)), MECHANISM, 1.0, 1760, "88 work units left"),
    (_meter(Budget(units=2000.0)), MECHANISM, 1.0, 39360, "1968 work units left"),
    (_meter(Budget(units=10000.0)), MECHANISM, 1.0, 80000, "capped at 80,000"),
    (_meter(Budget(units=40.0)), MECHANISM, 1.0, 1000, "the fixed-budget default, the floor"),
    (_meter(Budget(trials=5000)), MECHANISM, 1.0, 4600, "the trial budget less the 400 pilot trials"),
    (_meter(Budget(units=500.0), cost=0.2), WEIGHTS, 2.0, 2340, "468 work units left at 0.2 per weights trial"),
    (_meter(Budget(seconds=60.0)), MECHANISM, 1.0, 1000, "no pilot measured a trial's cost"),
])
def test_certification_trials_as_before(meter, winner, epsilon, trials, how):
    n, sizing = certification_trials(meter, winner, [], _claim(epsilon), SimpleNamespace(confidence=0.95))
    assert n == trials
    assert how in sizing


def test_the_cap_extends_the_views_fixed_budget_cap():
    assert trial_sizing.EXTEND * trial_sizing.BUDGET_CAP["mechanism"] == 80_000


def test_the_old_homes_still_hold_the_names():
    assert game.auto_trials is auto_trials
    assert (game.BUDGET_CAP, game.BUDGET_FLOOR, game.BUDGET_MARGIN) == (
        trial_sizing.BUDGET_CAP, trial_sizing.BUDGET_FLOOR, trial_sizing.BUDGET_MARGIN)
