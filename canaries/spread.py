"""Canary edges spread apart for one-run audits on graphs.

In a one-run audit every canary is scored on the same release. Message passing carries an edge's
effect to the rows of nodes within the target's hops of it, so two canaries whose endpoints lie
within that many hops of each other read each other's edges, and each score mixes the other
canary's bit into its own noise (Keinan et al. 2025). This does not break the one-run bound's
validity (each canary is still one unit of the claim) but it weakens the audit. Here canaries are
chosen so that no canary endpoint lies within `hops` hops of another canary's endpoint in the base
graph: a path of ≤ hops edges from one canary never reaches another canary, so it can use no other
canary's edge either, and each canary's rows see only its own bit.
"""
from __future__ import annotations

from collections import deque

import numpy as np
from torch_geometric.data import Data


def _neighbours(graph: Data) -> list[np.ndarray]:
    n = graph.num_nodes
    src, dst = graph.edge_index.cpu().numpy()
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    starts = np.searchsorted(src, np.arange(n + 1))
    return [dst[starts[i]:starts[i + 1]] for i in range(n)]


def _mark_ball(adj: list[np.ndarray], sources: tuple[int, ...], hops: int, marked: np.ndarray) -> None:
    """Mark every node within `hops` hops of `sources` (breadth-first, depth-limited)."""
    depth = {s: 0 for s in sources}
    queue = deque(sources)
    for s in sources:
        marked[s] = True
    while queue:
        u = queue.popleft()
        if depth[u] == hops:
            continue
        for v in adj[u]:
            v = int(v)
            if v not in depth:
                depth[v] = depth[u] + 1
                marked[v] = True
                queue.append(v)


def interacting(graph: Data, edges: list[tuple[int, int]], hops: int) -> int:
    """How many of `edges` have an endpoint within `hops` hops of another edge's endpoint."""
    adj = _neighbours(graph)
    owner = np.full(graph.num_nodes, -1)
    for i, (u, v) in enumerate(edges):
        owner[u] = owner[v] = i
    hit = 0
    for i, (u, v) in enumerate(edges):
        ball = np.zeros(graph.num_nodes, dtype=bool)
        _mark_ball(adj, (u, v), hops, ball)
        others = owner[ball]
        hit += bool(np.any((others >= 0) & (others != i)))
    return hit


def spread_non_edges(graph: Data, m: int, rng: np.random.Generator, hops: int) -> tuple[list[tuple[int, int]], int]:
    """m node-disjoint non-edges, as many as the graph allows (greedily, in random order) with no
    endpoint within `hops` hops of another canary's endpoint; the rest only node-disjoint.
    Returns (edges, how many of them are in the spread set)."""
    n = graph.num_nodes
    if 2 * m > n:
        raise ValueError(f"one-run edge audits need disjoint canary edges: at most {n // 2} on this graph, got {m}")
    adj = _neighbours(graph)
    blocked = np.zeros(n, dtype=bool)  # within `hops` of a chosen endpoint
    used = np.zeros(n, dtype=bool)
    out: list[tuple[int, int]] = []
    order = [int(v) for v in rng.permutation(n)]
    for u in order:
        if len(out) == m:
            break
        if blocked[u]:
            continue
        near = np.zeros(n, dtype=bool)
        _mark_ball(adj, (u,), max(hops, 2), near)
        nbrs = set(adj[u].tolist())
        # a partner near u blocks the least room for the next canaries (its ball mostly overlaps u's)
        close = [int(v) for v in np.flatnonzero(near & ~blocked) if v != u and int(v) not in nbrs]
        partner = close[0] if close else next(
            (v for v in order if v != u and not blocked[v] and v not in nbrs), None)
        if partner is None:
            continue
        out.append((min(u, partner), max(u, partner)))
        used[u] = used[partner] = True
        _mark_ball(adj, (u, partner), hops, blocked)
    spread = len(out)
    free = [v for v in order if not used[v]]
    while len(out) < m and len(free) >= 2:
        u = free.pop()
        nbrs = set(adj[u].tolist())
        k = next((k for k in range(len(free) - 1, -1, -1) if free[k] not in nbrs), None)
        if k is None:
            continue
        v = free.pop(k)
        out.append((min(u, v), max(u, v)))
    if len(out) < m:
        raise ValueError(f"found only {len(out)} disjoint canary edges, {m} asked")
    return out, spread
