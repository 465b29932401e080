"""The canary contract, its pair of worlds, and the registry of canaries.

A canary says how two neighbouring worlds differ: :meth:`Canary.worlds` returns a
:class:`CanaryPair` (``g0`` without the canary, ``g1`` with it, and ``info`` describing the choice).
One-run audits ask for many canaries at once (:meth:`Canary.many`); a canary that cannot make them
keeps the default, which says so.

Adding a canary: a class deriving from :class:`Canary` (``name``, ``unit``, ``worlds``) and one
``register(name, cls)`` line, or ``--canary package.module:Class`` without registering.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from targets import base as targets
from targets.common.registry import Registry


@dataclass
class CanaryPair:
    """Two neighbouring worlds and what tells them apart.

    ``edge`` (u, v) or ``node`` z is the canary where it is one, ``chosen_by`` how it was chosen;
    ``relation`` whether world 1 adds ("insert") or world 0 removes ("remove") it, ``isolates`` the
    nodes the removal leaves with no edge, ``shares`` the share of the dataset such pairs concern.
    ``info`` is the pair's record for the result, holding the same (``edge`` as [u, v]). A field
    left unset is read from the record, and a field set is written to it, so the two agree.
    """

    g0: Any
    g1: Any
    info: dict[str, Any] = field(default_factory=dict)
    edge: tuple[int, int] | None = None
    node: int | None = None
    chosen_by: str | None = None
    relation: str | None = None
    isolates: list[int] | None = None
    shares: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        targets.sync_fields(self, self.info, ("edge", "node", "chosen_by", "relation", "isolates", "shares"))
        if self.edge is not None:
            self.edge = (int(self.edge[0]), int(self.edge[1]))
        if self.node is not None:
            self.node = int(self.node)

    def __iter__(self):
        yield self.g0
        yield self.g1

    def world(self, bit: int) -> Any:
        return self.g1 if bit else self.g0

    def recorded(self, key: str) -> Any:
        """The pair's record of `key`, or None where the record is silent on it."""
        return self.info[key] if key in self.info else None


class Canary:
    """A way to build two neighbouring worlds from a graph.

    ``name``: its registry name. ``unit``: :class:`targets.base.Unit` (the neighbouring notion).
    ``relation``: which half of the neighbouring relation its pairs cover, ``"insert"`` (world 1 adds
    an edge or a node to the given graph), ``"remove"`` (world 0 removes one the graph has) or
    ``"gradient"`` (a crafted gradient, not a graph edit). ``needs_map``: it reads the target's
    noiseless map (:meth:`targets.base.Target.noiseless`).
    """

    name: ClassVar[str] = ""
    unit: ClassVar[targets.Unit] = targets.Unit.EDGE
    relation: ClassVar[str] = "insert"
    needs_map: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if isinstance(cls.__dict__.get("unit"), str):  # a user's name becomes a unit
            cls.unit = targets.Unit(cls.unit)

    def worlds(self, graph: Any, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        """The two worlds; ``target`` (optional) lets worst-case canaries read its noiseless map."""
        raise NotImplementedError

    @classmethod
    def pointed_by(cls, target: Any, graph: Any) -> str | None:
        """Why the target's declarations point to this canary (the portfolio pilots it early), or None
        (the default). Read from the target's hooks and claim alone, never from a trial."""
        return None

    def many(self, graph: Any, m: int, rng: np.random.Generator, hops: int | None = None) -> list[CanaryPair]:
        """m canaries for a one-run audit, each a pair (base graph, base graph with it). ``hops``:
        the target's receptive field, which a canary may use to keep its canaries apart (None:
        unknown). Default: this canary cannot make them."""
        raise ValueError(f"canary {self.name!r} cannot make many canaries for a one-run audit")


# ---------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------
#: canaries written ``name:ARGS`` (the class's ``parse(ARGS)`` builds one), e.g. ``edge:12-272``
_PARAMETRISED: dict[str, str] = {"edge": "canaries.edge:ExplicitEdge", "witness": "canaries.witness:WitnessCanary",
                                  "hub-with-gradient": "canaries.joint:HubWithGradient"}
REGISTRY: Registry[Canary] = Registry("canary", Canary, reserved=tuple(_PARAMETRISED))
# registration order is the order a portfolio pilots canaries in: each half of the relation early
REGISTRY.register("random-edge", "canaries.edge:RandomEdge")
REGISTRY.register("worst-edge", "canaries.edge:WorstCaseEdge")
REGISTRY.register("isolating-edge", "canaries.edge_removal:IsolatingEdge")
REGISTRY.register("min-degree-edge", "canaries.edge_removal:MinDegreeEdge")
REGISTRY.register("worst-remove-edge", "canaries.edge_removal:WorstRemovedEdge")
REGISTRY.register("worst-directed-edge", "canaries.edge:WorstDirectedEdge")
REGISTRY.register("low-degree-edge", "canaries.edge:LowDegreeEdge")
REGISTRY.register("feature-extreme-edge", "canaries.edge:FeatureExtremeEdge")
REGISTRY.register("search-edge", "canaries.edge:SensitivitySearchEdge")
REGISTRY.register("remove-edge", "canaries.edge_removal:RandomRemovedEdge")
REGISTRY.register("remove-node", "canaries.node:RemoveNode")
REGISTRY.register("isolating-node", "canaries.node:IsolatingNode")
REGISTRY.register("insert-node", "canaries.node:InsertNode")
REGISTRY.register("insert-hub-node", "canaries.node:InsertHubNode")
REGISTRY.register("dirac-gradient", "canaries.gradient:DiracGradient")
REGISTRY.register("spread-gradient", "canaries.gradient:SpreadGradient")
REGISTRY.register("split-gradient", "canaries.gradient:SplitGradient")
REGISTRY.register("dirac-node", "canaries.gradient:DiracNode")


def register(name: str, cls: type[Canary] | str, *, force: bool = False) -> None:
    """Register a canary class, or a ``package.module:Class`` imported on first use."""
    REGISTRY.register(name, cls, force=force)


def get(name: str) -> type[Canary]:
    """A canary class by registry name, ``package.module:Class`` or ``path/to/file.py:Class``."""
    return REGISTRY.get(name)


def available() -> list[str]:
    """Names of the registered canaries whose modules import (in registration order)."""
    return REGISTRY.available()


def make(name: str) -> Canary:
    """A canary by name: a registry name, ``edge:U-V`` (an edge the user names) or
    ``package.module:Class``."""
    kind, _, args = name.partition(":")
    if kind in _PARAMETRISED:
        return REGISTRY.load(_PARAMETRISED[kind]).parse(args)
    return get(name)()


def relation_canaries(target: targets.Target, graph: Any) -> list[str]:
    """The registered graph canaries whose pairs the target's unit covers, both halves of the
    relation (insertions and removals), those that need a noiseless map only where the target has
    one: the candidates a portfolio enumerates (gradient canaries are chosen with a trace attack)."""
    try:
        has_map = target.noiseless(graph) is not None
    except NotImplementedError:
        has_map = False
    out = []
    for name in available():
        cls = get(name)
        if cls.unit == target.unit and cls.relation != "gradient" and (has_map or not cls.needs_map):
            out.append(name)
    return out


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
