"""Enums whose members stand for their names: the levels, the units and the noise laws.

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
