"""The library's notices (reused trials, memory plans, pilots, preprocessing) go through :mod:`logging`,
under the ``audit`` logger; the CLI sets their level (``--quiet``: warnings only, ``--verbose``: debug).

By default they are printed as before: one line each, on the process's standard error as it is when
the line is written (so a redirected or captured stream receives them). An application that wants
them elsewhere removes :data:`HANDLER` from ``logging.getLogger("audit")`` and adds its own.
"""
from __future__ import annotations

import logging
import sys


class _CurrentStderr(logging.StreamHandler):
    """A stream handler bound to whatever ``sys.stderr`` is when a record is emitted."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # the base class assigns it; the live sys.stderr is used instead
        pass


LOGGER = logging.getLogger("audit")
HANDLER = _CurrentStderr()
HANDLER.setFormatter(logging.Formatter("%(message)s"))
if not any(isinstance(h, _CurrentStderr) for h in LOGGER.handlers):
    LOGGER.addHandler(HANDLER)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False


def get(name: str) -> logging.Logger:
    """The logger of module `name` (a child of ``audit``)."""
    return LOGGER.getChild(name.removeprefix("audit."))


def set_verbosity(*, quiet: bool = False, verbose: bool = False) -> None:
    """``--quiet``: warnings and errors only; ``--verbose``: debug records too; neither: notices (INFO)."""
    LOGGER.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)
