"""How much a verdict knows: the ``power`` reading printed beside every verdict.

* ``budget-limited``: even a perfect attack could not certify the claim with this many trials
  (max certifiable ε < claimed ε): a CONSISTENT verdict says nothing about the target.
* ``no signal``: the attack's AUC interval contains 0.5: it found nothing to tell the worlds apart.
* ``conclusive``: the budget could certify the claim and the attack separates the worlds (a
  CONSISTENT verdict then says: this attack, at this budget, found no violation). An AUC interval
  wholly below 0.5 separates them too, with the score's order reversed (lower means IN): the
  sentence says so, since only an estimator that tests that order (``cp``, ``fdp``: both tails,
  paid for) or chooses it on held-out trials (``gdp``, ``bayes``) turns it into a bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import stats

from audit.records.result import number

READINGS = ("conclusive", "budget-limited", "no signal")


def auc_interval_from(auc: float, n0: int, n1: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Hanley–McNeil (1982) normal-approximation interval of an AUC at ``confidence``
    (two-sided), clipped to [0, 1], from the AUC and the two worlds' trial counts alone (what a
    campaign row keeps: no scores). (0, 1) where either count is 0 or the AUC is unknown."""
    a = float(auc)
    if n0 <= 0 or n1 <= 0 or not math.isfinite(a):
        return 0.0, 1.0
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n0 * n1)
    # at AUC 0 or 1 the formula's variance vanishes; keep one observation's worth of width
    se = math.sqrt(max(var, 1.0 / (4 * n0 * n1)))
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    return max(0.0, a - z * se), min(1.0, a + z * se)


def auc_interval(scores_out: Sequence[float], scores_in: Sequence[float], confidence: float = 0.95
                 ) -> tuple[float, float, float]:
    """(AUC, low, high): the Mann–Whitney AUC (ties count ½) with :func:`auc_interval_from`'s interval."""
    out = np.asarray(scores_out, dtype=float)
    inn = np.asarray(scores_in, dtype=float)
    n0, n1 = out.size, inn.size
    if n0 == 0 or n1 == 0:
        return math.nan, 0.0, 1.0
    ranks = stats.rankdata(np.concatenate([out, inn]))
    a = float((ranks[n0:].sum() - n1 * (n1 + 1) / 2) / (n0 * n1))
    return (a, *auc_interval_from(a, n0, n1, confidence))


@dataclass(frozen=True)
class Power:
    reading: str
    sentence: str
    auc_interval: tuple[float, float] | None

    def to_dict(self) -> dict:
        interval = list(self.auc_interval) if self.auc_interval is not None else None
        return {"reading": self.reading, "sentence": self.sentence, "auc_interval": interval}


def reading(verdict: str, claimed_epsilon: float, max_certifiable_eps: float,
            interval: tuple[float, float] | None) -> Power:
    """The power reading (see the module docstring) from the AUC interval (None: unknown)."""
    reversed_order = interval is not None and interval[1] < 0.5
    if verdict == "VIOLATION":
        return Power("conclusive", "the bound exceeds the claim" + (
            f" (the attack's order reversed: AUC interval [{interval[0]:.3f}, {interval[1]:.3f}] below 0.5)"
            if reversed_order else ""), interval)
    if math.isfinite(claimed_epsilon) and math.isfinite(max_certifiable_eps) and max_certifiable_eps < claimed_epsilon:
        return Power("budget-limited",
                     f"this run could not have found a violation: max certifiable ε {max_certifiable_eps:.3g} "
                     f"< claimed {claimed_epsilon:.3g} (add trials)", interval)
    if interval is None:
        return Power("conclusive", "the budget can certify the claim (AUC interval unknown)", None)
    lo, hi = interval
    if lo <= 0.5 <= hi:
        return Power("no signal", f"the attack found nothing: its AUC interval [{lo:.3f}, {hi:.3f}] contains 0.5",
                     interval)
    if reversed_order:
        return Power("conclusive", f"the attack separates the worlds with its order reversed (lower scores mean IN: "
                                   f"AUC interval [{lo:.3f}, {hi:.3f}] below 0.5); the bound reads that order only "
                                   "where the estimator tests both tails or chose the order on held-out trials",
                     interval)
    return Power("conclusive", "the budget can certify the claim and the attack separates the worlds", interval)


def power(*, verdict: str, claimed_epsilon: float, max_certifiable_eps: float,
          scores_out: Sequence[float], scores_in: Sequence[float], confidence: float = 0.95) -> Power:
    """The power reading of one run from its scores."""
    _, lo, hi = auc_interval(scores_out, scores_in, confidence)
    return reading(verdict, claimed_epsilon, max_certifiable_eps, (lo, hi))


def record_power(r: dict[str, Any], confidence: float = 0.95) -> dict[str, Any] | None:
    """How much a stored row's verdict knows: its stored ``power``, else the reading from the row
    (verdict, claimed ε, max certifiable ε, and the AUC interval from the AUC and trials/2 a world)."""
    if r.get("power"):
        return r["power"]
    if r.get("verdict") not in ("VIOLATION", "CONSISTENT"):
        return None
    interval = None
    if r.get("auc") is not None and r.get("trials"):
        n = int(r["trials"])
        interval = auc_interval_from(r["auc"], n // 2, n - n // 2, confidence)
    return reading(r["verdict"], number(r.get("claimed_epsilon")), number(r.get("max_certifiable_eps")),
                   interval).to_dict()
