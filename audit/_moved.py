"""The modules' old homes: until 0.3.0 ``audit/`` was one flat folder, and an old path still imports.

``import audit.game``, ``from audit.game import run_audit`` and ``from audit import game`` give the
module at its new home (the same object, ``audit.play.game``) and warn once, with a
DeprecationWarning that names the new path. One finder on :data:`sys.meta_path` does it, from the
table :data:`MOVED`; a submodule of a moved package (``audit.estimators.core``) follows its package.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType

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
REMOVED_IN = "0.3.0"


def new_home(old: str) -> str | None:
    """The new dotted path of the old path `old`, or None when `old` did not move."""
    head, dot, rest = old.partition(".")
    if head != "audit" or not rest:
        return None
    top = "audit." + rest.split(".")[0]
    return MOVED[top] + old[len(top):] if top in MOVED else None


class OldPathFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of :data:`MOVED` and loads it as the module at its new home."""

    def find_spec(self, fullname: str, path=None, target=None):
        if new_home(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec) -> ModuleType:
        new = new_home(spec.name)
        warnings.warn(f"{spec.name} moved to {new}; the old path goes in {REMOVED_IN}", DeprecationWarning,
                      stacklevel=2)  # the importer: warnings skips the import machinery's frames
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at its new home is already imported."""


def install() -> None:
    """Put the finder first on :data:`sys.meta_path` (once)."""
    if not any(isinstance(f, OldPathFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, OldPathFinder())
