"""Edge canaries: two worlds that differ by one undirected edge.

``g0`` is the graph without the canary edge and ``g1`` the graph with it (b = 1 means "the edge
is in"). Strategies:

* :class:`RandomEdge` — a uniformly random non-edge {u, v}, inserted in world 1.
* :class:`WorstCaseEdge` — among candidate non-edges (random, plus pairs of lowest-degree nodes),
  the one whose insertion changes the target's noiseless mechanism output the most (largest
  Frobenius norm). Chosen from the noiseless map only, never from trial outcomes, so audits that
  use it stay valid.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from audit.data import add_edge, degrees, has_edge


@dataclass
class CanaryPair:
    """Two neighbouring worlds and what tells them apart."""

    g0: Data
    g1: Data
    info: dict[str, Any] = field(default_factory=dict)

    def __iter__(self):
        yield self.g0
        yield self.g1

    def world(self, bit: int) -> Data:
        return self.g1 if bit else self.g0


def _random_non_edges(graph: Data, count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    n = graph.num_nodes
    existing = set(map(tuple, graph.edge_index.t().tolist()))
    out: list[tuple[int, int]] = []
    tries = 0
    while len(out) < count and tries < 100 * count:
        tries += 1
        u, v = (int(a) for a in rng.choice(n, size=2, replace=False))
        if (u, v) not in existing and (min(u, v), max(u, v)) not in out:
            out.append((min(u, v), max(u, v)))
    if not out:
        raise ValueError("the graph has no non-edge to use as a canary")
    return out


def disjoint_non_edges(graph: Data, m: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """m non-edges no two of which share an endpoint (for one-run audits)."""
    n = graph.num_nodes
    if 2 * m > n:
        raise ValueError(f"one-run edge audits need disjoint canary edges: at most {n // 2} on this graph, got {m}")
    existing = set(map(tuple, graph.edge_index.t().tolist()))
    order = rng.permutation(n)
    free = list(order)
    out: list[tuple[int, int]] = []
    while len(out) < m and len(free) >= 2:
        u = int(free.pop())
        for k in range(len(free) - 1, -1, -1):
            v = int(free[k])
            if (u, v) not in existing:
                out.append((min(u, v), max(u, v)))
                free.pop(k)
                break
    if len(out) < m:
        raise ValueError(f"found only {len(out)} disjoint canary edges, {m} asked")
    return out


class RandomEdge:
    name = "random-edge"
    unit = "edge"

    def many(self, graph: Data, m: int, rng: np.random.Generator) -> list[CanaryPair]:
        """m canaries for a one-run audit, each a pair (base graph, base graph + its edge)."""
        return [CanaryPair(graph, add_edge(graph, u, v), {"canary": self.name, "edge": [u, v],
                                                           "chosen_by": "uniform random disjoint non-edges"})
                for u, v in disjoint_non_edges(graph, m, rng)]

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        (u, v), = _random_non_edges(graph, 1, rng)
        return CanaryPair(graph, add_edge(graph, u, v),
                          {"canary": self.name, "edge": [u, v], "chosen_by": "uniform random non-edge"})


class WorstCaseEdge:
    name = "worst-edge"
    unit = "edge"

    def __init__(self, candidates: int = 64) -> None:
        self.candidates = candidates

    def candidate_edges(self, graph: Data, rng: np.random.Generator) -> list[tuple[int, int]]:
        deg = degrees(graph).numpy()
        low = np.argsort(deg, kind="stable")[: max(4, int(np.sqrt(self.candidates)) + 2)]
        pairs = [(int(min(a, b)), int(max(a, b))) for i, a in enumerate(low) for b in low[i + 1:]
                 if not has_edge(graph, int(a), int(b))]
        pairs += _random_non_edges(graph, self.candidates, rng)
        return list(dict.fromkeys(pairs))[: 2 * self.candidates]

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        if target is None or target.noiseless(graph) is None:
            raise ValueError("the worst-case edge canary needs a target with a noiseless mechanism map")
        base = target.noiseless(graph)
        best, best_change = None, -1.0
        for u, v in self.candidate_edges(graph, rng):
            change = float((target.noiseless(add_edge(graph, u, v)) - base).norm())
            if change > best_change:
                best, best_change = (u, v), change
        u, v = best  # type: ignore[misc]
        return CanaryPair(graph, add_edge(graph, u, v), {
            "canary": self.name, "edge": [u, v], "noiseless_change": best_change,
            "chosen_by": f"largest noiseless change among {len(self.candidate_edges(graph, np.random.default_rng(0)))} candidates"})


CANARIES = {"random-edge": RandomEdge, "worst-edge": WorstCaseEdge}
