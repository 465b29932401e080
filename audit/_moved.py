"""The modules' old homes: until 0.3.0 ``audit/`` was one flat folder, and an old path still imports.

``import audit.game``, ``from audit.game import run_audit`` and ``from audit import game`` give the
module at its new home (the same object, ``audit.play.game``) and warn once, with a
DeprecationWarning that names the new path. The project's one mechanism for moves does it
(:mod:`targets.common.moved`), from the table :data:`MOVED`; a submodule of a moved package
(``audit.estimators.core``) follows its package.
"""
from __future__ import annotations

from targets.common import moved

#: each role folder of audit/ and the modules that moved into it
ROLES = {
    "stats": ("estimators", "privacy_loss", "pair_epsilon", "shape_check", "group_sequential", "family_fit",
              "sampler_check"),
    "declared_model": ("declared", "declared_battery", "declared_joint", "declared_laplace", "declared_moments"),
    "records": ("store", "result", "provenance", "power", "run_report", "campaign_report", "log"),
    "play": ("data", "run_spec", "shared_setup", "trial_runner", "sequential_run", "one_run_audit", "cluster",
             "memory_plan", "private_fit", "relation", "run_outcome", "witness_choice", "game"),
    "plan": ("budget", "pilot_plan", "portfolio", "catalogue", "campaign", "regress_auto"),
    "console": ("cli", "exit_status"),
}
#: old dotted path -> new dotted path
MOVED = {f"audit.{module}": f"audit.{role}.{module}" for role, modules in ROLES.items() for module in modules}
MOVED_IN, REMOVED_IN = "0.2.0", "0.3.0"


def new_home(old: str) -> str | None:
    """The new dotted path of the old path `old`, or None when `old` did not move."""
    home = moved.new_home(old)
    return home[0] if home is not None and old.split(".")[0] == "audit" else None


def install() -> None:
    """Register audit's moves with the project's finder (:func:`targets.common.moved.register`)."""
    moved.register({old: (new, MOVED_IN, REMOVED_IN) for old, new in MOVED.items()})
