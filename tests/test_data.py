import os

import pytest
import torch

from audit.play import data


def _check_normalised(g):
    ei = g.edge_index
    assert (ei[0] != ei[1]).all(), "self-loops"
    pairs = set(map(tuple, ei.t().tolist()))
    assert all((v, u) in pairs for u, v in pairs), "not undirected"
    assert len(pairs) == ei.size(1), "duplicates"
    for m in ("train_mask", "val_mask", "test_mask"):
        assert getattr(g, m).dtype == torch.bool
    assert not (g.train_mask & g.test_mask).any()


def test_csbm_deterministic_by_seed_and_normalised():
    a, b, c = data.load("csbm", seed=0), data.load("csbm", seed=0), data.load("csbm", seed=1)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
    assert not torch.equal(a.x, c.x)
    _check_normalised(a)
    stats = data.graph_stats(a)
    assert stats.nodes == 600 and stats.classes == 3 and stats.min_degree >= 1


@pytest.mark.parametrize("name, nodes, edges, train", [
    ("chain-s", 48, 42, 8), ("chain-m", 60, 54, 10), ("chain-l", 90, 84, 15), ("chain-x", 150, 140, 25)])
def test_chains(name, nodes, edges, train):
    g = data.load(name)
    _check_normalised(g)
    s = data.graph_stats(g)
    assert (s.nodes, s.undirected_edges, s.max_degree) == (nodes, edges, 2)
    assert int(g.train_mask.sum()) == train and int(g.val_mask.sum()) == train
    first = g.x.sum(1) > 0  # only chain heads carry features
    assert int(first.sum()) == nodes // (nodes // (2 * (3 if name != "chain-x" else 5)))


def test_cora_from_data_dir(data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("AUDIT_CACHE_DIR", str(tmp_path))
    g = data.load("cora")
    s = data.graph_stats(g)
    assert s.nodes == 2708 and s.undirected_edges == 5278 and s.classes == 7
    assert int(g.train_mask.sum()) == 140  # public split
    _check_normalised(g)
    assert not (data_dir / "Cora" / "processed").exists(), "wrote into the read-only source folder"


def test_missing_dataset_is_a_clear_error(tmp_path):
    with pytest.raises(data.DatasetError, match="not found"):
        data.load("cora", root=tmp_path)
    with pytest.raises(data.DatasetError, match="unknown dataset 'nope'"):
        data.load("nope")


def test_edge_helpers_do_not_mutate():
    g = data.load("chain-s")
    before = g.edge_index.clone()
    g1 = data.add_edge(g, 0, 20)
    assert torch.equal(g.edge_index, before)
    assert data.has_edge(g1, 0, 20) and data.has_edge(g1, 20, 0)
    g2 = data.remove_edge(g1, 20, 0)
    assert torch.equal(g2.edge_index, before)


def test_split_option_and_drop_isolated():
    g = data.load("csbm", split=(0.1, 0.1, 0.2), seed=3)
    assert int(g.train_mask.sum()) == 60 and int(g.test_mask.sum()) == 120
    assert not (g.train_mask & g.val_mask).any()
    with pytest.raises(ValueError, match="split"):
        data.load("csbm", split=(0.5, 0.5, 0.5))
    h = g.clone()
    h.x = torch.cat([h.x, torch.zeros(2, h.x.size(1))])
    h.y = torch.cat([h.y, torch.zeros(2, dtype=torch.long)])
    for m in ("train_mask", "val_mask", "test_mask"):
        setattr(h, m, torch.cat([getattr(h, m), torch.zeros(2, dtype=torch.bool)]))
    h.num_nodes = g.num_nodes + 2
    d = data.drop_isolated(h)
    assert d.num_nodes == g.num_nodes and torch.equal(d.edge_index, g.edge_index)


def test_csbm_keeps_isolated_nodes_only_when_asked():
    from audit.play.data import degrees, load
    assert int((degrees(load("csbm:avg_degree=0.05")) == 0).sum()) == 0
    sparse = load("csbm:avg_degree=0.05,connect_isolated=0")
    assert int((degrees(sparse)[sparse.train_mask] == 0).sum()) > 100


def test_csbm_seed_option_fixes_the_graph_whatever_the_run_seed():
    load = data.load
    fixed = [load("csbm:seed=0", seed=s) for s in (0, 3)]
    assert torch.equal(fixed[0].edge_index, fixed[1].edge_index) and torch.equal(fixed[0].x, fixed[1].x)
    assert torch.equal(fixed[0].edge_index, load("csbm", seed=0).edge_index)
    assert not torch.equal(load("csbm", seed=3).edge_index, fixed[0].edge_index)
