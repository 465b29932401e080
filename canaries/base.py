"""The canary contract, its pair of worlds, and the registry of canaries.

A canary says how two neighbouring worlds differ: :meth:`Canary.worlds` returns a
:class:`CanaryPair` (``g0`` without the canary, ``g1`` with it, and ``info`` describing the choice).
One-run audits ask for many canaries at once (:meth:`Canary.many`); a canary that cannot make them
keeps the default, which says so.

Adding a canary: a class deriving from :class:`Canary` (``name``, ``unit``, ``worlds``) and one
``register(name, cls)`` line, or ``--canary package.module:Class`` without registering.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from targets import base as targets


@dataclass
class CanaryPair:
    """Two neighbouring worlds and what tells them apart."""

    g0: Any
    g1: Any
    info: dict[str, Any] = field(default_factory=dict)

    def __iter__(self):
        yield self.g0
        yield self.g1

    def world(self, bit: int) -> Any:
        return self.g1 if bit else self.g0


class Canary:
    """A way to build two neighbouring worlds from a graph.

    ``name``: its registry name. ``unit``: ``"edge"`` or ``"node"`` (the neighbouring notion).
    """

    name: ClassVar[str] = ""
    unit: ClassVar[str] = "edge"

    def worlds(self, graph: Any, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        """The two worlds; ``target`` (optional) lets worst-case canaries read its noiseless map."""
        raise NotImplementedError

    def many(self, graph: Any, m: int, rng: np.random.Generator) -> list[CanaryPair]:
        """m canaries for a one-run audit, each a pair (base graph, base graph with it). Default:
        this canary cannot make them."""
        raise ValueError(f"canary {self.name!r} cannot make many canaries for a one-run audit")


# ---------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------
_BUILTIN: dict[str, str] = {
    "random-edge": "canaries.edge:RandomEdge",
    "worst-edge": "canaries.edge:WorstCaseEdge",
    "worst-directed-edge": "canaries.edge:WorstDirectedEdge",
    "low-degree-edge": "canaries.edge:LowDegreeEdge",
    "feature-extreme-edge": "canaries.edge:FeatureExtremeEdge",
    "search-edge": "canaries.edge:SensitivitySearchEdge",
    "remove-node": "canaries.node:RemoveNode",
    "insert-node": "canaries.node:InsertNode",
    "insert-hub-node": "canaries.node:InsertHubNode",
    "dirac-gradient": "canaries.gradient:DiracGradient",
    "spread-gradient": "canaries.gradient:SpreadGradient",
    "split-gradient": "canaries.gradient:SplitGradient",
    "dirac-node": "canaries.gradient:DiracNode",
}
#: canaries written ``name:ARGS`` (the class's ``parse(ARGS)`` builds one), e.g. ``edge:12-272``
_PARAMETRISED: dict[str, str] = {"edge": "canaries.edge:ExplicitEdge", "witness": "canaries.witness:WitnessCanary"}
_CANARIES: dict[str, type[Canary]] = {}


def register(name: str, cls: type[Canary], *, force: bool = False) -> None:
    if (name in _CANARIES or name in _BUILTIN) and not force:
        raise ValueError(f"canary {name!r} is already registered")
    _CANARIES[name] = cls


def _import_spec(spec: str) -> type[Canary]:
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    try:
        cls = getattr(module, attr)
    except AttributeError:
        raise ValueError(f"module {module_name!r} has no attribute {attr!r}") from None
    if not (isinstance(cls, type) and issubclass(cls, Canary)):
        raise ValueError(f"{spec!r} is not a Canary subclass")
    return cls


def available() -> list[str]:
    """Names of the registered canaries whose modules import (in registration order)."""
    names = []
    for name in dict.fromkeys([*_BUILTIN, *_CANARIES]):
        try:
            get(name)
        except (ImportError, ValueError):
            continue
        names.append(name)
    return names


def get(name: str) -> type[Canary]:
    """A canary class by registry name, or by ``package.module:Class`` for a user's own canary."""
    if name in _CANARIES:
        return _CANARIES[name]
    if name in _BUILTIN:
        try:
            cls = _import_spec(_BUILTIN[name])
        except ModuleNotFoundError as err:
            if err.name == _BUILTIN[name].partition(":")[0]:
                raise ValueError(f"canary {name!r} is not available in this version") from None
            raise
        _CANARIES[name] = cls
        return cls
    if ":" in name and name.partition(":")[0] not in _PARAMETRISED:
        try:
            return _import_spec(name)
        except ModuleNotFoundError as err:
            raise ValueError(f"cannot import {name!r}: {err}") from None
    raise ValueError(f"unknown canary {name!r}; known: {', '.join(sorted(available()))}")


def make(name: str) -> Canary:
    """A canary by name: a registry name, ``edge:U-V`` (an edge the user names) or
    ``package.module:Class``."""
    kind, _, args = name.partition(":")
    if kind in _PARAMETRISED:
        return _import_spec(_PARAMETRISED[kind]).parse(args)
    return get(name)()


def auto_canary(target: targets.Target, graph: Any, attack: str | None = None) -> str:
    """The canary that fits the target's unit and the chosen attack."""
    if attack in ("gradient-lrt", "gradient-projection"):
        return "dirac-gradient"
    if attack == "gradient-l1":
        return "spread-gradient"
    if target.unit is not targets.Unit.EDGE:
        return "remove-node"
    try:
        has_map = target.noiseless(graph) is not None
    except NotImplementedError:
        has_map = False
    return "worst-edge" if has_map else "random-edge"
