"""Which code produced a set of trials: the key that keeps stored trials from going stale.

A run's trials are reused only for the same options *and* the same code. The code identity is:

* the package version and the result record's format (:data:`audit.records.result.FORMAT`);
* when the package runs from a git checkout: the git trees of the source folders at HEAD and a hash
  of the uncommitted diff (tracked changes and untracked source files). The commit is recorded for
  the reader but is not part of the key: a commit that touches only docs, benchmarks or results
  leaves stored trials current, one that touches a source folder does not;
* a hash of the source files of the target, attack and canary involved, wherever they live (a
  user's ``pkg.module:Class`` included; a module inside a package hashes the package's folder, so
  an edit to any of its files counts), and of the project modules those files import at module
  level, transitively (``targets/gap/`` imports ``targets/common/stacked_mlp.py``: an edit there counts
  too, also outside a git checkout).

``code_identity(...)["key"]`` is what the store keys trials by (with the options' hash).
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from audit.records.result import FORMAT

REPO = Path(__file__).resolve().parents[2]
#: the project's own source folders (what a diff of the checkout covers)
SOURCE_DIRS = ("graphs", "targets", "canaries", "attacks", "audit")


def package_version() -> str:
    try:
        return importlib.metadata.version("dpgnn-audit")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.decode(errors="replace") if done.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def _checkout_base() -> tuple[str | None, str | None, bool]:
    """(commit, hash of the source folders' git trees at HEAD, whether REPO is a git checkout);
    cached: HEAD does not move under a process."""
    top = _git("rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != REPO:
        return None, None, False
    commit = _git("rev-parse", "HEAD")
    trees = _git("ls-tree", "HEAD", "--", *SOURCE_DIRS)  # one "mode tree <id>\tname" line per folder
    tree = hashlib.sha256(trees.encode()).hexdigest()[:16] if trees else None
    return (commit.strip() if commit else None), tree, True


def checkout() -> dict[str, Any]:
    """The git commit, the source folders' trees at HEAD and a hash of what differs from HEAD in
    them (None outside a checkout). Untracked files count by content, so a new module changes the
    hash too."""
    commit, tree, is_checkout = _checkout_base()
    if not is_checkout:
        return {"commit": None, "tree": None, "diff": None}
    diff = _git("diff", "HEAD", "--", *SOURCE_DIRS) or ""
    untracked = (_git("ls-files", "--others", "--exclude-standard", "--", *SOURCE_DIRS) or "").split()
    if not diff and not untracked:
        return {"commit": commit, "tree": tree, "diff": None}
    h = hashlib.sha256(diff.encode())
    for name in sorted(untracked):
        path = REPO / name
        if path.suffix == ".py" and path.is_file():
            h.update(name.encode())
            h.update(path.read_bytes())
    return {"commit": commit, "tree": tree, "diff": h.hexdigest()[:16]}


def _source_files(obj: Any) -> list[Path]:
    """The files whose content defines ``obj`` (a class, a module or a path): its module's file,
    or every ``.py`` file of the package folder when the module is inside a package."""
    if isinstance(obj, (str, Path)):
        path = Path(obj)
    else:
        module = obj if inspect.ismodule(obj) else sys.modules.get(getattr(obj, "__module__", ""), None)
        file = getattr(module, "__file__", None)
        if file is None:
            return []
        path = Path(file)
    path = path.resolve()
    if path.parent.joinpath("__init__.py").exists() and path.parent != REPO:
        return sorted(path.parent.rglob("*.py"))
    return [path]


def _module_file(name: str, base: Path) -> Path | None:
    """The file of module `name` (dotted, relative to the folder `base`), if there is one."""
    path = base.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate.resolve()
    return None


_IMPORTS_SEEN: dict[tuple[Path, int, int], list[Path]] = {}


def _imported(file: Path) -> list[Path]:
    """Project files (under :data:`SOURCE_DIRS`) that `file` imports at module level: what runs when
    it is imported (an import inside a function is a lazy dependency of that function only). Parsed
    once per version of the file in a process (keyed on its modification time and size): a default
    run asks for its code identity once per candidate."""
    try:
        stat = file.stat()
    except OSError:
        return []
    key = (file, stat.st_mtime_ns, stat.st_size)
    if key not in _IMPORTS_SEEN:
        _IMPORTS_SEEN[key] = _parse_imports(file)
    return list(_IMPORTS_SEEN[key])


def _parse_imports(file: Path) -> list[Path]:
    try:
        body = ast.parse(file.read_text()).body
    except (OSError, SyntaxError, ValueError):
        return []
    names: list[tuple[str, Path]] = []
    for node in body:
        if isinstance(node, ast.Import):
            names += [(a.name, REPO) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = REPO if node.level == 0 else file.parents[node.level - 1]
            module = node.module or ""
            names += [(f"{module}.{a.name}".strip("."), base) for a in node.names] + [(module, base)] * bool(module)
    roots = [(REPO / d).resolve() for d in SOURCE_DIRS]
    found = (_module_file(name, base) for name, base in names)
    return [f for f in found if f is not None and any(f.is_relative_to(r) for r in roots)]


def _with_imports(files: set[Path]) -> set[Path]:
    """`files` and the project files they import at module level, transitively."""
    seen, todo = set(files), list(files)
    while todo:
        for dep in _imported(todo.pop()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def source_hash(*objs: Any) -> str:
    """sha256 (16 hex) of the source files of ``objs`` (classes, modules or paths) and of the project
    modules they import (:func:`_with_imports`)."""
    files = sorted(_with_imports({f.resolve() for obj in objs for f in _source_files(obj)}))
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def code_identity(*objs: Any) -> dict[str, Any]:
    """The code identity of a run that uses ``objs`` (its target, attack and canary classes)."""
    ident = {"version": package_version(), "format": FORMAT, **checkout(), "sources": source_hash(*objs)}
    keyed = {k: v for k, v in ident.items() if k != "commit"}  # the code, not the history around it
    ident["key"] = hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:16]
    return ident


def describe(ident: dict[str, Any]) -> str:
    """One line: ``0.1.0 @ 4d61183 (+diff 1a2b…) sources 9f3c…``."""
    where = f" @ {ident['commit'][:7]}" if ident.get("commit") else ""
    dirty = f" +diff {ident['diff'][:7]}" if ident.get("diff") else ""
    return f"code {ident.get('key', '?')[:8]} ({ident.get('version', '?')}{where}{dirty}, sources {ident.get('sources', '?')[:8]})"
