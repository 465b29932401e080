"""csbm at scale: the dense sampler's graphs kept bit for bit, the sparse sampler's law, and a
graph too large for memory refused in one line."""
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from audit.console import cli
from audit.play import data
from graphs import datasets

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "csbm_f01e81c.json").read_text())


def _digest(g):
    h = hashlib.sha256()
    for key in ("edge_index", "x", "y", "train_mask", "val_mask", "test_mask"):
        h.update(getattr(g, key).numpy().tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("row", FIXTURE["graphs"], ids=lambda r: json.dumps(r["kwargs"]))
def test_small_csbm_graphs_are_the_dense_generators_bit_for_bit(row):
    assert _digest(datasets.csbm(**row["kwargs"])) == row["sha256"]


def _normalised(g):
    ei = g.edge_index
    assert (ei[0] != ei[1]).all()
    key = ei[0] * g.num_nodes + ei[1]
    assert torch.equal(key, torch.unique(key)), "not coalesced"
    back = ei[1] * g.num_nodes + ei[0]
    assert torch.equal(torch.sort(back).values, key), "not undirected"


def test_sparse_sampler_is_deterministic_normalised_and_has_the_models_law():
    n, deg, hom = 20_000, 8.0, 0.8
    a = data.load(f"csbm:n={n}")  # past DENSE_CSBM_MAX_N: the sparse sampler
    b = datasets.csbm(n=n, seed=0)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
    assert not torch.equal(a.edge_index, datasets.csbm(n=n, seed=1).edge_index)
    _normalised(a)
    m = a.edge_index.size(1) // 2
    # Binomial counts: sd ≈ sqrt(m) ≈ 280; isolated nodes (≈ n·e^-8 ≈ 7) add a few edges
    assert abs(m - deg * n / 2) < 6 * np.sqrt(deg * n / 2) + 50
    same = (a.y[a.edge_index[0]] == a.y[a.edge_index[1]]).double().mean().item()
    assert abs(same - hom) < 0.02
    assert int(torch.bincount(a.edge_index[0], minlength=n).min()) >= 1
    for c in range(3):  # features: signal · a unit centroid + N(0, 1/f) per coordinate
        xc = a.x[a.y == c].double()
        assert abs(xc.mean(0).norm().item() - 0.35) < 0.01
        assert abs(xc.var(0).mean().item() - 1 / 32) < 0.002


def test_forced_sparse_sampler_matches_the_dense_edge_law_on_a_small_graph():
    """Per block, the sparse sampler's edge count is Binomial(pairs, p): over 40 seeds of a
    150-node graph the mean count of intra- and inter-class edges matches the dense sampler's."""
    def counts(sparse):
        out = []
        for s in range(40):
            g = datasets.csbm(n=150, avg_degree=4.0, seed=s, connect_isolated=False, sparse=sparse)
            same = (g.y[g.edge_index[0]] == g.y[g.edge_index[1]]).sum().item() // 2
            out.append((same, g.edge_index.size(1) // 2 - same))
        return np.array(out, dtype=float)
    sparse, dense = counts(True), counts(False)
    for col in range(2):
        sd = np.sqrt(sparse[:, col].var() / 40 + dense[:, col].var() / 40)
        assert abs(sparse[:, col].mean() - dense[:, col].mean()) < 4 * sd


def test_sparse_sampler_leaves_no_isolated_node_even_in_a_sparse_graph():
    g = datasets.csbm(n=5000, avg_degree=0.5)
    assert int(torch.bincount(g.edge_index[0], minlength=5000).min()) >= 1
    _normalised(g)


def test_a_graph_too_large_for_memory_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(datasets, "available_memory", lambda: 2 << 30)
    with pytest.raises(data.DatasetError, match="needs about .* GiB; 2.0 GiB is free"):
        datasets.csbm(n=10_000_000, avg_degree=20)
    with pytest.raises(data.DatasetError, match="dense sampler is quadratic"):
        datasets.csbm(n=60_000, sparse=False)
    assert cli.main(["run", "--target", "gaussian", "--dataset", "csbm:n=60000,sparse=0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "GiB" in err and "Traceback" not in err
