"""Fresh-query attack: an edge canary read through an inference API that re-runs its noisy
aggregation over the private edges on every query.

Threat model: the ``api`` view, as in LinkTeller (the adversary picks the query's features and
reads posteriors; it knows every edge but the canary). Where a target's ``predict`` answers from a
cached release (GAP's correct api), the query's features change nothing and neither does this
attack's score. Where every call recomputes a noisy aggregation of the query's features over the
private edges (GAP's planted bug ``fresh-inference-noise``), each call is one more Gaussian
release of those edges, with inputs the adversary chooses.

Queries, for a canary edge u → v (the public features and labels choose them, never a release):

* two classes ``a``, ``b`` whose mean feature rows are farthest apart, and their mean rows
  ``x_a``, ``x_b``;
* *probe*: every node gets ``x_a`` but u, which gets ``x_b``;
* *control*: every node gets ``x_a``.

With sum aggregation, row v of hop 1 is ``Σ_{w→v} h(x_w) + noise``. Without the edge the two query
types give v the same input, hence the same law of v's posterior. With it, the probe adds
``h(x_b)`` where the control adds ``h(x_a)``: v's hop-1 row moves towards class b. The statistic
is the difference of v's log-posterior margins ``log p_b − log p_a`` (probe minus control),
averaged over ``queries`` fresh pairs and studentised: ``t = mean/(sd/√Q)``. Only the
endpoint's row is read (edge canaries pick low-degree endpoints, where one in-neighbour moves the
normalised row most), and fresh noise on every call averages out as √Q. An undirected canary is
scored in both directions (a probe on u read at v, a probe on v read at u, one shared control read
at both) and the two t's are summed.

The score has no threshold fixed a priori (``natural_threshold`` is not set): the estimator
holds trials out to choose one. Against an exact μ-GDP claim (GAP's edge level), the ``gdp``
estimator is then valid whatever the score's law: a μ-GDP mechanism gives every test
FPR + FNR ≥ 2Φ(−μ/2) (at unequal world sizes, Φ⁻¹(1 − FPR) − Φ⁻¹(FNR) ≤ μ), and
:func:`audit.stats.estimators.gdp_mu_bound` turns a Clopper–Pearson bound on the held-out threshold's
errors into μ_lb exactly by these inequalities.

Queries are counted on the attack (``queries``, ``fresh_queries``; :meth:`queries_for` a pair:
2Q for a directed canary, 3Q for an undirected one, which the game records as
``attack_queries_per_trial``) and in the release's ``info`` (``attack_queries``,
``fresh_releases_queried``), as LinkTeller does.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from attacks.base import Attack
from attacks.linkteller import query_graph
from attacks.shadow import count_query
from targets.base import Level, Release, Unit
from targets.common.pair_law import PairLaw

_TINY = 1e-30  # floor for posteriors before the log (float32 softmax can underflow)


def contrast_rows(graph: Any) -> tuple[int, int, torch.Tensor, torch.Tensor]:
    """(class a, class b, x_a, x_b): the two classes with the farthest-apart mean feature rows."""
    y = graph.y.view(-1)
    classes = [int(c) for c in torch.unique(y)]
    if len(classes) < 2:
        raise ValueError("the fresh-query attack needs at least two classes in the public labels")
    x = graph.x.double()
    means = torch.stack([x[y == c].mean(0) for c in classes])
    dist = torch.cdist(means, means)
    i, j = divmod(int(dist.argmax()), len(classes))
    i, j = min(i, j), max(i, j)
    return classes[i], classes[j], means[i].to(graph.x.dtype), means[j].to(graph.x.dtype)


def margins(api: Any, query: Any, nodes: list[int], a: int, b: int, count: int) -> torch.Tensor:
    """log p_b − log p_a of the posteriors of `nodes` over `count` calls of the api on one query
    (count × len(nodes))."""
    calls = [torch.as_tensor(api(query, nodes)).detach().double().cpu().view(len(nodes), -1) for _ in range(count)]
    logp = torch.stack(calls).clamp_min(_TINY).log()
    return logp[..., b] - logp[..., a]


def studentised(diff: torch.Tensor) -> float:
    """mean/(sd/√n) of paired differences; 0 when they are all zero (an api that ignores queries)."""
    mean = float(diff.mean())
    se = float(diff.std(unbiased=True)) / math.sqrt(diff.numel())
    if se > 0:
        return mean / se
    return 0.0 if mean == 0 else math.copysign(1e12, mean)


class FreshQuery(Attack):
    """Score an edge canary from fresh api queries (see the module docstring).

    Args:
        queries: Q, the number of probe calls and of control calls per direction (int ≥ 2).
    """

    name = "fresh-query"
    levels = (Level.API,)
    units = (Unit.EDGE,)

    def __init__(self, queries: int = 64) -> None:
        if isinstance(queries, bool) or not isinstance(queries, int) or queries < 2:
            raise ValueError(f"queries must be an int >= 2, got {queries!r}")
        self.q = queries
        self.queries = 0          # api calls made by this attack object
        self.fresh_queries = 0    # of which were fresh noisy releases (the release says so)
        self.queries_per_score = 2 * queries
        self.last: dict[str, Any] = {}

    def queries_for(self, pair: Any) -> int:
        """API calls one score makes on `pair`: Q controls, and Q probes per direction read."""
        return self.q * (2 if PairLaw.of(pair).directed else 3)

    def score(self, release: Release, pair: Any, graph: Any = None) -> float:
        api = release.view(Level.API)
        g0 = pair.g0
        u, v = pair.edge
        directions = [(u, v)] if PairLaw.of(pair).directed else [(u, v), (v, u)]
        a, b, xa, xb = contrast_rows(g0)
        background = xa.expand(int(g0.num_nodes), -1).clone()
        readers = [dst for _, dst in directions]
        control = margins(api, query_graph(g0, background, "known"), readers, a, b, self.q)
        calls, ts = self.q, []
        for k, (src, dst) in enumerate(directions):
            x = background.clone()
            x[src] = xb
            probe = margins(api, query_graph(g0, x, "known"), [dst], a, b, self.q)[:, 0]
            ts.append(studentised(probe - control[:, k]))
            calls += self.q
        self._count(release, calls)
        self.queries_per_score = calls
        self.last = {"edge": (u, v), "classes": (a, b), "t": ts, "queries": calls}
        return float(sum(ts))

    def _count(self, release: Release, k: int) -> None:
        self.queries += k
        if release.fresh_noise_per_query:
            self.fresh_queries += k
        count_query(release, k)
