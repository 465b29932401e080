"""Node canaries keep indexing stable and change only what they say."""
import numpy as np
import pytest
import torch

from canaries.node import InsertNode, RemoveNode
from targets.dpsgd_gcn import DPSGDGCN
from targets.heterpoisson import HeterPoisson

MASKS = ("train_mask", "val_mask", "test_mask")


@pytest.fixture(scope="module")
def graph(make_csbm):
    return make_csbm(n=150, classes=3, features=8, seed=5)


def _edges(g):
    return set(map(tuple, g.edge_index.t().tolist()))


def test_remove_node_changes_only_the_node(graph):
    pair = RemoveNode().worlds(graph, np.random.default_rng(0))
    z = pair.info["node"]
    g0, g1 = pair
    assert graph.train_mask[z] and pair.info["degree"] > 0
    assert g0.num_nodes == g1.num_nodes == graph.num_nodes
    assert torch.equal(g0.x, graph.x) and torch.equal(g0.y, graph.y)
    assert _edges(g1) == _edges(graph)
    removed = _edges(graph) - _edges(g0)
    assert removed and all(z in e for e in removed) and not (_edges(g0) - _edges(graph))
    assert not any(z in e for e in _edges(g0))
    for m in MASKS:
        diff = (getattr(g0, m) != getattr(graph, m)).nonzero().view(-1).tolist()
        assert diff == ([z] if m == "train_mask" else [])
        assert torch.equal(getattr(g1, m), getattr(graph, m))
    deg = torch.bincount(graph.edge_index[0], minlength=graph.num_nodes)
    assert torch.equal(g0.public_outdeg, deg) and torch.equal(g1.public_outdeg, deg)
    again = RemoveNode().worlds(graph, np.random.default_rng(0))
    assert again.info["node"] == z
    other = {RemoveNode().worlds(graph, np.random.default_rng(s)).info["node"] for s in range(8)}
    assert len(other) > 1


def test_insert_node_changes_only_the_node(graph):
    pair = InsertNode(degree=4).worlds(graph, np.random.default_rng(0))
    n, z = graph.num_nodes, pair.info["node"]
    g0, g1 = pair
    assert z == n and g0.num_nodes == g1.num_nodes == n + 1
    for g in (g0, g1):
        assert torch.equal(g.x[:n], graph.x) and torch.equal(g.y[:n], graph.y)
        for m in MASKS:
            assert torch.equal(getattr(g, m)[:n], getattr(graph, m))
    assert torch.equal(g0.x, g1.x) and torch.equal(g0.y, g1.y)
    assert _edges(g0) == _edges(graph)
    added = _edges(g1) - _edges(graph)
    nbrs = pair.info["neighbours"]
    assert added == {(z, v) for v in nbrs} | {(v, z) for v in nbrs} and _edges(graph) <= _edges(g1)
    assert all(graph.train_mask[v] for v in nbrs) and len(nbrs) == 4
    assert g1.train_mask[z] and not g0.train_mask[z] and not g1.val_mask[z] and not g1.test_mask[z]
    counts = torch.bincount(graph.y[graph.train_mask], minlength=3)
    assert counts[pair.info["label"]] == counts.min()
    # out of distribution: farther from the mean than every real node
    dist = (graph.x - graph.x.mean(0)).norm(dim=1)
    assert float((g1.x[z] - graph.x.mean(0)).norm()) > 2 * float(dist.max())
    assert torch.equal(g0.public_outdeg, g1.public_outdeg)
    assert int(g1.public_outdeg[z]) == 4


def test_insert_node_on_a_graph_that_states_its_node_count(graph):
    """A pre-processed graph (isolated nodes dropped, as GAP, CARIBOU and DPDGC do) carries an
    explicit node count; the worlds must count the appended node (it once stayed out, and GAP's
    node-level mechanism audit on CiteSeer indexed past the end)."""
    from graphs.ops import drop_isolated

    lonely = graph.clone()
    lonely.edge_index = lonely.edge_index[:, (lonely.edge_index != 0).all(0)]  # node 0 isolated
    dropped = drop_isolated(lonely)
    n = graph.num_nodes - 1
    assert dropped.num_nodes == n and "num_nodes" in dropped.keys()
    g0, g1 = InsertNode(degree=4).worlds(dropped, np.random.default_rng(0))
    assert g0.num_nodes == g1.num_nodes == n + 1 == g0.x.size(0) == g1.x.size(0)
    assert int(g1.edge_index.max()) == n


@pytest.mark.parametrize("canary", [RemoveNode(), InsertNode()])
def test_absent_node_is_never_trained_on(graph, canary):
    pair = canary.worlds(graph, np.random.default_rng(2))
    z = pair.info["node"]
    tr0 = DPSGDGCN(noise_multiplier=1.0, steps=3).fit(pair.g0, torch.Generator().manual_seed(0)).view("trace")
    tr1 = DPSGDGCN(noise_multiplier=1.0, steps=3).fit(pair.g1, torch.Generator().manual_seed(0)).view("trace")
    assert all(z not in s.central.tolist() for s in tr0)
    assert any(z in s.central.tolist() for s in tr1)  # q = 1: z is in every batch of world 1
    hp = HeterPoisson(noise_multiplier=1.0, steps=2, hidden=4)
    for s in hp.fit(pair.g0, torch.Generator().manual_seed(0)).view("trace"):
        assert z not in s.central.tolist()
    batch = hp.sample_batch(pair.g0, torch.Generator().manual_seed(1), 1.0)
    assert z not in batch.src.tolist() and z not in batch.dst.tolist()
