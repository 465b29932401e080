"""The bug catalogue: correct configurations and planted bugs, each with the audit that should
catch it and the verdict it should get.

An entry is one audit (target, ε, parameters, bug, canary, attack, estimator, trial budget) and
its expected verdict; each target declares its own (``Target.catalogue``, ``Target.not_yet_caught``). A *finding* is a faithful configuration (no planted bug) that the harness
shows to VIOLATE its paper's claim; it stays in the catalogue so the finding is re-checked. ``quick`` entries are cheap enough for CI; the rest run without ``--quick``.
Bugs no attack of this version catches yet are listed under :data:`NOT_YET_CAUGHT`
with the reason, so the gap is visible instead of silently missing; `regress` prints them.

Flaky audits are bugs: a correct configuration must come out CONSISTENT at the stated confidence,
so each correct entry's false-alarm rate over seeds is at most 1 − confidence (measured by
``tests/test_catalogue.py`` on the exact Gaussian reference).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from targets import base as targets
from targets.common.catalogue import Entry as TargetEntry


@dataclass(frozen=True)
class Entry(TargetEntry):
    """One audit and its expected verdict (:class:`targets.common.catalogue.Entry`), playable."""

    def spec(self, seed: int = 0) -> Any:
        from audit.play.game import AuditSpec

        return AuditSpec(target=self.target, epsilon=self.epsilon, bug=self.bug, params=dict(self.params),
                         dataset=self.dataset, canary=self.canary, attack=self.attack, trials=self.trials,
                         seed=seed, estimator=self.estimator, mode=self.mode)


def _gathered() -> tuple[list[Entry], dict[tuple[str, str], str]]:
    """Every registered target's entries and uncaught bugs, target by target in registration order."""
    entries: list[Entry] = []
    gaps: dict[tuple[str, str], str] = {}
    for name in targets.REGISTRY.names():
        cls = targets.get(name)
        entries += [Entry(**{f.name: getattr(e, f.name) for f in dataclasses.fields(e)}) for e in cls.catalogue]
        gaps.update({(name, bug): why for bug, why in cls.not_yet_caught.items()})
    return entries, gaps


CATALOGUE, NOT_YET_CAUGHT = _gathered()
#: CATALOGUE: every entry; NOT_YET_CAUGHT: planted bugs no attack of this version catches yet, and why


def entries(*, quick: bool = False, target: str | None = None) -> list[Entry]:
    return [e for e in CATALOGUE if (not quick or e.quick) and (target is None or e.target == target)]
