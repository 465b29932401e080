"""An entry of the bug catalogue: one audit of a target and the verdict it should get.

Each target declares its own entries (``Target.catalogue``): its correct configurations and its
planted bugs, each with the audit that should catch it. A *finding* is a faithful configuration (no
planted bug) that the harness shows to VIOLATE its paper's claim; it stays in the catalogue so the
finding is re-checked. ``quick`` entries are cheap enough for CI; the rest run without ``--quick``.
``python -m audit regress`` (:mod:`audit.catalogue`) plays them.
"""
from __future__ import annotations

from dataclasses import dataclass, field


#: ``Entry.auto_expect``: the default's verdict is that of a finding of this configuration (not scored)
FINDING = "finding"


@dataclass(frozen=True)
class Entry:
    """One audit and its expected verdict."""

    target: str
    expect: str
    bug: str | None = None
    epsilon: float = 1.0
    params: dict[str, str] = field(default_factory=dict)
    dataset: str = "csbm"
    canary: str = "auto"
    attack: str = "auto"
    estimator: str = "auto"
    mode: str = "multi"
    trials: int = 400
    quick: bool = True
    why: str = ""
    finding: str = ""  # set when a faithful (bug-free) configuration is expected to VIOLATE its paper's claim
    #: ``regress --auto`` (the default command): the verdict expected where it differs (:data:`FINDING`:
    #: the default audits the standard unit, so its verdict is a finding's, reported but not scored), and
    #: why; a planted bug with a note (its VIOLATION may be its configuration's finding) counts as caught
    #: only beyond the finding (``audit.regress_auto``: above the correct system's exact ε on the pair)
    auto_expect: str | None = None
    auto_note: str = ""
    #: ``regress --auto``: why the default command is known not to reach this entry's verdict yet (listed, not
    #: failed, like ``Target.not_yet_caught``); an entry without it that the default misses fails the catalogue
    auto_miss: str = ""

    @property
    def name(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.target}[{self.bug or 'correct'}{', ' + extra if extra else ''}, ε={self.epsilon:g}" \
               f"{', one-run' if self.mode == 'one-run' else ''}{'' if self.dataset == 'csbm' else ', ' + self.dataset}]"
