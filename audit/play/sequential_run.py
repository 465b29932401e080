"""Sequential audits in the game: ``run --sequential`` plays trials in growing blocks and stops as
soon as the verdict is settled (the test is :class:`audit.stats.group_sequential.SequentialAudit`).

Looks. Trials 2k and 2k+1 take opposite bits (:func:`audit.play.trial_runner.secret_bit`), so the 2n trials from
an even index on hold exactly n trials of each world. Look j reads trial indices
[offset, offset + 2·n_j), n_j = first·2^j per world and the last n_j the whole budget's, with
first = max(FIRST_LOOK_MIN, ⌈budget / 16⌉), so at most five looks; each world's trials in index
order. The looks' index sets are fixed by the spec before any trial, so what a look reads never
depends on an outcome, nor on the order the trials were played in (workers, ``--jobs``,
``--batch``, a resumed store).

Validity. Look j tests at level β_j with Σ β_j = β: the reported ε_lb is the stopping look's own
bound at its own level, and P(it exceeds the true ε) ≤ P(some look's does) ≤ β. It is never
recomputed on the stopped data at level β (that would be optional stopping). Stopping early as
CONSISTENT (futility, or a budget too small to certify the claim at all) cannot add a false VIOLATION.

The estimator is fixed before the first look (:func:`audit.play.estimation.plan_estimator`). Where ``auto`` leaves gdp
or cp to the Gaussian-shape test, a pilot of ⌈0.3 · budget⌉ trials per world (the share the
fixed-budget run holds out for the same test) is played first: it runs the test and, when gdp is
chosen, picks gdp's threshold. No look reads the pilot, so each look's bound is independent of the
choice, and the looks' budget is what the pilot leaves.

Stored trials are shared with fixed-budget runs of the same spec: trial i is the same whoever plays
it and the looks' index sets are fixed, so reusing them is valid; the result's run id says ``seq``.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.stats import estimators
from audit.stats.group_sequential import SEQUENTIAL_METHODS, SequentialAudit
from audit.stats.shape_check import CHECK_FRACTION, choose_method
from audit.stats.kinds import Method

#: trials per world at the first look, at least
FIRST_LOOK_MIN = 25
#: at most this many looks (the first at budget / 2^(MAX_LOOKS − 1))
MAX_LOOKS = 5
#: the smallest look budget (per world) worth a sequential test; below it the fixed budget is played
MIN_BUDGET = 8

Rows = list[tuple[int, int, float]]
#: :func:`audit.play.estimation.plan_estimator`'s method when ``auto`` leaves gdp or cp to a held-out Gaussian-shape test
AUTO_SHAPE = "auto-shape"


@dataclass(frozen=True)
class Outcome:
    rows: Rows
    estimate: estimators.Estimate
    verdict: str
    why: str
    policy: str
    record: dict[str, Any]


def first_look(per_world: int) -> int:
    """Trials per world at the first look of a `per_world` budget."""
    return max(FIRST_LOOK_MIN, math.ceil(per_world / 2 ** (MAX_LOOKS - 1)))


def worlds(rows: Rows) -> tuple[np.ndarray, np.ndarray]:
    """(OUT scores, IN scores), each in index order."""
    rows = sorted(rows)
    bits = np.array([b for _, b, _ in rows], dtype=int)
    scores = np.array([s for _, _, s in rows], dtype=float)
    return scores[bits == 0], scores[bits == 1]


def run(spec: Any, claim: Any, plan: tuple[str, float | None, str, str], play: Callable[[list[int]], None],
        stored: Callable[[int], Rows]) -> tuple[Outcome | None, str]:
    """Play `spec`'s looks until one settles the verdict. `plan`: :func:`audit.play.estimation.plan_estimator`'s
    (method, a-priori threshold, why, policy); `play(indices)` plays those not stored yet;
    `stored(hi)` gives the stored rows with index < hi. Returns (outcome, "") or, where the
    estimator has no sequential form or the budget is too small, (None, why not)."""
    method, prior, why, policy = plan
    per_world = spec.trials // 2
    if method not in SEQUENTIAL_METHODS and method != AUTO_SHAPE:
        return None, f"the {method} estimator has no sequential form: the fixed budget was played"
    pilot = math.ceil(CHECK_FRACTION * per_world) if method == AUTO_SHAPE else 0
    if per_world - pilot < MIN_BUDGET:
        return None, f"{per_world - pilot} trials per world for the looks (< {MIN_BUDGET}): the fixed budget was played"
    kw = dict(delta=claim.delta, confidence=spec.confidence)
    offset = 2 * pilot
    if method == AUTO_SHAPE:
        play(list(range(offset)))
        p_out, p_in = worlds(stored(offset))
        method, reason = choose_method(True, False, p_out, p_in)
        if method == Method.GDP:
            prior = estimators.select_threshold("gdp", p_out, p_in, **kw)
        why = (f"auto: {reason} (sequential: tested on a pilot of {pilot} trials per world that no look reads"
               + ("; gdp's threshold chosen on it too)" if method == Method.GDP else ")"))

    sa = SequentialAudit(claim.delta, claim.epsilon, spec.confidence, method, max_trials=per_world - pilot,
                         first_look=first_look(per_world - pilot), threshold=prior)

    def look_rows(n: int) -> tuple[Rows, Rows]:
        """(every stored row up to look n's end, look n's rows), playing what is missing."""
        hi = offset + 2 * n
        play(list(range(offset, hi)))
        rows = stored(hi)
        return rows, [r for r in rows if r[0] >= offset]

    d = sa.look([], [])  # stops at once if no attack could certify the claim within the budget
    rows: Rows = []
    for n in sa.looks:
        if d.stop:
            break
        rows, mine = look_rows(n)
        d = sa.look(*worlds(mine))
    est = d.estimate
    if est is None:  # stopped before any look: report the first look's bound at its level
        rows, mine = look_rows(sa.looks[0])
        est = estimators.estimate(*worlds(mine), delta=claim.delta, method=method, confidence=1 - sa.betas[0],
                                  threshold=prior)
    evaluated = [h for h in sa.history if h.estimate is not None]
    record = {"on": True, "budget": spec.trials, "trials_used": len(rows), "pilot_per_world": pilot,
              "looks_per_world": sa.looks, "look_betas": [float(b) for b in sa.betas],
              "looks_evaluated": len(evaluated), "stopped_at_look": d.look, "beta_spent": float(d.beta_spent), "stop": d.verdict, "reason": d.reason,
              "history": [{"look": h.look, "n_per_world": h.n, "eps_lb": h.estimate.to_dict()["eps_lb"],
                           "decision": h.verdict} for h in evaluated]}
    return Outcome(rows, est, d.verdict.upper(), why, policy, record), ""
