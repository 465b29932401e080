"""Non-private GCN target: claim, determinism, utility, and the LinkTeller inference API."""
from __future__ import annotations

import math

import pytest
import torch
from torch_geometric.data import Data

from audit.play.data import load
from targets.base import build, get
from targets.gcn import GCNConfig, NonPrivateGCN, normalized_adjacency


@pytest.fixture(scope="module")
def fitted(csbm):
    target = NonPrivateGCN()
    return target, target.fit(csbm, torch.Generator().manual_seed(0))


def test_registry_and_views():
    assert get("gcn") is NonPrivateGCN
    target = build("gcn", epsilon=1.0)
    assert target.unit.value == "edge"
    assert set(target.levels) == {"api", "weights"}
    assert target.bugs == {}
    assert target.noiseless(load("csbm")) is None


def test_claim_is_infinite(csbm):
    claim = NonPrivateGCN().claim(csbm)
    assert math.isinf(claim.epsilon) and claim.epsilon > 0
    assert claim.delta == 1e-5
    assert claim.accountant == "none (non-private)"
    assert claim.unit == "edge"
    assert NonPrivateGCN(delta=1e-3).claim(csbm).delta == 1e-3
    assert claim.to_dict()["epsilon"] == "inf"  # JSON has no infinity


def test_config_validation():
    with pytest.raises(ValueError, match="normalization"):
        GCNConfig(normalization="rw")
    with pytest.raises(ValueError, match="dropout"):
        GCNConfig(dropout=1.0)


def test_normalized_adjacency_rows():
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # path 0-1-2
    aug = normalized_adjacency(ei, 3, "aug").to_dense()
    deg = torch.tensor([2.0, 3.0, 2.0])  # with self-loops
    expected = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 1, 1]]) / torch.sqrt(deg[:, None] * deg[None, :])
    assert torch.allclose(aug, expected)
    first = normalized_adjacency(ei, 3, "first-order").to_dense()
    assert torch.allclose(first.diagonal(), torch.ones(3))
    assert math.isclose(float(first[0, 1]), 1 / math.sqrt(2), rel_tol=1e-6)


def test_accuracy_and_release(fitted):
    _, release = fitted
    acc = release.info["accuracy"]
    assert acc["test"] > 0.8 and acc["val"] > 0.8
    assert release.info["fresh_noise_per_query"] is False
    probs = release.api()
    assert probs.shape == (600, 3)
    assert torch.allclose(probs.sum(1), torch.ones(600, dtype=probs.dtype))
    assert set(release.weights) == {"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias"}
    assert release.api(None, [3, 5]).shape == (2, 3)


def test_query_uses_query_features_and_private_edges(csbm, fitted):
    _, release = fitted
    base = release.api()
    # same features, no edges submitted: the server's private edges are used -> same output
    q = Data(x=csbm.x.clone(), edge_index=torch.empty(2, 0, dtype=torch.long), num_nodes=csbm.num_nodes)
    assert torch.allclose(release.api(q), base, atol=1e-6)
    # changed features change the output, and only within two hops of the changed node
    x = csbm.x.clone()
    x[0] = 3 * x[0]
    changed = release.api(Data(x=x, edge_index=csbm.edge_index, num_nodes=csbm.num_nodes))
    moved = (changed - base).abs().sum(1) > 0
    assert bool(moved[0])
    adj = torch.zeros(600, 600, dtype=torch.bool)
    adj[csbm.edge_index[0], csbm.edge_index[1]] = True
    adj |= torch.eye(600, dtype=torch.bool)
    within2 = (adj.float() @ adj.float())[0] > 0
    assert not bool(moved[~within2].any())
    assert release.info["query_count"]["queries"] >= 2


def test_inductive_query_on_other_graph(fitted):
    _, release = fitted
    small = load("csbm:n=100")
    probs = release.api(small)
    assert probs.shape == (100, 3) and torch.isfinite(probs).all()
