"""What a portfolio run has spent of its budget (:class:`Meter`), in the budget's own currency, and the pilots'
share and sizes: the pilots, the sampler's and the node's check releases and the certification all draw on it
(:func:`audit.plan.portfolio.run`).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable

from attacks import base as attacks
from audit.plan.budget import Budget, Currency
from audit.plan.portfolio_candidates import Candidate
from audit.stats import family_fit, node_family
from targets import base as targets
from targets.base import Level

#: share of the budget the pilots may spend
PILOT_SHARE = 0.3
#: trials one pilot plays, by level (views that train a model cost more per trial)
PILOT_TRIALS = {Level.MECHANISM: 200, Level.TRACE: 200, Level.WEIGHTS: 60, Level.API: 60}
#: the fewest trials a pilot is worth playing (half of them choose, half are held out)
PILOT_MIN = 40

class Meter:
    """What the pilots have spent of the budget, in its own currency: trials, work units (each
    candidate's declared cost: :meth:`targets.base.Target.trial_cost` per trial, and
    :meth:`~targets.base.Target.setup_cost` for the first pilot on each (view, canary), whose pair,
    check and caches the later ones share) or seconds. Trials and units spend the same on any
    machine; seconds do not."""

    def __init__(self, budget: Budget, target: targets.Target, t0: float,
                 probe: Callable[[], targets.Release | None] = lambda: None) -> None:
        self.budget, self.target, self.t0, self.probe = budget, target, t0, probe
        self.trials, self.units = 0, 0.0
        self.setups: set[tuple[str, ...]] = set()

    def setup_units(self, cand: Candidate) -> float:
        """Units the candidate's first trial costs beyond the others: the target's setup on a new
        (view, canary), and the attack's :meth:`~attacks.base.Attack.pair_units` on a new pair (a
        learned distinguisher's training releases)."""
        target = 0.0 if (cand.level, cand.canary) in self.setups else self.target.setup_cost()
        attack = 0.0 if (cand.level, cand.canary, cand.attack) in self.setups else \
            attacks.get(cand.attack).pair_units_on(self.target, cand.level, self.probe())
        return target + attack

    def pilot_size(self, cand: Candidate, rows_so_far: int) -> int:
        """How many of the level's pilot trials fit in what is left of the pilot share (even; below
        :data:`PILOT_MIN` the pilot is not played)."""
        n = PILOT_TRIALS[cand.level]
        left = self.left(PILOT_SHARE, cand)
        currency = self.budget.currency
        if currency == Currency.TRIALS:
            n = min(n, int(left))
        elif currency == Currency.UNITS:
            n = min(n, int(left / self.trial_cost(cand)))
        elif rows_so_far and left <= 0:
            return 0
        return n // 2 * 2

    def left(self, share: float = 1.0, cand: Candidate | None = None) -> float:
        """What is left of `share` of the budget, in its currency (:attr:`Budget.currency`): trials not yet
        charged, work units less `cand`'s setup where it has not been paid, or wall seconds."""
        b = self.budget
        if b.trials is not None:
            return float(math.floor(share * b.trials) - self.trials)
        if b.units is not None:
            return share * b.units - self.units - (self.setup_units(cand) if cand is not None else 0.0)
        return share * (b.seconds or 0.0) - (time.time() - self.t0)

    def trial_cost(self, cand: Candidate) -> float:
        """Units one trial of the candidate costs: the target's fit of the view and the attack's score."""
        return self.target.trial_cost(cand.level) + attacks.get(cand.attack).score_cost

    def charge(self, cand: Candidate, n: int) -> None:
        self.units += self.setup_units(cand) + n * self.trial_cost(cand)
        self.setups.update({(cand.level, cand.canary), (cand.level, cand.canary, cand.attack)})
        self.trials += n

    def sampler_releases(self, cost: float) -> tuple[int, str | None]:
        """How many releases the family fit's sampler checks read (:mod:`audit.stats.family_fit`), charged
        here at `cost` units (declared seconds) per release: :data:`~audit.stats.family_fit.SAMPLER_SHARE` of
        what is left, at most ``SAMPLER_RELEASES``; or (0, why) where fewer than ``MIN_SAMPLER_RELEASES`` fit."""
        unit, left = self.budget.currency, self.left()
        n = self._releases(cost, family_fit.SAMPLER_RELEASES, family_fit.MIN_SAMPLER_RELEASES, family_fit.SAMPLER_SHARE)
        if not n:  # the length check still reads the probe release, at no cost
            accounting = family_fit.accounting_check(self.probe().view(Level.TRACE))
            cost = 1.0 if unit == Currency.TRIALS else cost
            return 0, (f"budget-limited: measuring the sampler needs {family_fit.MIN_SAMPLER_RELEASES} releases "
                       f"(~{family_fit.MIN_SAMPLER_RELEASES * cost:.3g} {unit}, at most {family_fit.SAMPLER_SHARE:g} "
                       f"of what is left), {max(left, 0.0):.3g} {unit} left; the subsampled-Gaussian fit is refused, "
                       "cp certifies" + (f"; {accounting}" if accounting else ""))
        return n, None

    def node_releases(self, cost: float) -> tuple[int, str | None]:
        """How many releases the whole-node fit's k_t check reads (:mod:`audit.stats.node_family`), charged as
        :meth:`sampler_releases`'s are: :data:`~audit.stats.node_family.NODE_SHARE` of what is left, at most
        ``NODE_RELEASES``; or (0, why) where fewer than ``MIN_NODE_RELEASES`` fit."""
        unit, left = self.budget.currency, self.left()
        n = self._releases(cost, node_family.NODE_RELEASES, node_family.MIN_NODE_RELEASES, node_family.NODE_SHARE)
        if not n:
            return 0, (f"budget-limited: checking the node's k_t needs {node_family.MIN_NODE_RELEASES} releases (at "
                       f"most {node_family.NODE_SHARE:g} of what is left), {max(left, 0.0):.3g} {unit} left; the "
                       "whole-node fit is refused, cp certifies")
        return n, None

    def _releases(self, cost: float, most: int, fewest: int, share: float) -> int:
        """Releases at `cost` units each (one trial each in trials) that `share` of what is left buys, at most
        `most`, charged; 0 (nothing charged) where fewer than `fewest`."""
        unit, left = self.budget.currency, self.left()
        cost = 1.0 if unit == Currency.TRIALS else cost
        n = min(most, int(share * max(left, 0.0) / cost))
        if n < fewest:
            return 0
        self.units += n * cost if unit == Currency.UNITS else 0.0
        self.trials += n if unit == Currency.TRIALS else 0
        return n
