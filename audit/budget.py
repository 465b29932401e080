"""An audit's budget: a number of trials, or wall-clock time (``--budget 2000``, ``--budget 5m``)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh])\s*$")


class BudgetError(ValueError):
    """A budget that cannot be read."""


@dataclass(frozen=True)
class Budget:
    """Exactly one of ``trials`` (the most trials the run plays, pilots included) or ``seconds``."""

    trials: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if (self.trials is None) == (self.seconds is None):
            raise BudgetError("a budget is either trials or seconds")
        if self.trials is not None and self.trials < 8:
            raise BudgetError(f"a trial budget must be at least 8 trials, got {self.trials}")
        if self.seconds is not None and not (self.seconds > 0 and math.isfinite(self.seconds)):
            raise BudgetError(f"a time budget must be a positive duration, got {self.seconds}")

    def describe(self) -> str:
        if self.trials is not None:
            return f"{self.trials:,} trials"
        s = self.seconds or 0.0
        return f"{s / 60:g} min" if s >= 60 else f"{s:g} s"


def parse(text: str) -> Budget:
    """``"5m"``, ``"90s"``, ``"1.5h"`` (time) or ``"2000"`` (trials)."""
    text = str(text)
    found = _TIME.match(text)
    if found:
        return Budget(seconds=float(found.group(1)) * _UNITS[found.group(2)])
    if re.fullmatch(r"\s*\d+\s*", text):
        return Budget(trials=int(text))
    raise BudgetError(f"a budget is a trial count (e.g. 2000) or a duration (e.g. 90s, 5m, 1h), got {text!r}")
