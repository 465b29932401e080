"""The names the harness branches on, as values: the estimator methods (:class:`Method`) and the game's
modes (:class:`Mode`), a budget's currency (:class:`Currency`), plus :data:`AUTO`, the "choose for me" of an attack, canary, level or trial count.

Each member is a ``str`` equal to its value (``targets.common.value_enum.ValueEnum``), so specs, options,
stored results and run keys read and write the same plain names as before.
"""
from __future__ import annotations

from targets.common.value_enum import ValueEnum

#: the harness chooses (an attack, a canary, a level, the trials, an estimator)
AUTO = "auto"


class Method(ValueEnum):
    """How trials become an ε lower bound (:func:`audit.stats.estimators.core.estimate`)."""

    CP = "cp"
    GDP = "gdp"
    FDP = "fdp"
    BAYES = "bayes"
    ONE_RUN = "one-run"
    ONE_RUN_FDP = "one-run-fdp"
    AUTO = AUTO


class Mode(ValueEnum):
    """One game per trial (``multi``) or many canaries in one training (``one-run``)."""

    MULTI = "multi"
    ONE_RUN = "one-run"


class Currency(ValueEnum):
    """What a budget counts (:class:`audit.plan.budget.Budget`): trials played, work units (declared
    seconds), or wall seconds."""

    TRIALS = "trials"
    UNITS = "units"
    SECONDS = "s"
