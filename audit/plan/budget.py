"""An audit's budget: a number of trials, work units, or wall-clock time (``--budget 2000``,
``--budget 120u``, ``--budget 5m``).

A work unit is one second of a trial's declared cost (:meth:`targets.base.Target.trial_cost`, the
seconds one trial of a view takes on the reference machine). A budget in trials or units spends the
same trials on any machine, so the same seed gives the same result; a time budget spends what the
machine affords in that time, and the result records the trial counts that reproduce it.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from audit.stats.kinds import Currency

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh])\s*$")
_WORK = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*u\s*$")


class BudgetError(ValueError):
    """A budget that cannot be read."""


@dataclass(frozen=True)
class Budget:
    """Exactly one of ``trials`` (the most trials the run plays, pilots included), ``units`` (work
    units, pilots included) or ``seconds``."""

    trials: int | None = None
    seconds: float | None = None
    units: float | None = None

    def __post_init__(self) -> None:
        if sum(v is not None for v in (self.trials, self.seconds, self.units)) != 1:
            raise BudgetError("a budget is either trials, work units or seconds")
        if self.trials is not None and self.trials < 8:
            raise BudgetError(f"a trial budget must be at least 8 trials, got {self.trials}")
        for what, value in (("time", self.seconds), ("work", self.units)):
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise BudgetError(f"a {what} budget must be positive, got {value}")

    @property
    def currency(self) -> Currency:
        """The budget's currency (the one of its three fields that is set)."""
        if self.trials is not None:
            return Currency.TRIALS
        return Currency.UNITS if self.units is not None else Currency.SECONDS

    @property
    def reproducible(self) -> bool:
        """Whether the budget spends the same trials on any machine (trials or work units)."""
        return self.seconds is None

    def describe(self) -> str:
        if self.trials is not None:
            return f"{self.trials:,} trials"
        if self.units is not None:
            return f"{self.units:g} work units"
        s = self.seconds or 0.0
        return f"{s / 60:g} min" if s >= 60 else f"{s:g} s"


def parse(text: str) -> Budget:
    """``"5m"``, ``"90s"``, ``"1.5h"`` (time), ``"120u"`` (work units) or ``"2000"`` (trials)."""
    text = str(text)
    found = _TIME.match(text)
    if found:
        return Budget(seconds=float(found.group(1)) * _UNITS[found.group(2)])
    found = _WORK.match(text)
    if found:
        return Budget(units=float(found.group(1)))
    if re.fullmatch(r"\s*\d+\s*", text):
        return Budget(trials=int(text))
    raise BudgetError("a budget is a trial count (e.g. 2000), work units (e.g. 120u) or a duration "
                      f"(e.g. 90s, 5m, 1h), got {text!r}")
