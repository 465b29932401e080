"""Edge canaries: two worlds that differ by one undirected edge.

``g0`` is the graph without the canary edge and ``g1`` the graph with it (b = 1 means "the edge
is in"). Strategies:

* :class:`RandomEdge` — a uniformly random non-edge {u, v}, inserted in world 1.
* :class:`WorstCaseEdge` — among candidate non-edges (random, pairs of lowest-degree nodes, pairs
  of largest-feature-norm nodes),
  the one whose insertion changes the target's noiseless mechanism output the most (largest
  Frobenius norm). Chosen from the noiseless map only, never from trial outcomes, so audits that
  use it stay valid.
* :class:`LowDegreeEdge` — a non-edge between two lowest-degree nodes (leaves first).
* :class:`FeatureExtremeEdge` — a non-edge whose endpoints' feature rows are farthest apart among the
  largest-norm rows.
* :class:`SensitivitySearchEdge` — the largest noiseless change over candidates from the strategies
  above plus random ones, and over adversarial (copied, public) feature rows on the endpoints.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from canaries.base import Canary, CanaryPair  # noqa: F401  (CanaryPair: re-exported)
from canaries.spread import spread_non_edges
from graphs.ops import EdgeSet, add_directed_edge, add_edge, degrees, has_edge, remove_edge
from targets.base import Unit


def random_non_edges(graph: Data, count: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    n = graph.num_nodes
    existing = EdgeSet(graph.edge_index)
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
    existing = EdgeSet(graph.edge_index)
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


class RandomEdge(Canary):
    name = "random-edge"
    unit = Unit.EDGE

    def many(self, graph: Data, m: int, rng: np.random.Generator, hops: int | None = None) -> list[CanaryPair]:
        """m canaries for a one-run audit, each a pair (base graph, base graph + its edge). With
        `hops`, as many as the graph allows lie more than `hops` hops from every other canary
        (:func:`canaries.spread.spread_non_edges`), the rest only node-disjoint."""
        if hops is None:
            edges, how = disjoint_non_edges(graph, m, rng), "uniform random disjoint non-edges"
        else:
            edges, spread = spread_non_edges(graph, m, rng, hops)
            how = (f"random non-edges spread apart: {spread} more than {hops} hops from each other"
                   + ("" if spread == m else f", {m - spread} more only node-disjoint among them"))
        return [CanaryPair(graph, add_edge(graph, u, v), {"canary": self.name, "edge": [u, v], "chosen_by": how})
                for u, v in edges]

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        (u, v), = random_non_edges(graph, 1, rng)
        return CanaryPair(graph, add_edge(graph, u, v),
                          {"canary": self.name, "edge": [u, v], "chosen_by": "uniform random non-edge"})


class ExplicitEdge(Canary):
    """The undirected edge {u, v} the user names (``--canary edge:U-V``): g1 has it, g0 not.

    For a canary chosen in advance, e.g. from an earlier exploration on other trials, or a paper's
    own canary; where the graph already has the edge, g0 is the graph without it.
    """

    name = "edge"
    unit = Unit.EDGE

    def __init__(self, u: int, v: int) -> None:
        if u == v or min(u, v) < 0:
            raise ValueError(f"an edge canary needs two distinct node ids >= 0, got {u}-{v}")
        self.u, self.v = int(u), int(v)

    @classmethod
    def parse(cls, text: str) -> ExplicitEdge:
        """``"12-272"`` → ExplicitEdge(12, 272)."""
        try:
            u, v = (int(x) for x in text.split("-"))
        except ValueError:
            raise ValueError(f"an edge canary is written edge:U-V with two node ids, got edge:{text}") from None
        return cls(u, v)

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        u, v = self.u, self.v
        if max(u, v) >= graph.num_nodes:
            raise ValueError(f"edge {u}-{v}: the graph has {graph.num_nodes} nodes")
        g1 = graph if has_edge(graph, u, v) else add_edge(graph, u, v)
        return CanaryPair(remove_edge(g1, u, v), g1, {
            "canary": self.name, "edge": [u, v], "in_graph": bool(has_edge(graph, u, v)),
            "chosen_by": "named by the user (--canary edge:U-V), before any run"})


class WorstCaseEdge(Canary):
    name = "worst-edge"
    unit = Unit.EDGE
    needs_map = True

    def __init__(self, candidates: int = 64) -> None:
        self.candidates = candidates

    def candidate_edges(self, graph: Data, rng: np.random.Generator) -> list[tuple[int, int]]:
        deg = degrees(graph).numpy()
        k = max(4, int(np.sqrt(self.candidates)) + 2)
        low = np.argsort(deg, kind="stable")[:k]
        big = np.argsort(-graph.x.norm(dim=1).numpy(), kind="stable")[:k]  # largest feature rows
        pairs = [(int(min(a, b)), int(max(a, b))) for group in (low, big) for i, a in enumerate(group)
                 for b in group[i + 1:] if not has_edge(graph, int(a), int(b))]
        pairs += random_non_edges(graph, self.candidates, rng)
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


class WorstDirectedEdge(WorstCaseEdge):
    """:class:`WorstCaseEdge`'s choice, but world 1 adds ONE directed entry u → v (the direction
    with the larger noiseless change): the neighbouring notion of targets that charge a directed
    edge (GAP's code: Δ = 1 per entry of Aᵀ; DPDGC's ``unit="edge"``). On an undirected graph the
    natural neighbour is :class:`WorstCaseEdge`'s undirected edge, two entries."""

    name = "worst-directed-edge"

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        pair = super().worlds(graph, rng, target)
        u, v = pair.edge
        base = target.noiseless(graph)
        options = [(float((target.noiseless(add_directed_edge(graph, a, b)) - base).norm()), a, b)
                   for a, b in ((u, v), (v, u))]
        change, a, b = max(options)
        return CanaryPair(graph, add_directed_edge(graph, a, b), {
            "canary": self.name, "edge": [a, b], "directed": True, "noiseless_change": change,
            "chosen_by": pair.chosen_by + "; the direction with the larger change"})


# ---------------------------------------------------------------------------------------------
# more strategies: low degree, extreme features, and a search over the target's noiseless map
# ---------------------------------------------------------------------------------------------
def _degree_order(graph: Data, rng: np.random.Generator) -> np.ndarray:
    """Nodes by ascending degree, ties broken at random (by `rng`)."""
    deg = degrees(graph).numpy()
    return np.lexsort((rng.permutation(graph.num_nodes), deg))


def _edge_set(graph: Data) -> EdgeSet:
    return EdgeSet(graph.edge_index)


def _greedy_disjoint(pairs: list[tuple[int, int]], m: int, what: str) -> list[tuple[int, int]]:
    used: set[int] = set()
    out: list[tuple[int, int]] = []
    for u, v in pairs:
        if u not in used and v not in used:
            out.append((u, v))
            used.update((u, v))
            if len(out) == m:
                return out
    raise ValueError(f"found only {len(out)} disjoint {what} canary edges, {m} asked")


def noiseless_change(target: Any, g0: Data, g1: Data, base: torch.Tensor | None = None) -> float:
    """‖noiseless(g1) − noiseless(g0)‖ (Frobenius) of the target's deterministic mechanism map."""
    a = target.noiseless(g0) if base is None else base
    b = target.noiseless(g1)
    if a is None or b is None:
        raise ValueError("this canary needs a target with a noiseless mechanism map (target.noiseless)")
    return float((b.double() - a.double()).norm())


class LowDegreeEdge(Canary):
    """A non-edge between two lowest-degree nodes (leaves first; ties at random).

    A canary edge moves a degree-normalised aggregation most where the endpoints have few
    neighbours (GCN influence ∝ 1/√(d_u d_v), spec linkteller.md §9). Among the ``pool`` lowest-degree
    nodes, the non-adjacent pair with the smallest d_u + d_v is chosen.
    """

    name = "low-degree-edge"
    unit = Unit.EDGE

    def __init__(self, pool: int = 64) -> None:
        self.pool = pool

    def ranked(self, graph: Data, rng: np.random.Generator, limit: int | None = None) -> list[tuple[int, int]]:
        """Non-edges among the lowest-degree nodes, by ascending d_u + d_v (then by rank)."""
        deg = degrees(graph).numpy()
        order = _degree_order(graph, rng)[: self.pool]
        rank = {int(v): i for i, v in enumerate(order)}
        existing = _edge_set(graph)
        pairs = [(int(min(a, b)), int(max(a, b))) for i, a in enumerate(order) for b in order[i + 1:]
                 if (int(a), int(b)) not in existing]
        pairs.sort(key=lambda p: (deg[p[0]] + deg[p[1]], max(rank[p[0]], rank[p[1]]), min(rank[p[0]], rank[p[1]])))
        if not pairs:
            raise ValueError("no non-edge among the lowest-degree nodes")
        return pairs[:limit] if limit else pairs

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        u, v = self.ranked(graph, rng, 1)[0]
        deg = degrees(graph)
        return CanaryPair(graph, add_edge(graph, u, v), {
            "canary": self.name, "edge": [u, v], "degrees": [int(deg[u]), int(deg[v])],
            "chosen_by": f"non-edge with the smallest degree sum among the {self.pool} lowest-degree nodes"})

    def many(self, graph: Data, m: int, rng: np.random.Generator, hops: int | None = None) -> list[CanaryPair]:
        """m node-disjoint non-edges, pairing nodes in ascending-degree order (for one-run audits)."""
        if 2 * m > graph.num_nodes:
            raise ValueError(f"one-run edge audits need disjoint canary edges: at most {graph.num_nodes // 2}, got {m}")
        existing = _edge_set(graph)
        free = [int(v) for v in _degree_order(graph, rng)]
        out: list[tuple[int, int]] = []
        while len(out) < m and len(free) >= 2:
            u = free.pop(0)
            for k, v in enumerate(free):
                if (u, v) not in existing:
                    out.append((min(u, v), max(u, v)))
                    free.pop(k)
                    break
        if len(out) < m:
            raise ValueError(f"found only {len(out)} disjoint low-degree canary edges, {m} asked")
        return [CanaryPair(graph, add_edge(graph, u, v), {
            "canary": self.name, "edge": [u, v], "chosen_by": "disjoint non-edges paired in ascending-degree order"})
            for u, v in out]


class FeatureExtremeEdge(Canary):
    """A non-edge whose endpoints' feature rows are far apart: largest ‖x_u − x_v‖ among large-norm rows.

    ‖x_u − x_v‖² = ‖x_u‖² + ‖x_v‖² − 2⟨x_u, x_v⟩ rewards both large norms and dissimilar directions.
    LinkTeller's influence is a derivative along x_v (its size grows with ‖x_v‖, spec linkteller.md §3),
    and an aggregation row moves most when the new neighbour is unlike the current ones. Candidates
    are the ``pool`` largest-norm rows.
    """

    name = "feature-extreme-edge"
    unit = Unit.EDGE

    def __init__(self, pool: int = 64) -> None:
        self.pool = pool

    def ranked(self, graph: Data, rng: np.random.Generator, limit: int | None = None,
               pool: int | None = None) -> list[tuple[int, int]]:
        x = graph.x.double().cpu().numpy()
        norms = np.linalg.norm(x, axis=1)
        k = min(graph.num_nodes, pool or self.pool)
        tie = rng.permutation(graph.num_nodes)
        top = np.lexsort((tie, -norms))[:k]
        sub = x[top]
        dist = np.sqrt(np.maximum((sub ** 2).sum(1)[:, None] + (sub ** 2).sum(1)[None, :] - 2 * sub @ sub.T, 0))
        iu, ju = np.triu_indices(k, 1)
        order = np.argsort(-dist[iu, ju], kind="stable")
        existing = _edge_set(graph)
        out = []
        for t in order:
            a, b = int(top[iu[t]]), int(top[ju[t]])
            if (a, b) not in existing:
                out.append((min(a, b), max(a, b)))
                if limit and len(out) >= limit:
                    break
        if not out:
            raise ValueError("no non-edge among the largest-norm feature rows")
        return out

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        u, v = self.ranked(graph, rng, 1)[0]
        dist = float((graph.x[u].double() - graph.x[v].double()).norm())
        return CanaryPair(graph, add_edge(graph, u, v), {
            "canary": self.name, "edge": [u, v], "feature_distance": dist,
            "chosen_by": f"largest feature distance ‖x_u − x_v‖ among the {self.pool} largest-norm rows"})

    def many(self, graph: Data, m: int, rng: np.random.Generator, hops: int | None = None) -> list[CanaryPair]:
        """m node-disjoint non-edges, greedily by feature distance among the 4m largest-norm rows."""
        if 2 * m > graph.num_nodes:
            raise ValueError(f"one-run edge audits need disjoint canary edges: at most {graph.num_nodes // 2}, got {m}")
        pool = min(graph.num_nodes, max(self.pool, 4 * m))
        pairs = _greedy_disjoint(self.ranked(graph, rng, pool=pool), m, "feature-extreme")
        return [CanaryPair(graph, add_edge(graph, u, v), {
            "canary": self.name, "edge": [u, v],
            "chosen_by": f"disjoint non-edges, greedy by feature distance among the {pool} largest-norm rows"})
            for u, v in pairs]


def opposite_rows(graph: Data, rng: np.random.Generator, sample: int = 1000) -> list[tuple[str, int, int]]:
    """Pairs of existing rows (a, b) to copy onto canary endpoints: the most opposite directions
    (smallest cosine) and the largest-norm row with the row most opposite to it."""
    x = graph.x.double().cpu().numpy()
    n = x.shape[0]
    idx = np.sort(rng.choice(n, size=min(n, sample), replace=False))
    sub = x[idx]
    norms = np.linalg.norm(sub, axis=1)
    unit = sub / np.maximum(norms, 1e-12)[:, None]
    cos = unit @ unit.T
    np.fill_diagonal(cos, np.inf)
    i, j = np.unravel_index(int(np.argmin(cos)), cos.shape)
    out = [("most-opposite", int(idx[i]), int(idx[j]))]
    big = int(np.argmax(norms))
    row = cos[big].copy()
    far = int(np.argmin(row))
    out.append(("largest-norm-vs-opposite", int(idx[big]), int(idx[far])))
    return list(dict.fromkeys(out))


class SensitivitySearchEdge(Canary):
    """The candidate edge (and, where allowed, public feature rows) that moves the target's noiseless
    mechanism map the most.

    1. Candidates: the lowest-degree non-edges (:class:`LowDegreeEdge`), the feature-extreme ones
       (:class:`FeatureExtremeEdge`), and :class:`WorstCaseEdge`'s own candidates (pairs of
       lowest-degree nodes and ``random`` uniform non-edges); each is scored by
       ``‖noiseless(g + e) − noiseless(g)‖`` (:func:`noiseless_change`).
    2. Adversarial features (``features=True``, edge-level targets only: under edge-level DP the
       features are public and the same in both worlds, so the challenger may choose them): for the
       ``refine`` best edges, copy two existing rows (a, b) — the most opposite pair of directions,
       and the largest-norm row with its most opposite row — onto the endpoints u ← a, v ← b, or onto
       the endpoints *and their neighbourhoods* (N(u) ∪ {u} ← a, then N(v) ∪ {v} ← b), and keep the
       variant with the largest noiseless change. Rows are copied, never invented, so the features
       stay in the data's domain (e.g. unit-norm rows stay unit-norm).

    Both worlds of the returned pair carry the same (possibly modified) features; ``info`` records
    the change with and without the modification. Chosen from the noiseless map only, never from
    trial outcomes. On the Gaussian reference (unit-normalised rows) every choice has change √2.
    """

    name = "search-edge"
    unit = Unit.EDGE
    needs_map = True

    def __init__(self, random: int = 64, per_strategy: int = 16, refine: int = 3, features: bool = True) -> None:
        self.random, self.per_strategy, self.refine, self.features = random, per_strategy, refine, features

    def candidate_edges(self, graph: Data, rng: np.random.Generator) -> list[tuple[tuple[int, int], str]]:
        out: list[tuple[tuple[int, int], str]] = []
        out += [(p, "low-degree") for p in LowDegreeEdge().ranked(graph, rng, self.per_strategy)]
        out += [(p, "feature-extreme") for p in FeatureExtremeEdge().ranked(graph, rng, self.per_strategy)]
        low = set(LowDegreeEdge().ranked(graph, rng))
        # the worst-edge canary's own candidates (all pairs among the lowest-degree nodes + random)
        out += [(p, "low-degree" if p in low else "random")
                for p in WorstCaseEdge(self.random).candidate_edges(graph, rng)]
        seen: dict[tuple[int, int], str] = {}
        for p, src in out:
            seen.setdefault(p, src)
        return list(seen.items())

    def _feature_variants(self, graph: Data, u: int, v: int, rows: list[tuple[str, int, int]]):
        ei = graph.edge_index
        for label, a, b in rows:
            for aa, bb, swap in ((a, b, ""), (b, a, " (swapped)")):
                x = graph.x.clone()
                x[u], x[v] = graph.x[aa], graph.x[bb]
                yield f"endpoints <- rows {label}{swap}", {"u": aa, "v": bb, "scope": "endpoints"}, x
                x = graph.x.clone()
                nu = torch.cat([ei[1][ei[0] == u], torch.tensor([u])])
                nv = torch.cat([ei[1][ei[0] == v], torch.tensor([v])])
                x[nu] = graph.x[aa]
                x[nv] = graph.x[bb]
                yield f"endpoints+neighbours <- rows {label}{swap}", {"u": aa, "v": bb, "scope": "neighbourhoods"}, x

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        if target is None or target.noiseless(graph) is None:
            raise ValueError("the search-edge canary needs a target with a noiseless mechanism map")
        base = target.noiseless(graph)
        scored = []
        for (u, v), src in self.candidate_edges(graph, rng):
            scored.append((noiseless_change(target, graph, add_edge(graph, u, v), base), (u, v), src))
        scored.sort(key=lambda t: -t[0])
        best_change, (u, v), src = scored[0]
        best_g0, how, rows_used = graph, "original features", None
        tried = 0
        if self.features and target.unit is Unit.EDGE:
            rows = opposite_rows(graph, rng)
            for change0, (a, b), src_ab in scored[: self.refine]:
                for label, used, x in self._feature_variants(graph, a, b, rows):
                    g0 = graph.clone()
                    g0.x = x
                    change = noiseless_change(target, g0, add_edge(g0, a, b))
                    tried += 1
                    if change > best_change * (1 + 1e-6):  # float noise never changes the features
                        best_change, (u, v), src, best_g0, how, rows_used = change, (a, b), src_ab, g0, label, used
        plain = next(c for c, e, _ in scored if e == (u, v))
        info = {"canary": self.name, "edge": [u, v], "noiseless_change": best_change,
                "noiseless_change_original_features": plain, "candidate_source": src,
                "features": how, "feature_rows": rows_used,
                "random_median_change": float(np.median([c for c, _, s in scored if s == "random"] or [np.nan])),
                "chosen_by": (f"largest noiseless change among {len(scored)} candidate edges (low-degree, "
                              f"feature-extreme, random) and {tried} public-feature variants; features: {how}")}
        return CanaryPair(best_g0, add_edge(best_g0, u, v), info)

    def many(self, graph: Data, m: int, rng: np.random.Generator, hops: int | None = None,
             target: Any = None) -> list[CanaryPair]:
        """m node-disjoint non-edges: the ones with the largest noiseless change among about 3m
        candidates (low-degree, feature-extreme and random disjoint sets); original features
        (per-canary feature changes would interact in one run). Without a target's noiseless map,
        falls back to the low-degree disjoint set."""
        low = [p.edge for p in LowDegreeEdge().many(graph, m, rng)]
        if target is None or target.noiseless(graph) is None:
            chosen, how = low, "disjoint low-degree non-edges (no noiseless map to search)"
        else:
            pool = list(dict.fromkeys(
                low + [p.edge for p in FeatureExtremeEdge().many(graph, m, rng)]
                + disjoint_non_edges(graph, m, rng)))
            base = target.noiseless(graph)
            ranked = sorted(pool, key=lambda e: -noiseless_change(target, graph, add_edge(graph, *e), base))
            chosen = _greedy_disjoint(ranked, m, "searched")
            how = f"largest noiseless change among {len(pool)} candidate non-edges, greedy node-disjoint"
        return [CanaryPair(graph, add_edge(graph, u, v), {"canary": self.name, "edge": [int(u), int(v)],
                                                           "chosen_by": how}) for u, v in chosen]

