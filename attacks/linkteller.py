"""LinkTeller: recovering private edges from a GNN inference API by influence analysis.

Wu, Long, Zhang & Li, IEEE S&P 2022 (arXiv 2108.06504); spec ``shared/specs/linkteller.md``.

Threat model (spec §1): the server holds the private edges; the adversary knows every node's
features, may query the ``api`` view with feature matrices of its choice and reads posteriors,
but knows no edge. Influence of node v on node u (spec §3)::

    P0 = api(X)[targets]
    X' = X with row v scaled by (1 + Δ)          (rows that are all zero: X'[v] = X[v] + Δ·1,
                                                 an extension of the paper, counted in the stats)
    INF[v → u] = || (api(X')[u] − P0[u]) / Δ ||₂

For a 2-layer GCN a direct edge gives a first-order term in Â_uv, two-hop pairs only second-order
terms and pairs more than two hops apart exactly zero, so a large influence means an edge. A pair
{u, v} is scored by ``sym`` of INF[u → v] and INF[v → u]: ``mean`` (default), ``max`` or
``as_code`` (the reference code's INF[second → first]).

Queries: a query is a :class:`torch_geometric.data.Data` carrying the adversary's features and
``query_edges`` — ``"none"`` (an empty edge set: the adversary knows no edge; the stand-alone
default) or ``"known"`` (the edges the adversary knows: in the audit game, those of world 0, i.e.
everything but the canary; the game default). A target whose API honours the threat model (e.g.
``targets.gcn``) runs on the query's features and its own *private* edges, whatever the query's
edges are.

Two uses:

* :class:`LinkTeller` — the game attack (``score(release, pair, graph)``): three API calls per trial
  (baseline, perturb u, perturb v) and the symmetrised influence of the canary pair. When every
  perturbed output equals the baseline exactly, the API ignores the query's features (a cached
  release, e.g. GAP's transductive ``predict``); influence is then identically zero and the score
  falls back (``fallback="lsa2-post"``, default) to the LSA2-post similarity of the two endpoints'
  posteriors (spec §5.1), a function of the same release. Query counts are kept on the attack
  (``queries``, ``queries_per_score``) and in ``release.info["attack_queries"]``; where the release
  says ``fresh_noise_per_query`` each call is a fresh noisy release that the target's claim must
  compose (spec §8.1), and the count is also added to ``release.info["fresh_releases_queried"]``.
* :func:`run_linkteller` — the stand-alone attack with the paper's metrics (AUC, precision/recall at
  the true density, TPR at low FPR) beside the feature-similarity and LSA2-post baselines.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from attacks.base import Attack
from attacks.metrics import auc as _auc
from attacks.metrics import tpr_at_fpr as _tpr_at_fpr
from attacks.shadow import count_query
from targets.base import Level, Release, Unit, resolve

SYMMETRISATIONS = ("mean", "max", "as_code")


# ---------------------------------------------------------------------------------------------
# queries and influence
# ---------------------------------------------------------------------------------------------
def query_graph(graph: Data, x: torch.Tensor, query_edges: str = "none") -> Data:
    """A query carrying features `x` and the edges the adversary may submit (``none`` or ``known``)."""
    if query_edges not in ("none", "known"):
        raise ValueError(f"query_edges must be 'none' or 'known', got {query_edges!r}")
    n = int(graph.num_nodes)
    edges = graph.edge_index if query_edges == "known" else torch.empty(2, 0, dtype=torch.long)
    q = Data(x=x, edge_index=edges, num_nodes=n)
    for key in ("y", "train_mask", "val_mask", "test_mask"):
        if getattr(graph, key, None) is not None:
            q[key] = getattr(graph, key)
    return q


def _posteriors(api: Any, query: Data, nodes: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(api(query, nodes)).detach().double().cpu()


def influence_matrix(api: Any, graph: Data, nodes: Any, *, step: float = 1e-4, query_edges: str = "none",
                     sources: Any = None) -> tuple[np.ndarray, dict[str, Any]]:
    """INF[i, j] = influence of ``sources[i]`` on ``nodes[j]`` (spec §3), one API call per source + 1.

    ``sources`` defaults to ``nodes``. Returns the matrix (len(sources) × len(nodes)) and stats:
    ``queries``, ``zero_feature_nodes`` (additive fallback used), ``unchanged`` (sources whose
    perturbation left every output bit-identical).
    """
    if not step > 0:
        raise ValueError(f"step must be > 0, got {step!r}")
    nodes = torch.as_tensor(nodes, dtype=torch.long).view(-1)
    sources = nodes if sources is None else torch.as_tensor(sources, dtype=torch.long).view(-1)
    x = graph.x.clone()
    p0 = _posteriors(api, query_graph(graph, x, query_edges), nodes)
    inf = np.zeros((sources.numel(), nodes.numel()))
    zero_rows = unchanged = 0
    for i, v in enumerate(sources.tolist()):
        row = x[v].clone()
        if bool((row == 0).all()):
            zero_rows += 1
            x[v] = row + step
        else:
            x[v] = row * (1.0 + step)
        pi = _posteriors(api, query_graph(graph, x, query_edges), nodes)
        x[v] = row
        diff = pi - p0
        unchanged += int(bool((diff == 0).all()))
        inf[i] = (diff / step).norm(dim=1).numpy()
    return inf, {"queries": sources.numel() + 1, "zero_feature_nodes": zero_rows, "unchanged": unchanged}


def symmetrise(inf_ab: np.ndarray | float, inf_ba: np.ndarray | float, sym: str = "mean") -> np.ndarray:
    """Pair score from INF[a → b] and INF[b → a] (a < b): ``mean``, ``max`` or ``as_code`` (INF[b → a])."""
    a, b = np.asarray(inf_ab, float), np.asarray(inf_ba, float)
    if sym == "mean":
        return 0.5 * (a + b)
    if sym == "max":
        return np.maximum(a, b)
    if sym == "as_code":
        return b
    raise ValueError(f"sym must be one of {', '.join(SYMMETRISATIONS)}, got {sym!r}")


def _centred_cosine(z: np.ndarray, pairs: np.ndarray, centre: np.ndarray | None = None) -> np.ndarray:
    """Correlation-style cosine of rows z[u] − mean, z[v] − mean (LSA2, spec §5.1)."""
    z = np.asarray(z, float)
    c = z.mean(0) if centre is None else centre
    a, b = z[pairs[:, 0]] - c, z[pairs[:, 1]] - c
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(den > 0, (a * b).sum(1) / np.where(den > 0, den, 1.0), 0.0)


def feature_similarity_baseline(graph: Data, pairs: Any) -> np.ndarray:
    """Cosine similarity of the two endpoints' raw features (needs no API; LSA2-attr without centring)."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    x = graph.x.double().cpu().numpy()
    return _centred_cosine(x, pairs, centre=np.zeros(x.shape[1]))


def posterior_similarity_baseline(posteriors: Any, pairs: Any) -> np.ndarray:
    """LSA2-post: correlation of the endpoints' posteriors, centred by the mean posterior."""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return _centred_cosine(torch.as_tensor(posteriors).double().cpu().numpy(), pairs)


# ---------------------------------------------------------------------------------------------
# the game attack
# ---------------------------------------------------------------------------------------------
class LinkTeller(Attack):
    """Score the canary edge of an edge game by LinkTeller's symmetrised influence (see module doc).

    Args:
        step: Δ, the relative feature perturbation (1e-4, the paper's default).
        sym: ``mean`` (default), ``max`` or ``as_code``.
        query_edges: ``known`` (world 0's edges; default in the game) or ``none``.
        fallback: ``lsa2-post`` (default) or ``none``: what to score when the API ignores features.
    """

    name = "linkteller"
    levels = (Level.API,)
    units = (Unit.EDGE,)
    queries_per_score = 3

    def __init__(self, step: float = 1e-4, sym: str = "mean", query_edges: str = "known",
                 fallback: str = "lsa2-post") -> None:
        if sym not in SYMMETRISATIONS:
            raise ValueError(f"sym must be one of {', '.join(SYMMETRISATIONS)}, got {sym!r}")
        if fallback not in ("lsa2-post", "none"):
            raise ValueError(f"fallback must be 'lsa2-post' or 'none', got {fallback!r}")
        if query_edges not in ("none", "known"):
            raise ValueError(f"query_edges must be 'none' or 'known', got {query_edges!r}")
        self.step, self.sym, self.query_edges, self.fallback = float(step), sym, query_edges, fallback
        self.queries = 0          # API calls made by this attack object
        self.fresh_queries = 0    # of which were fresh noisy releases (release says so)
        self.fallbacks = 0        # trials scored by the fallback
        self.last: dict[str, Any] = {}

    def score(self, release: Release, pair: Any, graph: Any = None) -> float:
        u, v = pair.edge
        api = release.view(Level.API)
        inf, stats = influence_matrix(api, pair.g0, [u, v], step=self.step, query_edges=self.query_edges)
        self._count(release, stats["queries"])
        mode = "influence"
        score = float(symmetrise(inf[0, 1], inf[1, 0], self.sym))
        if stats["unchanged"] == 2 and self.fallback == "lsa2-post":
            mode = "lsa2-post"
            self.fallbacks += 1
            posteriors = api(None, None)
            self._count(release, 1)
            score = float(posterior_similarity_baseline(posteriors, [[u, v]])[0])
        self.last = {"edge": (u, v), "mode": mode, "influence_uv": float(inf[0, 1]),
                     "influence_vu": float(inf[1, 0]), **stats}
        return score

    def _count(self, release: Release, k: int) -> None:
        self.queries += k
        if release.fresh_noise_per_query:
            self.fresh_queries += k
        count_query(release, k)


# ---------------------------------------------------------------------------------------------
# the stand-alone attack
# ---------------------------------------------------------------------------------------------
def _undirected_edges(graph: Data) -> np.ndarray:
    ei = graph.edge_index.cpu().numpy()
    keep = ei[0] < ei[1]
    return np.stack([ei[0][keep], ei[1][keep]], 1)


def _sample_non_edges(n: int, count: int, existing: set[tuple[int, int]], rng: np.random.Generator) -> np.ndarray:
    out: set[tuple[int, int]] = set()
    tries = 0
    while len(out) < count and tries < 100 * count + 1000:
        tries += 1
        a, b = (int(t) for t in rng.choice(n, size=2, replace=False))
        p = (min(a, b), max(a, b))
        if p not in existing:
            out.add(p)
    return np.array(sorted(out), dtype=np.int64).reshape(-1, 2)


def _binary_metrics(prefix: str, scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    pos, neg = scores[labels == 1], scores[labels == 0]
    a = _auc(neg, pos)
    return {f"{prefix}auc": a, f"{prefix}auc_two_sided": max(a, 1 - a),
            f"{prefix}tpr_at_fpr_1pct": _tpr_at_fpr(neg, pos, 0.01),
            f"{prefix}tpr_at_fpr_0.1pct": _tpr_at_fpr(neg, pos, 0.001)}


def run_linkteller(target: Any, graph: Data, *, n_pairs: int = 500, rng: np.random.Generator | int | None = None,
                   step: float = 1e-4, sym: str = "mean", query_edges: str = "none",
                   release: Release | None = None) -> dict[str, float | int]:
    """Fit `target` once on `graph` and run LinkTeller on a balanced set of pairs.

    Pairs: ``n_pairs`` undirected edges drawn uniformly and as many uniform non-edges; the target
    node set V(C) is their endpoints (``|V(C)| + 1`` API calls). Metrics:

    * on the balanced pairs: ``auc``, ``auc_two_sided`` (max(AUC, 1 − AUC), spec §4),
      ``tpr_at_fpr_1pct``, ``tpr_at_fpr_0.1pct``;
    * on all pairs inside V(C) (the paper's setting; the many non-edges make low-FPR rates
      precise): ``all_auc``, ``all_tpr_at_fpr_*``, and ``precision``/``recall``/``f1`` of the top-m
      pairs at the true density (m = number of edges inside V(C), so precision = recall), and
      ``precision_at_prior``/``recall_at_prior`` with m̂ = ⌈k·|V(C)|(|V(C)|−1)/2⌉ from the graph-wide
      density k (a public prior; V(C) is denser than the graph since it is made of edge endpoints);
    * baselines on the balanced pairs: ``feature_*`` (cosine of raw features) and ``posterior_*``
      (LSA2-post on the released posteriors);
    * bookkeeping: ``n_edges``, ``n_non_edges``, ``n_target_nodes``, ``queries``,
      ``zero_feature_nodes``, ``unchanged_queries``, ``fresh_noise_per_query`` (0/1),
      ``test_accuracy`` (if the release reports it).

    ``rng`` is a numpy Generator or a seed; it draws the training seed and the pairs. Pass
    ``release`` to attack an existing release instead of fitting (the target is then unused).
    """
    if n_pairs < 1:
        raise ValueError(f"n_pairs must be >= 1, got {n_pairs!r}")
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    fit_seed = int(rng.integers(0, 2**62))
    if release is None:
        target.prepare(graph)
        release = target.fit(graph, torch.Generator().manual_seed(fit_seed))
    api = release.view(Level.API)

    n = int(graph.num_nodes)
    edges = _undirected_edges(graph)
    existing = set(map(tuple, edges.tolist()))
    pos = edges[np.sort(rng.choice(len(edges), size=min(n_pairs, len(edges)), replace=False))]
    neg = _sample_non_edges(n, len(pos), existing, rng)
    pairs = np.concatenate([pos, neg])
    labels = np.concatenate([np.ones(len(pos), int), np.zeros(len(neg), int)])

    nodes = np.unique(pairs)
    index = {int(v): i for i, v in enumerate(nodes)}
    inf, stats = influence_matrix(api, graph, nodes, step=step, query_edges=query_edges)
    a = np.array([index[int(p)] for p in pairs[:, 0]])
    b = np.array([index[int(p)] for p in pairs[:, 1]])
    scores = symmetrise(inf[a, b], inf[b, a], sym)

    out: dict[str, float | int] = {}
    out.update(_binary_metrics("", scores, labels))
    ap_order = np.argsort(-scores, kind="stable")
    hits = labels[ap_order]
    out["average_precision"] = float((np.cumsum(hits) / np.arange(1, len(hits) + 1))[hits == 1].mean())

    # every pair inside V(C)
    iu, ju = np.triu_indices(len(nodes), k=1)
    all_scores = symmetrise(inf[iu, ju], inf[ju, iu], sym)
    in_t = np.zeros(len(nodes) * len(nodes), dtype=bool)
    loc = [(index[int(s)], index[int(t)]) for s, t in edges if int(s) in index and int(t) in index]
    if loc:
        li, lj = np.array(loc).T
        in_t[li * len(nodes) + lj] = True
    all_labels = in_t[iu * len(nodes) + ju].astype(int)
    out.update(_binary_metrics("all_", all_scores, all_labels))
    m_true = int(all_labels.sum())
    order = np.argsort(-all_scores, kind="stable")
    tp = int(all_labels[order[:m_true]].sum())
    out["precision"] = tp / m_true if m_true else 0.0
    out["recall"] = tp / m_true if m_true else 0.0
    out["f1"] = out["precision"]
    density = len(edges) / (n * (n - 1) / 2)
    m_hat = max(1, math.ceil(density * len(iu)))
    tp_hat = int(all_labels[order[:m_hat]].sum())
    out["precision_at_prior"] = tp_hat / m_hat
    out["recall_at_prior"] = tp_hat / m_true if m_true else 0.0

    # baselines
    out.update(_binary_metrics("feature_", feature_similarity_baseline(graph, pairs), labels))
    out.update(_binary_metrics("posterior_", posterior_similarity_baseline(api(None, None), pairs), labels))

    acc = resolve(release.accuracy)
    out.update({
        "n_edges": int(len(pos)), "n_non_edges": int(len(neg)), "n_target_nodes": int(len(nodes)),
        "n_pairs_in_targets": int(len(iu)), "edges_in_targets": m_true,
        "queries": int(stats["queries"]), "zero_feature_nodes": int(stats["zero_feature_nodes"]),
        "unchanged_queries": int(stats["unchanged"]),
        "fresh_noise_per_query": int(bool(release.fresh_noise_per_query)),
        "step": float(step),
    })
    if isinstance(acc, dict) and "test" in acc:
        out["test_accuracy"] = float(acc["test"])
    return out
