"""Enums whose members stand for their names: the release views (:class:`Level`), the units a DP
claim protects (:class:`Unit`) and the noise laws (``targets.common.noise.NoiseLaw``).

A member is a ``str`` equal to its value (``Level.API == "api"``, with the same hash, so either
spelling finds a dict entry), and it prints, formats, serialises (JSON, sqlite) and reprs as that
value. Threading the enums through therefore leaves every printed line, stored record and run key
as the plain names made them (Python 3.11's ``str``-mixin enums format as ``Level.API``; this base
does not).
"""
from __future__ import annotations

from enum import Enum


class ValueEnum(str, Enum):
    """A ``str``-valued enum shown as its value (module docstring)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __repr__(self) -> str:
        return repr(self.value)


class Level(ValueEnum):
    """A release view an adversary may observe (its threat level), by the name results and flags use."""

    API = "api"
    WEIGHTS = "weights"
    MECHANISM = "mechanism"
    TRACE = "trace"


class Unit(ValueEnum):
    """What a target's DP guarantee protects."""

    EDGE = "edge"
    NODE = "node"
