"""The stacked GCN (targets/common/stacked_gcn.py) behind gcn, edgerand and lapgraph: fit_batch(g, rngs)[k]
releases bitwise what fit(g, rngs[k]) does whatever K, the stack trains the module's GCN, and a
whole run stores the same trials at --batch 1 and auto."""
import pytest
import torch
import torch.nn.functional as F

from targets.common import stacked_gcn
from targets.base import build
from targets.gcn import GCN, normalized_adjacency

EPOCHS = 12  # enough epochs for the kept-epoch choice and Adam's moments to matter; fast


def _gens(seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


def _same_release(a, b, graph):
    assert a.weights.keys() == b.weights.keys()
    for k in a.weights:
        assert torch.equal(a.weights[k], b.weights[k]), k
    assert a.info["best_val_accuracy"] == b.info["best_val_accuracy"]
    assert a.info["accuracy"] == b.info["accuracy"]
    query = graph.clone()
    query.x = graph.x * 1.001
    assert torch.equal(a.api(None, None), b.api(None, None))
    assert torch.equal(a.api(query, [0, 5]), b.api(query, [0, 5]))


def _sparse_features(graph):
    g = graph.clone()
    g.x = g.x * (torch.rand(g.x.shape, generator=torch.Generator().manual_seed(0)) < 0.05)
    return g


CASES = [
    ("gcn", {}, None),
    ("gcn", {"dropout": 0.3, "normalization": "first-order"}, None),
    ("gcn", {"dropout": 0.0}, None),
    ("edgerand", {}, None),
    ("edgerand", {"variant": "density"}, None),
    ("edgerand", {}, "no-noise"),
    ("lapgraph", {}, None),
    ("lapgraph", {}, "no-noise"),
]


@pytest.mark.parametrize("name,params,bug", CASES)
def test_fit_batch_is_fit_bitwise(csbm, name, params, bug):
    t = build(name, epsilon=1.0, bug=bug, epochs=EPOCHS, **params)
    seeds = [11, 12, 13, 14, 15]
    alone = [t.fit(csbm, g) for g in _gens(seeds)]
    for k in (2, 5):
        batch = t.fit_batch(csbm, _gens(seeds[:k]))
        assert len(batch) == k
        for a, b in zip(alone, batch):
            _same_release(a, b, csbm)
    assert not torch.equal(alone[0].weights["conv1.weight"], alone[1].weights["conv1.weight"])


def test_sparse_features_fit_batch_is_fit_bitwise(csbm):
    g = _sparse_features(csbm)
    t = build("gcn", epochs=EPOCHS)
    alone = [t.fit(g, r) for r in _gens([1, 2, 3])]
    for a, b in zip(alone, t.fit_batch(g, _gens([1, 2, 3]))):
        _same_release(a, b, g)


def test_a_run_does_not_depend_on_its_stack_mates(csbm):
    t = build("edgerand", epsilon=1.0, epochs=EPOCHS)
    a = t.fit_batch(csbm, _gens([7, 8, 9]))[0]
    b = t.fit_batch(csbm, _gens([7, 100, 200, 300]))[0]
    _same_release(a, b, csbm)


@pytest.mark.parametrize("keep", [0.5, 0.8])
def test_dropout_multipliers_are_bernoulli_over_keep(keep):
    m, small = stacked_gcn._multipliers(_gens([1, 2]), [(400, 50), (7, 3)], keep)
    assert m.shape == (2, 400, 50) and small.shape == (2, 7, 3)
    assert set(m.unique().tolist()) == {0.0, torch.tensor(1.0 / keep).item()}
    share = float((m > 0).float().mean())
    assert abs(share - keep) < 4 * (keep * (1 - keep) / m.numel()) ** 0.5
    alone, alone_small = stacked_gcn._multipliers(_gens([2]), [(400, 50), (7, 3)], keep)
    assert torch.equal(m[1], alone[0]) and torch.equal(small[1], alone_small[0])
    assert not torch.equal(m[0], m[1])


def _reference(graph, gen, *, hidden, epochs, lr, dropout, weight_decay):
    """The module GCN (targets.gcn.GCN) trained as targets.gcn documents it, with the stack's own
    initialisation and dropout masks; returns its kept state and best validation accuracy."""
    n, f, c = graph.num_nodes, graph.x.size(1), int(graph.y.max()) + 1
    lay = stacked_gcn.Layout(f, hidden, c)
    model = GCN(f, hidden, c, dropout)
    model.load_state_dict(lay.weights(lay.init(gen)))
    adj = normalized_adjacency(graph.edge_index, n)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    x, y, keep = graph.x.float(), graph.y, 1 - dropout
    best, state = -1.0, {k: v.clone() for k, v in model.state_dict().items()}
    for _ in range(epochs):
        mx, mh = (m[0] for m in stacked_gcn._multipliers([gen], [(n, f), (n, hidden)], keep))
        xw = (x * mx) @ model.conv1.weight.t()
        h = F.relu(torch.sparse.mm(adj, xw) + model.conv1.bias) * mh
        z = torch.sparse.mm(adj, h @ model.conv2.weight.t()) + model.conv2.bias
        opt.zero_grad()
        F.cross_entropy(z[graph.train_mask], y[graph.train_mask]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            acc = float((model(x, adj)[graph.val_mask].argmax(1) == y[graph.val_mask]).float().mean())
        model.train()
        if acc > best:
            best, state = acc, {k: v.clone() for k, v in model.state_dict().items()}
    return state, best


def test_the_stack_trains_the_module_gcn(csbm):
    kw = dict(hidden=16, epochs=30, lr=0.01, dropout=0.5, weight_decay=5e-4)
    adj = normalized_adjacency(csbm.edge_index, csbm.num_nodes)
    rows, best, lay = stacked_gcn.train(csbm.x.float(), csbm.y, csbm.train_mask, csbm.val_mask, [adj, adj],
                                        _gens([4, 5]), device=torch.device("cpu"), **kw)
    for k, seed in enumerate((4, 5)):
        state, want = _reference(csbm, torch.Generator().manual_seed(seed), **kw)
        assert best[k] == pytest.approx(want)
        got = lay.weights(rows[k])
        for name, value in state.items():
            assert torch.allclose(got[name], value, rtol=1e-4, atol=1e-5), name


@pytest.mark.parametrize("target", ["gcn", "edgerand"])
def test_whole_run_same_trials_batched_or_not(stored_runs, target):
    runs = stored_runs(target, {"epochs": 8}, [("one", 1, 1), ("auto", 0, 1), ("odd", 5, 1)])
    assert runs["one"] == runs["auto"] == runs["odd"]
    assert len(runs["one"][0]) == 24
