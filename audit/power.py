"""How much a verdict knows: the ``power`` reading printed beside every verdict.

* ``budget-limited``: even a perfect attack could not certify the claim with this many trials
  (max certifiable ε < claimed ε): a CONSISTENT verdict says nothing about the target.
* ``no signal``: the attack's AUC interval contains 0.5: it found nothing to tell the worlds apart.
* ``conclusive``: the budget could certify the claim and the attack separates the worlds (a
  CONSISTENT verdict then says: this attack, at this budget, found no violation). An AUC interval
  wholly below 0.5 separates them too, with the score's order reversed (lower means IN): the
  sentence says so, since only an estimator that tests that order (``cp``, ``fdp``: both tails,
  paid for) or chooses it on held-out trials can turn it into a bound.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

READINGS = ("conclusive", "budget-limited", "no signal")


def auc_interval(scores_out: Sequence[float], scores_in: Sequence[float], confidence: float = 0.95
                 ) -> tuple[float, float, float]:
    """(AUC, low, high): the Mann–Whitney AUC (ties count ½) with the Hanley–McNeil (1982)
    normal-approximation interval at ``confidence`` (two-sided), clipped to [0, 1]."""
    out = np.asarray(scores_out, dtype=float)
    inn = np.asarray(scores_in, dtype=float)
    n0, n1 = out.size, inn.size
    if n0 == 0 or n1 == 0:
        return math.nan, 0.0, 1.0
    ranks = stats.rankdata(np.concatenate([out, inn]))
    a = (ranks[n0:].sum() - n1 * (n1 + 1) / 2) / (n0 * n1)
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n0 * n1)
    # at AUC 0 or 1 the formula's variance vanishes; keep one observation's worth of width
    se = math.sqrt(max(var, 1.0 / (4 * n0 * n1)))
    z = stats.norm.ppf(0.5 + confidence / 2)
    return float(a), float(max(0.0, a - z * se)), float(min(1.0, a + z * se))


@dataclass(frozen=True)
class Power:
    reading: str
    sentence: str
    auc_interval: tuple[float, float]

    def to_dict(self) -> dict:
        return {"reading": self.reading, "sentence": self.sentence, "auc_interval": list(self.auc_interval)}


def power(*, verdict: str, claimed_epsilon: float, max_certifiable_eps: float,
          scores_out: Sequence[float], scores_in: Sequence[float], confidence: float = 0.95) -> Power:
    """The power reading of one run (see the module docstring)."""
    _, lo, hi = auc_interval(scores_out, scores_in, confidence)
    reversed_order = hi < 0.5
    if verdict == "VIOLATION":
        return Power("conclusive", "the bound exceeds the claim" + (
            f" (the attack's order reversed: AUC interval [{lo:.3f}, {hi:.3f}] below 0.5)" if reversed_order else ""),
            (lo, hi))
    if math.isfinite(claimed_epsilon) and max_certifiable_eps < claimed_epsilon:
        return Power("budget-limited",
                     f"this run could not have found a violation: max certifiable ε {max_certifiable_eps:.3g} "
                     f"< claimed {claimed_epsilon:.3g} (add trials)", (lo, hi))
    if lo <= 0.5 <= hi:
        return Power("no signal", f"the attack found nothing: its AUC interval [{lo:.3f}, {hi:.3f}] contains 0.5",
                     (lo, hi))
    if reversed_order:
        return Power("conclusive", f"the attack separates the worlds with its order reversed (lower scores mean IN: "
                                   f"AUC interval [{lo:.3f}, {hi:.3f}] below 0.5); the bound reads that order only "
                                   "where the estimator tests both tails or chose the order on held-out trials",
                     (lo, hi))
    return Power("conclusive", "the budget can certify the claim and the attack separates the worlds", (lo, hi))
