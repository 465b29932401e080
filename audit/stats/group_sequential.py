"""Sequential audits with early stopping (alpha spending over a fixed schedule of looks).

A :class:`SequentialAudit` tests one claim ε at δ as trials accumulate. Looks happen at a schedule
fixed in advance, n_j = first·2^j trials per world (j = 0, 1, …) and the last at ``max_trials``; look
j spends β_j = β·2^j / (2^J − 1) (J looks, Σ β_j = β, later looks with more trials get more), and
evaluates the chosen estimator on the *first* n_j trials of each world at confidence 1 − β_j.
A violation is declared at the first look whose bound exceeds the claim, so by the union bound the
probability of ever declaring a false violation is ≤ Σ β_j = β, however the looks' results are
used to stop. Looks that are skipped (the caller passed more trials than the next look) simply
forfeit their β_j. Stopping for futility (verdict ``consistent``) never raises the false-violation
rate, so its rule is free: from the first look with ≥ max_trials/4 trials on, we stop once the
observed error rates, projected to ``max_trials`` trials and bounded at 50% confidence, cannot
exceed the claim, or when no attack could certify the
claim within ``max_trials`` at all.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from audit.stats import estimators as _e
from audit.stats.kinds import Method

SEQUENTIAL_METHODS = (Method.CP, Method.FDP, Method.GDP, Method.BAYES)
_FUTILITY_BETA = 0.5


def look_schedule(max_trials: int, first: int = 250) -> list[int]:
    """Trials per world at each look: first, 2·first, 4·first, … below max_trials, then max_trials."""
    if max_trials < 4 or first < 4:
        raise ValueError("max_trials and first must be ≥ 4")
    looks, n = [], first
    while n < max_trials:
        looks.append(n)
        n *= 2
    looks.append(int(max_trials))
    return looks


@dataclass(frozen=True)
class Decision:
    """The outcome of one look. ``verdict``: ``violation`` (the claim is refuted at the audit's
    confidence), ``consistent`` (stopped: the claim can no longer be refuted within max_trials),
    or ``continue``. ``estimate`` is None when no scheduled look was due."""

    stop: bool
    verdict: str
    estimate: "_e.Estimate | None"
    n: int
    look: int | None
    beta_spent: float
    reason: str = ""


class SequentialAudit:
    """Group-sequential test of the claim (claimed_eps, delta) at `confidence`.

    Call :meth:`look` with all scores seen so far (each world's trials in the order they were
    played); it evaluates the latest scheduled look not yet evaluated that the data covers.
    ``threshold``: one fixed before any trial of the looks (an exact LLR's 0, or one chosen on a
    pilot the looks never use); every look then counts all its trials at that threshold (fdp, which
    sweeps every threshold, ignores it).
    """

    def __init__(self, delta: float, claimed_eps: float, confidence: float = 0.95, method: str = "cp",
                 max_trials: int = 8000, first_look: int = 250, threshold: float | None = None):
        if method not in SEQUENTIAL_METHODS:
            raise ValueError(f"sequential method must be one of {SEQUENTIAL_METHODS}, got {method!r}")
        if not claimed_eps > 0:
            raise ValueError(f"claimed_eps must be > 0, got {claimed_eps!r}")
        self.delta = _e.check_method_delta(method, delta)
        self.claimed_eps = float(claimed_eps)
        self.confidence = _e.check_confidence(confidence)
        self.method = method
        self.threshold = threshold
        self.max_trials = int(max_trials)
        self.looks = look_schedule(self.max_trials, first_look)
        beta = 1.0 - self.confidence
        w = 2.0 ** np.arange(len(self.looks))
        self.betas = list(beta * w / w.sum())
        self._next = 0
        self.spent = 0.0
        self.history: list[Decision] = []
        self.done: Decision | None = None

    def max_certifiable(self) -> float:
        """What a perfect attack could certify at the last look."""
        n = self.max_trials
        return _e.max_certifiable_eps(Method.CP if self.method == Method.BAYES else self.method, n, n, delta=self.delta,
                                      confidence=1 - self.betas[-1])

    def look(self, scores_out: Sequence[float], scores_in: Sequence[float]) -> Decision:
        if self.done is not None:
            return self.done
        out = np.asarray(scores_out, float).ravel()
        inn = np.asarray(scores_in, float).ravel()
        n = min(out.size, inn.size)
        if self._next == 0 and self.max_certifiable() <= self.claimed_eps:
            return self._finish(Decision(True, "consistent", None, n, None, 0.0,
                                         f"no attack can certify ε > {self.claimed_eps} with {self.max_trials} "
                                         f"trials per world (ceiling {self.max_certifiable():.3f})"))
        due = [j for j in range(self._next, len(self.looks)) if self.looks[j] <= n]
        if not due:
            return Decision(False, "continue", None, n, None, self.spent, "no look due yet")
        j = due[-1]
        self.spent += self.betas[j]  # skipped looks forfeit their β
        self._next = j + 1
        nj = self.looks[j]
        est = _e.estimate(out[:nj], inn[:nj], delta=self.delta, method=self.method, confidence=1 - self.betas[j],
                          threshold=self.threshold)
        if est.eps_lb > self.claimed_eps:
            return self._finish(Decision(True, "violation", est, nj, j, self.spent,
                                         f"ε_lb {est.eps_lb:.3f} > claimed {self.claimed_eps} at look {j} "
                                         f"(β_j = {self.betas[j]:.2e})"))
        if j == len(self.looks) - 1:
            return self._finish(Decision(True, "consistent", est, nj, j, self.spent, "last look: no violation"))
        proj = self._projection(est, nj)
        if 4 * nj >= self.max_trials and proj <= self.claimed_eps:
            return self._finish(Decision(True, "consistent", est, nj, j, self.spent,
                                         f"futility: the observed rates at {self.max_trials} trials would "
                                         f"certify only {proj:.3f} ≤ {self.claimed_eps:.4g}"))
        return self._record(Decision(False, "continue", est, nj, j, self.spent, f"projected {proj:.3f}"))

    def _projection(self, est: "_e.Estimate", nj: int) -> float:
        """The bound the attack's observed (FP, FN) rates would give at the last look, at a single
        threshold with no correction and at 50% confidence, by the look's own method (gdp reads the
        same counts as a larger ε than cp: projecting gdp with cp would stop audits gdp can win).
        Optimistic on purpose: stopping for futility must not waste power."""
        c = est.counts
        if not c or "fp" not in c:
            return float("inf")
        # the last look evaluates as large a share of its trials as this one did (held-out splits)
        n = max(1, int(round(self.max_trials * c["n_out"] / nj)))
        fp = int(round(c["fp"] / c["n_out"] * n))
        fn = int(round(c["fn"] / c["n_in"] * n))
        if self.method == Method.GDP:
            return float(_e.gdp_epsilon(float(_e.gdp_mu_bound(fp, fn, n, n, _FUTILITY_BETA)), self.delta))
        return float(_e.cp_bound(fp, fn, n, n, self.delta, _FUTILITY_BETA))

    def _record(self, d: Decision) -> Decision:
        self.history.append(d)
        return d

    def _finish(self, d: Decision) -> Decision:
        self.done = d
        return self._record(d)
