"""Edge canaries: low-degree, feature-extreme, and the sensitivity search (with public features)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from audit.play import data
from audit.play.data import degrees, has_edge
from canaries import base as canaries
from canaries.edge import (FeatureExtremeEdge, LowDegreeEdge, RandomEdge, SensitivitySearchEdge,
                           WorstCaseEdge, noiseless_change)
from targets.base import Unit, build
from targets.gaussian import GaussianMechanism


class MeanAggregation:
    """A toy edge-level map whose sensitivity depends on degree and features: D⁻¹(A + I)·X (raw rows)."""

    unit = Unit.EDGE

    def noiseless(self, graph):
        n = graph.num_nodes
        src, dst = graph.edge_index
        out = graph.x.double().clone()
        out.index_add_(0, dst, graph.x.double()[src])
        return out / (degrees(graph).double() + 1).unsqueeze(1)


def _check_pair(pair, graph, same_features=True):
    u, v = pair.info["edge"]
    assert u < v and not has_edge(pair.g0, u, v) and has_edge(pair.g1, u, v)
    assert pair.g1.edge_index.size(1) == pair.g0.edge_index.size(1) + 2
    assert torch.equal(pair.g0.x, pair.g1.x)
    if same_features:
        assert torch.equal(pair.g0.x, graph.x)
    assert pair.info["chosen_by"]


def test_registry_names():
    assert canaries.get("low-degree-edge") is LowDegreeEdge
    assert canaries.get("feature-extreme-edge") is FeatureExtremeEdge
    assert canaries.get("search-edge") is SensitivitySearchEdge
    assert {c.name for c in (LowDegreeEdge, FeatureExtremeEdge, SensitivitySearchEdge)} == {
        "low-degree-edge", "feature-extreme-edge", "search-edge"}


def test_low_degree_edge(csbm):
    pair = LowDegreeEdge().worlds(csbm, np.random.default_rng(0))
    _check_pair(pair, csbm)
    deg = degrees(csbm)
    u, v = pair.info["edge"]
    assert int(deg[u]) == int(deg[v]) == int(deg.min())          # csbm has leaves: a leaf–leaf non-edge
    again = LowDegreeEdge().worlds(csbm, np.random.default_rng(0))
    assert again.info["edge"] == pair.info["edge"]


def test_feature_extreme_edge(csbm):
    c = FeatureExtremeEdge(pool=32)
    pair = c.worlds(csbm, np.random.default_rng(0))
    _check_pair(pair, csbm)
    u, v = pair.info["edge"]
    norms = csbm.x.norm(dim=1)
    top = torch.argsort(-norms)[:32]
    d = torch.cdist(csbm.x[top].double(), csbm.x[top].double())
    assert pair.info["feature_distance"] == pytest.approx(float(d.max()), rel=1e-6) or \
        pair.info["feature_distance"] >= float(torch.quantile(d[d > 0], 0.99))
    assert pair.info["feature_distance"] > 2 * float(torch.cdist(csbm.x.double(), csbm.x.double()).mean()) / 1.5


@pytest.mark.parametrize("cls", [LowDegreeEdge, FeatureExtremeEdge, SensitivitySearchEdge])
def test_many_are_disjoint_non_edges(cls, csbm):
    target = MeanAggregation() if cls is SensitivitySearchEdge else None
    rng = np.random.default_rng(1)
    pairs = cls().many(csbm, 40, rng, target=target) if target else cls().many(csbm, 40, rng)
    ends = [x for p in pairs for x in p.info["edge"]]
    assert len(pairs) == 40 and len(set(ends)) == 80
    for p in pairs[:5]:
        _check_pair(p, csbm)
    with pytest.raises(ValueError):
        cls().many(csbm, csbm.num_nodes, rng)


def test_search_on_gaussian_reference_is_a_tie(csbm):
    """Unit-normalised rows: every edge (and every copied feature row) has change exactly √2, so the
    search cannot beat a random edge there and must not modify the features for float noise."""
    t = GaussianMechanism(epsilon=1.0)
    pair = SensitivitySearchEdge(random=16).worlds(csbm, np.random.default_rng(0), t)
    _check_pair(pair, csbm)
    assert pair.info["features"] == "original features"
    rnd = RandomEdge().worlds(csbm, np.random.default_rng(0), t)
    assert noiseless_change(t, pair.g0, pair.g1) == pytest.approx(math.sqrt(2), rel=1e-5)
    assert noiseless_change(t, rnd.g0, rnd.g1) == pytest.approx(math.sqrt(2), rel=1e-5)


def test_search_beats_random_and_worst_on_a_degree_and_feature_dependent_map(csbm):
    t = MeanAggregation()
    search = SensitivitySearchEdge().worlds(csbm, np.random.default_rng(0), t)
    _check_pair(search, csbm, same_features=False)
    best = noiseless_change(t, search.g0, search.g1)
    assert best == pytest.approx(search.info["noiseless_change"])
    rnd = [noiseless_change(t, *RandomEdge().worlds(csbm, np.random.default_rng(s), t)) for s in range(20)]
    worst = WorstCaseEdge().worlds(csbm, np.random.default_rng(0), t)
    assert best > 2 * np.median(rnd) and best > max(rnd)
    assert best >= worst.info["noiseless_change"] - 1e-9
    # the features were chosen (public, the same in both worlds) and that helped
    assert search.info["features"] != "original features"
    assert best > search.info["noiseless_change_original_features"]
    changed = (search.g0.x != csbm.x).any(1).nonzero().view(-1).tolist()
    assert set(search.info["edge"]) <= set(changed)
    plain = SensitivitySearchEdge(features=False).worlds(csbm, np.random.default_rng(0), t)
    assert torch.equal(plain.g0.x, csbm.x) and plain.info["features"] == "original features"


def test_search_is_deterministic_and_needs_a_map(csbm):
    t = MeanAggregation()
    a = SensitivitySearchEdge(random=8).worlds(csbm, np.random.default_rng(3), t)
    b = SensitivitySearchEdge(random=8).worlds(csbm, np.random.default_rng(3), t)
    assert a.info == b.info and torch.equal(a.g0.x, b.g0.x)
    with pytest.raises(ValueError):
        SensitivitySearchEdge().worlds(csbm, np.random.default_rng(0), build("gcn"))


def test_search_beats_random_on_caribou():
    """CARIBOU's edge sensitivity depends on the edge (degree-normalised propagation): the searched
    canary moves the noiseless X(K) far more than random edges do."""
    g = data.csbm(n=300, seed=1)
    t = build("caribou", epsilon=1.0)
    search = SensitivitySearchEdge(random=16, per_strategy=8, refine=1).worlds(g, np.random.default_rng(0), t)
    rnd = [noiseless_change(t, *RandomEdge().worlds(g, np.random.default_rng(s), t)) for s in range(8)]
    assert search.info["noiseless_change"] > max(rnd) and search.info["noiseless_change"] > 2 * np.median(rnd)


def test_worst_directed_edge_adds_one_entry_and_gap_charges_it():
    from canaries.edge import WorstDirectedEdge

    g = data.csbm(n=120, classes=3, features=8, seed=5)
    target = build("gap", epsilon=2.0, encoder_epochs=5, epochs=1)
    pair = WorstDirectedEdge(candidates=16).worlds(g, np.random.default_rng(0), target)
    u, v = pair.info["edge"]
    assert pair.g1.edge_index.size(1) == g.edge_index.size(1) + 1
    assert has_edge(pair.g1, u, v) and not has_edge(g, u, v)
    # GAP's aggregation at the target row v moves by one unit row: Δ = 1, what its claim charges
    change = target.noiseless(pair.g1) - target.noiseless(g)
    assert (change.abs().sum(-1) > 0).sum(-1)[0].item() == 1
    assert change[0].norm().item() == pytest.approx(1.0, rel=1e-4)
