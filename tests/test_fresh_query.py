"""The fresh-query attack: silent on a cached api, sharp on one that re-aggregates with fresh noise."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from attacks.base import make as make_attack
from attacks.fresh_query import FreshQuery, contrast_rows, studentised
from audit.play.data import add_directed_edge, add_edge
from audit.stats.estimators import auc
from canaries.edge import CanaryPair
from targets.base import Release
from targets.gap import GAP


def _tiny_graph() -> Data:
    """Two classes with features ±e_0 (+ a class-free coordinate); a path 0-1-2-3 and 4-5."""
    x = torch.tensor([[1.0, 0.2], [1.0, -0.1], [1.0, 0.0], [-1.0, 0.3], [-1.0, 0.0], [-1.0, -0.2]])
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    ei = torch.tensor([[0, 1, 1, 2, 2, 3, 4, 5], [1, 0, 2, 1, 3, 2, 5, 4]])
    mask = torch.ones(6, dtype=torch.bool)
    return Data(x=x, y=y, edge_index=ei, train_mask=mask, val_mask=mask, test_mask=mask)


class FreshSumApi:
    """A miniature of GAP's buggy predict: every call sums the QUERY's features over the private
    in-neighbours and adds fresh N(0, σ²) noise; logits are that hop-1 row (classes = coordinate 0's
    sign: logit_0 = s_0, logit_1 = −s_0)."""

    def __init__(self, graph: Data, sigma: float, seed: int) -> None:
        self.edges, self.n, self.sigma = graph.edge_index, int(graph.num_nodes), sigma
        self.rng = torch.Generator().manual_seed(seed)

    def __call__(self, query: Data, nodes=None) -> torch.Tensor:
        s = torch.zeros(self.n, query.x.size(1)).index_add_(0, self.edges[1], query.x[self.edges[0]])
        s = s + self.sigma * torch.randn(s.shape, generator=self.rng)
        logits = torch.stack([s[:, 0], -s[:, 0]], 1)
        probs = torch.softmax(logits, -1)
        return probs if nodes is None else probs[torch.as_tensor(nodes)]


def _fresh_release(graph: Data, sigma: float, seed: int) -> Release:
    return Release(api=FreshSumApi(graph, sigma, seed), info={"fresh_noise_per_query": True})


def _directed_pair(graph: Data, u: int, v: int) -> CanaryPair:
    return CanaryPair(graph, add_directed_edge(graph, u, v), {"edge": [u, v], "directed": True})


def test_registry_and_arguments():
    attack = make_attack("fresh-query")
    assert isinstance(attack, FreshQuery) and attack.levels == ("api",)
    assert attack.queries_per_score == 2 * attack.q
    for bad in (1, 0, -4, 2.5, True, "8", None):
        with pytest.raises(ValueError):
            FreshQuery(queries=bad)


def test_contrast_rows_and_studentised():
    a, b, xa, xb = contrast_rows(_tiny_graph())
    assert (a, b) == (0, 1)
    assert torch.allclose(xa, torch.tensor([1.0, 0.1 / 3])) and torch.allclose(xb, torch.tensor([-1.0, 0.1 / 3]))
    assert studentised(torch.zeros(8, dtype=torch.float64)) == 0.0
    assert studentised(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)) == pytest.approx(2.0 / (1.0 / 3 ** 0.5))
    one = _tiny_graph()
    one.y = torch.zeros(6, dtype=torch.long)
    with pytest.raises(ValueError):
        contrast_rows(one)


def test_detects_the_edge_on_a_fresh_noise_api():
    g = _tiny_graph()
    pair = _directed_pair(g, 3, 5)  # 5's only in-neighbour is 4; the canary adds 3 → 5
    attack = FreshQuery(queries=16)
    scores = {b: [attack.score(_fresh_release(pair.world(b), 2.0, 100 * b + i), pair) for i in range(30)]
              for b in (0, 1)}
    assert auc(scores[0], scores[1]) > 0.95
    # without the edge the probe and control queries give node 5 the same law: t centred at 0
    assert abs(np.mean(scores[0])) < 1.0


def test_queries_are_counted():
    g = _tiny_graph()
    attack = FreshQuery(queries=4)
    release = _fresh_release(g, 1.0, 0)
    attack.score(release, _directed_pair(g, 3, 5))
    assert attack.queries == attack.fresh_queries == 8 == attack.queries_per_score
    assert release.info["attack_queries"] == release.info["fresh_releases_queried"] == 8
    undirected = CanaryPair(g, add_edge(g, 3, 5), {"edge": [3, 5]})
    attack.score(_fresh_release(g, 1.0, 1), undirected)
    assert attack.queries == 8 + 12 and attack.queries_per_score == 12 and len(attack.last["t"]) == 2
    # what the game records before any score: the same counts, from the pair alone
    assert attack.queries_for(_directed_pair(g, 3, 5)) == 8 and attack.queries_for(undirected) == 12
    cached = Release(api=lambda q=None, nodes=None: torch.full((len(nodes), 2), 0.5), info={})
    attack.score(cached, _directed_pair(g, 3, 5))
    assert attack.queries == 28 and attack.fresh_queries == 20 and "fresh_releases_queried" not in cached.info


def test_correct_gap_api_gives_the_same_score_in_both_worlds(csbm):
    """GAP's correct predict answers from the cached stack and ignores the query's features, so the
    probe and control answers are equal and the score is 0 in either world."""
    target = GAP(epsilon=4, encoder_epochs=2, epochs=2)
    target.prepare(csbm)
    pair = _directed_pair(csbm, 117, 335)
    attack = FreshQuery(queries=3)
    scores = [attack.score(target.fit(pair.world(b), torch.Generator().manual_seed(s)), pair)
              for b in (0, 1) for s in range(3)]
    assert scores == [0.0] * 6
    assert attack.queries == 6 * 6 and attack.fresh_queries == 0


def test_buggy_gap_api_moves_the_score_only_with_the_edge(csbm):
    target = GAP(epsilon=4, encoder_epochs=20, epochs=20, bug="fresh-inference-noise")
    target.prepare(csbm)
    pair = _directed_pair(csbm, 117, 335)
    attack = FreshQuery(queries=32)
    scores = {b: [attack.score(target.fit(pair.world(b), torch.Generator().manual_seed(s)), pair)
                  for s in range(20)] for b in (0, 1)}
    assert auc(scores[0], scores[1]) > 0.75  # μ ≈ 2 at Q = 32 (AUC ≈ 0.92)
    assert attack.fresh_queries == attack.queries == 40 * 64
