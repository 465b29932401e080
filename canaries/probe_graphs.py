"""The graphs and neighbouring pairs the sensitivity probe searches (graphs from
:func:`graphs.small.make_graph`).

* :func:`atlas` — every graph on 2..``max_nodes`` nodes up to isomorphism (networkx's atlas holds
  all 1,253 graphs up to 7 nodes), without isolated-node-free filtering.
* :func:`families` — structured graphs sized to a step's own parameters: paths, cycles, stars,
  cliques, complete bipartite graphs, random trees, d-regular circulants (d = 2..16), and a hub with
  more leaves than the degree bound.
* :func:`canary_pairs` — the neighbouring pairs (g0, g1) a graph offers for a canary kind:
  ``edge`` (every edge removed (a sample of ``max_edges`` on larger graphs), plus non-edges added), ``directed`` (every directed entry),
  ``node`` (every node isolated: the harness's add/remove convention, canaries.node).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from canaries.node import isolate
from graphs.ops import EdgeSet, add_directed_edge, add_edge, remove_edge, undirected_pairs
from graphs.small import make_graph


def atlas(max_nodes: int) -> Iterator[tuple[str, Data]]:
    from networkx.generators.atlas import graph_atlas_g

    for i, nxg in enumerate(graph_atlas_g()):
        n = nxg.number_of_nodes()
        if n < 2:
            continue
        if n > max_nodes:
            break
        if nxg.number_of_edges() == 0:
            continue
        yield f"atlas#{i} (n={n}, m={nxg.number_of_edges()})", make_graph(n, list(nxg.edges()), name=f"atlas#{i}")


def families(hub_leaves: int = 12, sizes: tuple[int, ...] = (3, 5, 8), seed: int = 0) -> Iterator[tuple[str, Data]]:
    rng = np.random.default_rng(seed)
    for n in sizes:
        yield f"path P{n}", make_graph(n, [(i, i + 1) for i in range(n - 1)], name=f"path{n}")
        yield f"cycle C{n}", make_graph(n, [(i, (i + 1) % n) for i in range(n)], name=f"cycle{n}")
        yield f"star S{n}", make_graph(n + 1, [(0, i) for i in range(1, n + 1)], name=f"star{n}")
        yield f"clique K{n}", make_graph(n, [(i, j) for i in range(n) for j in range(i + 1, n)], name=f"clique{n}")
        a, b = max(1, n // 2), n - max(1, n // 2) + 1
        yield f"bipartite K{a},{b}", make_graph(a + b, [(i, a + j) for i in range(a) for j in range(b)],
                                                 name=f"bip{a}x{b}")
        parents = [int(rng.integers(0, i)) for i in range(1, n + 2)]
        yield f"random tree T{n + 2}", make_graph(n + 2, [(p, i + 1) for i, p in enumerate(parents)], name=f"tree{n + 2}")
    for d in (2, 4, 8, 16):  # d-regular circulants: CARIBOU's D_min regime, canary far apart
        n = 4 * d + 8
        yield f"circulant C{n}(d={d})", make_graph(
            n, sorted({(min(i, (i + s) % n), max(i, (i + s) % n)) for i in range(n) for s in range(1, d // 2 + 1)}),
            name=f"circ{n}d{d}")
    k = hub_leaves
    yield f"hub + {k} leaves", make_graph(k + 1, [(0, i) for i in range(1, k + 1)], name=f"hub{k}")
    # two hubs sharing their leaves (every leaf of degree 2: CARIBOU's D_min = 2 regime)
    yield f"double hub + {k} leaves", make_graph(k + 2, [(h, i) for h in (0, 1) for i in range(2, k + 2)],
                                                 name=f"dhub{k}")


def remove_directed_edge(graph: Data, u: int, v: int) -> Data:
    new = graph.clone()
    ei = graph.edge_index
    new.edge_index = ei[:, ~((ei[0] == u) & (ei[1] == v))]
    return new


def canary_pairs(graph: Data, kind: str, *, non_edges: int = 8, max_edges: int = 48, max_nodes: int = 24, rng: np.random.Generator | None = None,
                 nodes: list[int] | None = None, edges: list[tuple[int, int]] | None = None
                 ) -> Iterator[tuple[Any, Data, Data]]:
    """(canary, g0, g1): g1 has the canary, g0 not. ``edges``/``nodes`` restrict the candidates."""
    rng = rng or np.random.default_rng(0)
    n = graph.num_nodes
    ei = graph.edge_index
    if kind == "node":
        if nodes is None and n > max_nodes:  # large graphs: the highest degrees and a random sample
            deg = torch.bincount(ei[0], minlength=n)
            top = torch.argsort(-deg, stable=True)[: max_nodes // 3].tolist()
            nodes = list(dict.fromkeys(top + rng.choice(n, size=max_nodes - len(top), replace=False).tolist()))
        for z in (nodes if nodes is not None else range(n)):
            yield int(z), isolate(graph, int(z)), graph
        return
    present = EdgeSet(ei)
    if edges is None:
        und = [(int(u), int(v)) for u, v in undirected_pairs(graph)]
        if len(und) > max_edges:  # large families: a sample of the edges (every node stays a candidate)
            und = [und[i] for i in sorted(rng.choice(len(und), size=max_edges, replace=False))]
        absent = [(u, v) for u in range(n) for v in range(u + 1, n) if (u, v) not in present]
        if len(absent) > non_edges:
            absent = [absent[i] for i in rng.choice(len(absent), size=non_edges, replace=False)]
        edges = und + absent
    for u, v in edges:
        if kind == "edge":
            if (u, v) in present:
                yield (u, v), remove_edge(graph, u, v), graph
            else:
                yield (u, v), graph, add_edge(graph, u, v)
        else:
            for a, b in ((u, v), (v, u)):
                if (a, b) in present:
                    yield (a, b), remove_directed_edge(graph, a, b), graph
                else:
                    yield (a, b), graph, add_directed_edge(graph, a, b)
