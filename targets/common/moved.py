"""Old import paths that keep working for a while after a move, with a DeprecationWarning: the one
mechanism for every package of the project.

A package states its moves as a table, old dotted path → (new dotted path, the release that moved it,
the first release without the old path), and :func:`register`\\s it. One finder on :data:`sys.meta_path`
then answers an import of an old path with the module at its new home (the same object, so every name,
private ones included, and every later monkeypatch are shared), and warns once with a
DeprecationWarning that names the new path. A submodule of a moved package follows its package
(``audit.estimators.core`` → ``audit.stats.estimators.core``). Each move is in CHANGELOG.md.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType

#: a move: (new dotted path, the release that moved it, the first release without the old path)
Move = tuple[str, str, str]

#: targets' own moves (0.1.0: the shared helpers went to targets/common/)
MOVED: dict[str, Move] = {
    f"targets.{name}": (f"targets.common.{name}", "0.1.0", "0.3.0")
    for name in ("accounting", "dpsgd", "registry", "stacked_gcn", "stacked_mlp", "trace")
}
#: every registered move, of every package
_TABLE: dict[str, Move] = {}


def new_home(old: str) -> tuple[str, Move] | None:
    """The new dotted path of the old path `old` and its move, or None when `old` did not move."""
    parts = old.split(".")
    for cut in range(len(parts), 0, -1):  # the longest moved prefix: a package's submodules follow it
        top = ".".join(parts[:cut])
        if top in _TABLE:
            move = _TABLE[top]
            return move[0] + old[len(top):], move
    return None


class OldPathFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of a registered table and loads it as the module at its new home."""

    def find_spec(self, fullname: str, path=None, target=None):
        if new_home(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec) -> ModuleType:
        new, (_, moved_in, removed_in) = new_home(spec.name)  # type: ignore[misc]
        warnings.warn(f"{spec.name} moved to {new} in {moved_in}; the old path is removed in {removed_in} "
                      f"(import {new})", DeprecationWarning,
                      stacklevel=2)  # the importer: warnings skips the import machinery's frames
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at its new home is already imported."""


def register(moves: dict[str, Move]) -> None:
    """Add `moves` to the table and put the finder first on :data:`sys.meta_path` (once)."""
    _TABLE.update(moves)
    if not any(isinstance(f, OldPathFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, OldPathFinder())


register(MOVED)
