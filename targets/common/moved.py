"""Old import paths that keep working for one release after a move, with a DeprecationWarning.

A shim module calls :func:`alias` with its own name: the module object under the old name becomes the
new module itself, so every name (private ones included) and every later monkeypatch are shared.
Each move is recorded in CHANGELOG.md and in :data:`MOVED`.
"""
from __future__ import annotations

import importlib
import sys
import warnings

#: old module path -> (new module path, the release that moved it, the first release without the old path)
MOVED: dict[str, tuple[str, str, str]] = {
    f"targets.{name}": (f"targets.common.{name}", "0.1.0", "0.3.0")
    for name in ("accounting", "dpsgd", "registry", "stacked_gcn", "stacked_mlp", "trace")
}


def alias(old: str, new: str) -> None:
    """Make `old` an alias of module `new`, warning the importer."""
    _, moved_in, removed_in = MOVED[old]
    warnings.warn(f"{old} moved to {new} in {moved_in}; the old path is removed in {removed_in} "
                  f"(import {new}, or the stable names from targets.api)", DeprecationWarning, stacklevel=3)
    sys.modules[old] = importlib.import_module(new)
