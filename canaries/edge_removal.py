"""Edge canaries that REMOVE an existing edge: the other half of the edge-neighbouring relation.

``g1`` is the graph as given (the edge is in) and ``g0`` the graph without it, so ``b = 1`` still
means "the edge is in" and every attack reads the pair as it reads an inserted edge. Strategies:

* :class:`RandomRemovedEdge` — a uniformly random existing edge.
* :class:`IsolatingEdge` — an edge whose removal leaves a node with no edge at all. Where the graph
  has a degree-1 node, one of its edges; otherwise the challenger picks the pair (any two graphs
  one edge apart are neighbours): a lowest-degree node keeps one edge in both worlds, its others
  are dropped from both, and world 0 drops the last one.
* :class:`MinDegreeEdge` — an edge at a node of the graph's smallest positive degree whose other
  endpoint has degree above 1: removal lowers the minimum degree without isolating anyone (a
  calibration that reads D_min sees a new minimum).
* :class:`WorstRemovedEdge` — among low-degree, isolating and random existing edges, the one whose
  removal moves the target's noiseless map most (chosen from that map alone, never from trials).

:func:`relation_shares` measures which share of a dataset's edges such pairs concern.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from torch_geometric.data import Data

from canaries.base import Canary, CanaryPair
from graphs.ops import degrees, remove_edge
from targets.base import Unit


def existing_edges(graph: Data) -> np.ndarray:
    """The undirected edges {u, v} (u < v) of `graph`, one row each, in index order."""
    src, dst = graph.edge_index.cpu().numpy()
    keep = src < dst
    return np.stack([src[keep], dst[keep]], 1)


def relation_shares(graph: Data) -> dict[str, Any]:
    """Which share of the graph's undirected edges a removal pair of each kind concerns: edges whose
    removal isolates a node (an endpoint of degree 1), and edges at the minimum positive degree
    (removal lowers the graph's minimum degree)."""
    edges = existing_edges(graph)
    deg = degrees(graph).cpu().numpy()
    if len(edges) == 0:
        return {"edges": 0, "isolating": 0.0, "at_min_degree": 0.0, "min_degree": 0}
    du, dv = deg[edges[:, 0]], deg[edges[:, 1]]
    d_min = int(deg[deg > 0].min())
    return {"edges": int(len(edges)), "min_degree": d_min,
            "isolating": float(np.mean((du == 1) | (dv == 1))),
            "at_min_degree": float(np.mean((du == d_min) | (dv == d_min)))}


def removal_pair(graph: Data, u: int, v: int, name: str, how: str, **extra: Any) -> CanaryPair:
    """(graph without {u, v}, graph): the pair's record names who the removal isolates and how the
    minimum degree moves."""
    g0 = remove_edge(graph, u, v)
    d1, d0 = degrees(graph), degrees(g0)
    positive = d1[d1 > 0]
    info = {"canary": name, "edge": [int(u), int(v)], "relation": "remove",
            "degrees": [int(d1[u]), int(d1[v])],
            "isolates": [int(w) for w in (u, v) if int(d0[w]) == 0],
            "min_degree": {"with_edge": int(positive.min()) if positive.numel() else 0,
                           "without_edge": int(d0[d1 > 0].min()) if positive.numel() else 0},
            "shares": relation_shares(graph), "chosen_by": how, **extra}
    return CanaryPair(g0, graph, info)


def _low_degree_edges(graph: Data, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(the degrees, the existing edges by ascending (smaller endpoint degree, larger endpoint degree),
    ties at random)."""
    edges = existing_edges(graph)
    if len(edges) == 0:
        raise ValueError("the graph has no edge to remove")
    deg = degrees(graph).cpu().numpy()
    lo = np.minimum(deg[edges[:, 0]], deg[edges[:, 1]])
    hi = np.maximum(deg[edges[:, 0]], deg[edges[:, 1]])
    return deg, edges[np.lexsort((rng.permutation(len(edges)), hi, lo))]


class EdgeRemoval(Canary):
    """A canary whose world 0 removes an edge of the given graph (:func:`removal_pair`)."""

    unit = Unit.EDGE
    relation = "remove"


class RandomRemovedEdge(EdgeRemoval):
    name = "remove-edge"

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        edges = existing_edges(graph)
        if len(edges) == 0:
            raise ValueError("the graph has no edge to remove")
        u, v = edges[int(rng.integers(len(edges)))]
        return removal_pair(graph, int(u), int(v), self.name, "uniform random existing edge, removed in world 0")


class IsolatingEdge(EdgeRemoval):
    name = "isolating-edge"

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        deg, ranked = _low_degree_edges(graph, rng)
        u, v = (int(a) for a in ranked[0])
        leaf, other = (u, v) if deg[u] <= deg[v] else (v, u)
        if deg[leaf] == 1:
            return removal_pair(graph, u, v, self.name,
                                f"an edge of degree-1 node {leaf}: world 0 isolates it")
        # no leaf: keep one edge of the lowest-degree node in both worlds, drop its others from both
        base = graph.clone()
        ei = graph.edge_index
        touches = (ei[0] == leaf) | (ei[1] == leaf)
        keeps = ((ei[0] == leaf) & (ei[1] == other)) | ((ei[0] == other) & (ei[1] == leaf))
        base.edge_index = ei[:, ~touches | keeps]
        dropped = int(deg[leaf]) - 1
        return removal_pair(base, u, v, self.name,
                            f"no degree-1 node: node {leaf} keeps only its edge to {other} in both worlds "
                            f"({dropped} other edge(s) dropped from both), world 0 removes that one too",
                            graph_modified={"node": leaf, "edges_dropped_in_both_worlds": dropped})


class MinDegreeEdge(EdgeRemoval):
    name = "min-degree-edge"

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        deg, ranked = _low_degree_edges(graph, rng)
        d_min = int(deg[deg > 0].min())
        ok = [(int(a), int(b)) for a, b in ranked if min(deg[a], deg[b]) == d_min and max(deg[a], deg[b]) > 1]
        if d_min == 1:
            how = "an edge at the minimum degree 1 (removal isolates that endpoint)"
        else:
            how = f"an edge at a node of the minimum degree {d_min}: world 0 lowers the minimum to {d_min - 1}"
        if not ok:
            ok = [(int(a), int(b)) for a, b in ranked[:1]]
        u, v = ok[0]
        return removal_pair(graph, u, v, self.name, how)


class WorstRemovedEdge(EdgeRemoval):
    name = "worst-remove-edge"
    needs_map = True

    def __init__(self, candidates: int = 64) -> None:
        self.candidates = candidates

    def candidate_edges(self, graph: Data, rng: np.random.Generator) -> list[tuple[int, int]]:
        low = [tuple(int(a) for a in e) for e in _low_degree_edges(graph, rng)[1][: self.candidates]]
        edges = existing_edges(graph)
        pick = rng.choice(len(edges), size=min(len(edges), self.candidates), replace=False)
        return list(dict.fromkeys(low + [tuple(int(a) for a in edges[i]) for i in pick]))

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        if target is None or target.noiseless(graph) is None:
            raise ValueError("the worst-remove-edge canary needs a target with a noiseless mechanism map")
        base = target.noiseless(graph).double()
        candidates = self.candidate_edges(graph, rng)
        changes = [float((target.noiseless(remove_edge(graph, u, v)).double() - base).norm()) for u, v in candidates]
        best = int(np.argmax(changes))
        u, v = candidates[best]
        return removal_pair(graph, u, v, self.name,
                            f"largest noiseless change among {len(candidates)} existing edges "
                            "(lowest-degree and random), removed in world 0",
                            noiseless_change=changes[best],
                            random_median_change=float(np.median(changes)))
