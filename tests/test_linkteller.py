"""LinkTeller: influence analysis, the game attack, the stand-alone attack and its baselines."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.base import make as make_attack
from attacks.linkteller import (LinkTeller, feature_similarity_baseline, influence_matrix,
                                posterior_similarity_baseline, run_linkteller, symmetrise)
from audit.play.data import load
from canaries.edge import CanaryPair, RandomEdge
from targets.base import Release
from targets.gcn import NonPrivateGCN


@pytest.fixture(scope="module")
def gcn_release(csbm):
    return NonPrivateGCN().fit(csbm, torch.Generator().manual_seed(0))


def test_registry_builds_the_attack():
    attack = make_attack("linkteller")
    assert isinstance(attack, LinkTeller) and attack.levels == ("api",)


def test_symmetrise_and_validation():
    assert symmetrise(1.0, 3.0, "mean") == 2.0
    assert symmetrise(1.0, 3.0, "max") == 3.0
    assert symmetrise(1.0, 3.0, "as_code") == 3.0
    with pytest.raises(ValueError):
        symmetrise(1.0, 3.0, "min")
    with pytest.raises(ValueError):
        LinkTeller(sym="min")
    with pytest.raises(ValueError):
        LinkTeller(query_edges="all")


def test_influence_is_zero_beyond_two_hops(csbm, gcn_release):
    u = 0
    inf, stats = influence_matrix(gcn_release.api, csbm, np.arange(600), sources=[u])
    assert stats["queries"] == 2
    adj = torch.zeros(600, 600)
    adj[csbm.edge_index[0], csbm.edge_index[1]] = 1
    adj += torch.eye(600)
    reach = ((adj @ adj)[u] > 0).numpy()
    assert np.all(inf[0][~reach] == 0)
    neighbours = adj[u].numpy() > 0
    neighbours[u] = False
    two_hop_only = reach & ~(adj[u].numpy() > 0)
    # direct neighbours carry much more influence than two-hop-only nodes
    assert np.median(inf[0][neighbours]) > 2 * np.median(inf[0][two_hop_only])


def test_zero_feature_rows_use_the_additive_fallback(csbm, gcn_release):
    graph = csbm.clone()
    graph.x = graph.x.clone()
    graph.x[5] = 0
    inf, stats = influence_matrix(gcn_release.api, graph, [5, 6, 7])
    assert stats["zero_feature_nodes"] == 1
    assert stats["unchanged"] == 0


def test_stand_alone_on_gcn_csbm(csbm):
    out = run_linkteller(NonPrivateGCN(), csbm, n_pairs=100, rng=1)
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in out.values())
    assert out["auc"] > 0.9 and out["all_auc"] > 0.9
    assert out["auc"] > out["feature_auc"] + 0.2
    assert out["n_edges"] == out["n_non_edges"] == 100
    assert out["queries"] == out["n_target_nodes"] + 1
    assert 0 < out["precision"] <= 1 and out["precision"] == out["recall"]
    assert out["fresh_noise_per_query"] == 0
    again = run_linkteller(NonPrivateGCN(), csbm, n_pairs=100, rng=1)
    assert again == out  # deterministic by rng


def test_stand_alone_on_gcn_cora(data_dir):
    cora = load("cora", root=data_dir)
    out = run_linkteller(NonPrivateGCN(), cora, n_pairs=120, rng=0)
    assert out["auc"] >= 0.9
    assert out["test_accuracy"] > 0.7


def test_baselines_run(csbm, gcn_release):
    pairs = np.array([[0, 1], [2, 3], [4, 4]])
    f = feature_similarity_baseline(csbm, pairs)
    p = posterior_similarity_baseline(gcn_release.api(), pairs)
    assert f.shape == p.shape == (3,)
    assert np.isclose(f[2], 1.0) and np.isclose(p[2], 1.0)
    assert np.all(np.abs(f) <= 1 + 1e-9) and np.all(np.abs(p) <= 1 + 1e-9)


def test_game_score_higher_with_the_edge_in(csbm):
    target, attack = NonPrivateGCN(epochs=60), LinkTeller()
    ins, outs = [], []
    for seed in range(3):
        pair = RandomEdge().worlds(csbm, np.random.default_rng(seed), target)
        for bit, bucket in ((0, outs), (1, ins)):
            release = target.fit(pair.world(bit), torch.Generator().manual_seed(10 * seed + bit))
            bucket.append(attack.score(release, pair, csbm))
            assert release.info["attack_queries"] == 3
            assert attack.last["mode"] == "influence"
    assert np.mean(ins) > 2 * np.mean(outs)
    assert min(ins) > max(outs)
    assert attack.queries == 18 and attack.fresh_queries == 0


def _pair(csbm):
    return CanaryPair(csbm, csbm, {"edge": [0, 1]})


def test_cached_api_falls_back_to_posterior_similarity(csbm, gcn_release):
    cached = gcn_release.api()

    def predict(query_graph=None, nodes=None):
        return cached if nodes is None else cached[torch.as_tensor(nodes)]

    attack = LinkTeller()
    s = attack.score(Release(api=predict, info={}), _pair(csbm), csbm)
    assert attack.last["mode"] == "lsa2-post" and attack.fallbacks == 1
    assert np.isclose(s, posterior_similarity_baseline(cached, [[0, 1]])[0])
    plain = LinkTeller(fallback="none")
    assert plain.score(Release(api=predict, info={}), _pair(csbm), csbm) == 0.0


def test_fresh_noise_queries_are_counted(csbm, gcn_release):
    gen = torch.Generator().manual_seed(0)

    def noisy(query_graph=None, nodes=None):
        out = gcn_release.api(query_graph, nodes)
        return out + 0.01 * torch.randn(out.shape, generator=gen, dtype=out.dtype)

    release = Release(api=noisy, info={"fresh_noise_per_query": True})
    attack = LinkTeller()
    assert np.isfinite(attack.score(release, _pair(csbm), csbm))
    assert release.info["fresh_releases_queried"] == 3 and attack.fresh_queries == 3


def test_reused_noise_cancels_but_fresh_noise_hides_edges(csbm, gcn_release):
    """Spec §8.2: an API that reuses one noise draw across queries is as exposed as no noise."""
    fixed = 0.05 * torch.randn(600, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    gen = torch.Generator().manual_seed(2)

    def reused(query_graph=None, nodes=None):
        out = gcn_release.api(query_graph) + fixed
        return out if nodes is None else out[torch.as_tensor(nodes)]

    def fresh(query_graph=None, nodes=None):
        out = gcn_release.api(query_graph) + 0.05 * torch.randn(600, 3, generator=gen, dtype=torch.float64)
        return out if nodes is None else out[torch.as_tensor(nodes)]

    kw = dict(n_pairs=60, rng=3)
    a = run_linkteller(None, csbm, release=Release(api=reused, info={}), **kw)
    b = run_linkteller(None, csbm, release=Release(api=fresh, info={"fresh_noise_per_query": True}), **kw)
    assert a["auc"] > 0.9
    assert b["auc_two_sided"] < 0.75 and b["fresh_noise_per_query"] == 1
