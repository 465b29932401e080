"""The package layering of DESIGN.md, read off the source with ``ast`` (nothing is imported).

graphs → targets → canaries | attacks → audit: arrows are imports and only point left, and the
two middle layers never import each other. Inside audit/, the role folders follow their own order
(:data:`AUDIT_ALLOWED`: stats → declared_model → records → play → plan → console), and a module there
has at most :data:`MAX_AUDIT_LINES` lines. Every import counts, module-level or inside a function
(a deferred import is still a dependency). No module outside ``targets/`` names a target: it
neither imports a target's module nor spells a registered target's name in its code (docstrings
aside); targets declare what the other layers need through hooks on ``targets.base.Target``.
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("graphs", "targets", "canaries", "attacks", "audit")
#: the packages each package may import (DESIGN.md's arrows)
ALLOWED = {
    "graphs": {"graphs"},
    "targets": {"graphs", "targets"},
    "canaries": {"graphs", "targets", "canaries"},
    "attacks": {"graphs", "targets", "attacks"},
    "audit": set(PACKAGES),
}
#: modules of targets/ that are not targets: the contract and the shared helpers
SHARED_TARGET_MODULES = ("targets.base", "targets.common")
MAX_LINES = 700
#: audit/'s role folders and the folders each may import (itself included): the arrows point one way
AUDIT_ALLOWED = {
    "stats": {"stats"},
    "declared_model": {"stats", "declared_model"},
    "records": {"stats", "records"},
    "play": {"stats", "declared_model", "records", "play"},
    "plan": {"stats", "declared_model", "records", "play", "plan"},
    "testing": {"stats", "declared_model", "records", "play", "plan", "testing"},
    "console": {"stats", "declared_model", "records", "play", "plan", "console"},
    "face": {"face"},
}
AUDIT_FOLDERS = ("stats", "declared_model", "records", "play", "plan", "console")
#: the modules at audit/'s top, and the role each plays
AUDIT_TOP = {"audit": "face", "audit._moved": "face", "audit.testing": "testing", "audit.__main__": "console"}
MAX_AUDIT_LINES = 400
#: the modules of audit/ still over MAX_AUDIT_LINES, each to be split by job (issue #46); only shrinks
AUDIT_TOO_LONG: set[str] = set()


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = modules(REPO)


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports (``from pkg import mod`` resolves to ``pkg.mod``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for n in names:
            if n.split(".")[0] not in PACKAGES:
                continue
            while n and n not in known:  # a name inside a module: the module
                n = n.rpartition(".")[0]
            if n and n != name:
                found.add(n)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


GRAPH = import_graph(REPO)


def _package(module: str) -> str:
    return module.split(".")[0]


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that points up or sideways in the layer order."""
    return sorted(f"{m} imports {d}" for m, deps in graph.items() for d in deps
                  if _package(d) not in ALLOWED[_package(m)])


def audit_role(module: str) -> str | None:
    """The role folder of a module of audit/ (None outside audit/ or in no role)."""
    if module in AUDIT_TOP:
        return AUDIT_TOP[module]
    parts = module.split(".")
    return parts[1] if parts[0] == "audit" and len(parts) > 1 and parts[1] in AUDIT_FOLDERS else None


def role_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import inside audit/ that points against the role order, and every module in no role."""
    bad = sorted(f"{m} is in no role folder" for m in graph if _package(m) == "audit" and audit_role(m) is None)
    return bad + sorted(f"{m} imports {d}" for m, deps in graph.items() if audit_role(m)
                        for d in deps if audit_role(d) and audit_role(d) not in AUDIT_ALLOWED[audit_role(m)])


def _is_target_module(module: str) -> bool:
    return _package(module) == "targets" and module != "targets" and not any(
        module == shared or module.startswith(shared + ".") for shared in SHARED_TARGET_MODULES)


def _target_names() -> set[str]:
    from targets.base import REGISTRY

    return set(REGISTRY.names())


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def names_of_targets(root: Path, graph: dict[str, set[str]], names: set[str]) -> list[str]:
    """Every place outside targets/ that names a target: an import of a target's module, or a string
    in the code (not a docstring) that is a registered target's name or a target module's path."""
    found = sorted(f"{m} imports {d}" for m, deps in graph.items() if _package(m) != "targets"
                   for d in deps if _is_target_module(d))
    target_modules = {m for m in graph if _is_target_module(m)}
    for module, path in modules(root).items():
        if _package(module) == "targets":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                text = node.value
                if text in names or any(t in text for t in target_modules):
                    found.append(f"{module}:{node.lineno} names a target: {text!r}")
    return found


def private_reads_of_targets(root: Path) -> list[str]:
    """Every place outside targets/ that reads a private member of a target (``target._x``,
    ``self.target._x``): the other layers use the hooks ``Target`` declares."""
    found = []
    for module, path in modules(root).items():
        if _package(module) == "targets":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
                if owner.endswith("target"):
                    found.append(f"{module}:{node.lineno} reads {owner}.{node.attr}")
    return found


@pytest.mark.parametrize("pkg", ["graphs", "targets", "canaries", "attacks"])
def test_lower_layers_never_import_audit(pkg):
    bad = sorted(f"{m} imports {d}" for m, deps in GRAPH.items() if _package(m) == pkg
                 for d in deps if _package(d) == "audit")
    assert not bad, "\n".join(bad)


def test_graphs_is_the_bottom_layer():
    bad = sorted(f"{m} imports {d}" for m, deps in GRAPH.items() if _package(m) == "graphs"
                 for d in deps if _package(d) != "graphs")
    assert not bad, "\n".join(bad)


def test_every_import_follows_the_layer_order():
    bad = layer_violations(GRAPH)
    assert not bad, "imports against graphs → targets → canaries | attacks → audit:\n" + "\n".join(bad)


def test_every_import_in_audit_follows_the_role_order():
    bad = role_violations(GRAPH)
    assert not bad, "imports against audit/'s role order (AUDIT_ALLOWED):\n" + "\n".join(bad)


def test_the_role_order_has_no_cycle():
    arrows = {role: allowed - {role} for role, allowed in AUDIT_ALLOWED.items()}
    assert not _cycles(arrows)
    assert all(role in allowed for role, allowed in AUDIT_ALLOWED.items())


def test_no_module_outside_targets_names_a_target():
    bad = names_of_targets(REPO, GRAPH, _target_names())
    assert not bad, "\n".join(bad)


def test_no_module_outside_targets_reads_a_targets_private_member():
    bad = private_reads_of_targets(REPO)
    assert not bad, "\n".join(bad)


@pytest.fixture(scope="module")
def copy_of_the_packages(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    for pkg in PACKAGES:
        shutil.copytree(REPO / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _fresh_copy(packages: Path, tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(packages, root)
    return root


def _plant(root: Path, module: str, line: str) -> None:
    path = root / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = root / module.replace(".", "/") / "__init__.py"
    path.write_text(path.read_text() + "\n" + line + "\n")


def _findings(checker: str, root: Path) -> list[str]:
    if checker == "private":
        return private_reads_of_targets(root)
    graph = import_graph(root)
    if checker == "roles":
        return role_violations(graph)
    return layer_violations(graph) if checker == "layers" else names_of_targets(root, graph, _target_names())


@pytest.mark.parametrize("checker, module, line, expected", [
    ("layers", "targets.base", "from attacks import base as _planted", "targets.base imports attacks.base"),
    ("layers", "canaries.edge", "import attacks.linkteller", "canaries.edge imports attacks.linkteller"),
    ("layers", "attacks.mechanism", "from canaries import node as _planted", "attacks.mechanism imports canaries.node"),
    ("layers", "graphs.ops", "from targets import base as _planted", "graphs.ops imports targets.base"),
    ("names", "canaries.edge", "_PLANTED = 'heterpoisson'", "canaries.edge:"),
    ("names", "audit.play.game", "def _planted(target):\n    return target.name == 'gcon'", "audit.play.game:"),
    ("names", "attacks.mechanism", "from targets.gap import GAP as _planted", "attacks.mechanism imports targets.gap"),
    ("names", "audit.console.cli", "_PLANTED = 'targets.caribou.given_input:CaribouGivenInput'", "audit.console.cli:"),
    ("roles", "audit.stats.pair_epsilon", "from audit.play import game as _planted",
     "audit.stats.pair_epsilon imports audit.play.game"),
    ("roles", "audit.records.store", "import audit.plan.budget", "audit.records.store imports audit.plan.budget"),
    ("roles", "audit.stats.family_fit", "from audit.declared_model import declared as _planted",
     "audit.stats.family_fit imports audit.declared_model.declared"),
    ("private", "canaries.sensitivity", "def _planted(target, g):\n    return target._private_edges(g, 0)",
     "canaries.sensitivity:"),
])
def test_the_checkers_flag_a_planted_violation(copy_of_the_packages, tmp_path, checker, module, line, expected):
    """Each checker passes the untouched copy and flags the one line planted in it."""
    root = _fresh_copy(copy_of_the_packages, tmp_path)
    assert not _findings(checker, root)
    _plant(root, module, line)
    found = _findings(checker, root)
    assert any(f.startswith(expected) for f in found), found


def test_a_docstring_may_name_a_target(copy_of_the_packages, tmp_path):
    root = _fresh_copy(copy_of_the_packages, tmp_path)
    _plant(root, "audit.play.game", 'def _documented():\n    """As GCON\'s paper (gcon) says."""')
    assert not names_of_targets(root, import_graph(root), _target_names())


def test_no_module_is_too_long():
    long = sorted(f"{p.relative_to(REPO)}: {n} lines" for p in MODULES.values()
                  if (n := len(p.read_text().splitlines())) > MAX_LINES)
    assert not long, f"over {MAX_LINES} lines:\n" + "\n".join(long)


def test_no_module_of_audit_is_too_long():
    """At most MAX_AUDIT_LINES lines in audit/, but for the modules still listed in AUDIT_TOO_LONG,
    which the list must name exactly (a split module leaves it)."""
    long = {m for m, p in MODULES.items() if _package(m) == "audit"
            and len(p.read_text().splitlines()) > MAX_AUDIT_LINES}
    assert long == AUDIT_TOO_LONG, f"over {MAX_AUDIT_LINES} lines: {sorted(long)}; listed: {sorted(AUDIT_TOO_LONG)}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules():
    cycles = _cycles(GRAPH)
    assert not cycles, "import cycles:\n" + "\n".join(" ↔ ".join(c) for c in cycles)


#: a record read with a silent default (issue #46): a claim's fields are typed, and a pair's or a release's
#: record is read through ``recorded(key)``, which says None where it is silent
SILENT_READS = ("details[", "details.get(", "info.get(")


def _silent_reads(root: Path) -> list[str]:
    found = []
    for pkg in ("attacks", "audit", "canaries", "targets"):
        for path in sorted((root / pkg).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if any(s in line for s in SILENT_READS):
                    found.append(f"{path.relative_to(root)}:{n}")
    return found


def test_no_record_is_read_with_a_silent_default():
    assert _silent_reads(REPO) == []


def test_the_silent_read_check_finds_a_planted_one(tmp_path):
    for pkg in ("attacks", "audit", "canaries", "targets"):
        (tmp_path / pkg).mkdir()
    (tmp_path / "attacks" / "planted.py").write_text("def f(pair):\n    return pair.info.get('edge', 0)\n")
    assert _silent_reads(tmp_path) == ["attacks/planted.py:2"]
