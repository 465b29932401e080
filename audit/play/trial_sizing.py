"""How many trials a run plays: the one place that sizes them.

* a named run with ``--trials auto`` (:func:`auto_trials`): the fewest whose max certifiable ε under cp
  is a margin above the claim, between a floor and a cap by view (:data:`NAMED_RUN_DEFAULT` where no
  rule applies, as in a one-run audit);
* the default portfolio's certification (:func:`certification_trials`): what its budget leaves after
  the pilots, with :func:`auto_trials` as the floor and :data:`EXTEND` times the view's cap as the top.

A sequential run plays at most the trials sized here; its looks (:mod:`audit.play.sequential_run`)
only split them.
"""
from __future__ import annotations

import math
from typing import Any

from audit.play.run_spec import AuditSpec
from audit.stats import estimators
from audit.stats.kinds import Currency
from targets import base as targets
from targets.base import Level

#: trials of a named run given ``--trials auto`` before a rule sizes it (a one-run audit keeps it)
NAMED_RUN_DEFAULT = 1000
#: the most trials ``run`` spends on its own (``--trials auto``), by whether a trial trains a model
BUDGET_CAP = {"mechanism": 20_000, "training": 4_000}
#: the fewest: below this the AUC and the power reading say little
BUDGET_FLOOR = 1_000
#: the budget must let a perfect attack certify this multiple of the claim
BUDGET_MARGIN = 1.5
#: a time budget may extend the certification up to this multiple of the view's fixed-budget cap
EXTEND = 4


def auto_trials(claim: targets.Claim, level: Level, confidence: float) -> tuple[int, str]:
    """Trials for ``--trials auto``: the fewest (≥ BUDGET_FLOOR, a multiple of 100) whose max
    certifiable ε under the assumption-free cp is ≥ BUDGET_MARGIN × the claim, capped by the cost of
    a trial; and a one-line note, which says so when no budget under the cap can certify the claim."""
    cap = BUDGET_CAP["mechanism" if level == Level.MECHANISM else "training"]
    if not math.isfinite(claim.epsilon):
        return BUDGET_FLOOR, f"{BUDGET_FLOOR} trials (the claim is ε = ∞: nothing to certify)"
    goal = BUDGET_MARGIN * claim.epsilon

    def reaches(n: int) -> bool:
        return estimators.max_certifiable_eps("cp", n // 2, n // 2, delta=claim.delta, confidence=confidence) >= goal

    if not reaches(cap):
        best = estimators.max_certifiable_eps("cp", cap // 2, cap // 2, delta=claim.delta, confidence=confidence)
        return cap, (f"{cap:,} trials, the most this run spends on a {level} audit: even a perfect attack could "
                     f"certify only ε {best:.3g} < {BUDGET_MARGIN} × claim {claim.epsilon:.3g} (cp), so a "
                     "CONSISTENT verdict here cannot confirm the claim")
    lo, hi = 0, cap // 100  # in hundreds of trials
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(100 * mid) else (mid, hi)
    n = max(BUDGET_FLOOR, 100 * hi)
    return n, f"{n:,} trials: a perfect attack could certify ≥ {BUDGET_MARGIN} × the claimed ε {claim.epsilon:.3g} (cp)"


def certification_trials(meter: Any, winner: Any, piloted: list[dict[str, Any]], claim: targets.Claim,
                         spec: AuditSpec) -> tuple[int, str]:
    """The certification's trial budget (even, ≥ 8) and how it was sized, for the portfolio's winner
    (:class:`audit.plan.portfolio.Candidate`) after the pilots that its meter
    (:class:`audit.plan.meter.Meter`) charged."""
    currency = meter.budget.currency
    if currency == Currency.TRIALS:
        n = max(8, int(meter.left()) // 2 * 2)
        return n, f"the trial budget less the {meter.trials:,} pilot trials"
    fixed, _ = auto_trials(claim, winner.level, spec.confidence)
    cap = EXTEND * BUDGET_CAP["mechanism" if winner.level == Level.MECHANISM else "training"]
    if currency == Currency.UNITS:
        cost = meter.trial_cost(winner)
        left = meter.left(cand=winner)
        n, what = int(left / cost) // 2 * 2, f"{max(left, 0):g} work units left at {cost:g} per {winner.level} trial"
    else:
        rate = [r["seconds"] / r["trials"] for r in piloted
                if (r["level"], r["attack"], r["canary"]) == (winner.level, winner.attack, winner.canary)]
        if not rate:
            return fixed, "the fixed-budget default (no pilot measured a trial's cost)"
        left = meter.left()
        n, what = int(left / max(rate[0], 1e-6)) // 2 * 2, \
            f"{max(left, 0):.0f}s left at the pilot's {rate[0] * 1e3:.1f} ms per trial"
    if n <= fixed:
        return fixed, f"the fixed-budget default, the floor ({what} would give {max(n, 0):,})"
    return min(n, cap), f"{what} (capped at {cap:,}; the fixed default {fixed:,} is the floor)"
