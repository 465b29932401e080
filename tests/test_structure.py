"""The package layering of DESIGN.md, read off the source with ``ast`` (nothing is imported).

graphs → targets → canaries → attacks → audit: arrows are imports and only point left. Every
import counts, module-level or inside a function (a deferred import is still a dependency).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("graphs", "targets", "canaries", "attacks", "audit")
MAX_LINES = 700


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
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
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for n in names:
            if n.split(".")[0] not in PACKAGES:
                continue
            while n and n not in MODULES:  # a name inside a module: the module
                n = n.rpartition(".")[0]
            if n and n != name:
                found.add(n)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _package(module: str) -> str:
    return module.split(".")[0]


@pytest.mark.parametrize("pkg", ["graphs", "targets", "canaries", "attacks"])
def test_lower_layers_never_import_audit(pkg):
    bad = sorted(f"{m} imports {d}" for m, deps in GRAPH.items() if _package(m) == pkg
                 for d in deps if _package(d) == "audit")
    assert not bad, "\n".join(bad)


def test_graphs_is_the_bottom_layer():
    bad = sorted(f"{m} imports {d}" for m, deps in GRAPH.items() if _package(m) == "graphs"
                 for d in deps if _package(d) != "graphs")
    assert not bad, "\n".join(bad)


def test_no_module_is_too_long():
    long = sorted(f"{p.relative_to(REPO)}: {n} lines" for p in MODULES.values()
                  if (n := len(p.read_text().splitlines())) > MAX_LINES)
    assert not long, f"over {MAX_LINES} lines:\n" + "\n".join(long)


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
