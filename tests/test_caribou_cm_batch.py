"""CARIBOU's edge-level classification modules trained stacked over a batch's trials
(targets/caribou/stacked.py): bitwise the module trained alone, whatever the batch."""
import copy

import pytest
import torch
from torch_geometric.data import Data

from attacks.linkteller import query_graph
from audit.play import data, trial_runner
from audit.play.game import AuditSpec, run_audit
from audit.records.store import Store

from targets.base import build, child_generator, resolve, seeded
from targets.caribou import stacked
from targets.caribou.model import ClassificationModule, _fit_best_val

FAST = {"encoder_epochs": 5, "hidden": 16, "hops": 3, "cm_epochs": 12, "dropout": 0.5, "x0_dropout": 0.3}


@pytest.fixture(scope="module")
def graph():
    return data.load("csbm", seed=0)


def _reference_train(modules, z, y, train_mask, val_mask, epochs, lr, weight_decay, gens):
    """What the CMs were before stacking: one ``_fit_best_val`` per module."""
    split = Data(y=y, train_mask=train_mask, val_mask=val_mask)
    for k, m in enumerate(modules):
        _fit_best_val(m, z(k), split, epochs, torch.optim.Adam(m.parameters(), lr=lr, weight_decay=weight_decay),
                      gens[k])


def _same_state(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("runs, hidden, weight_decay, classes", [(1, 16, 0.0, 3), (3, 16, 0.01, 3), (5, 64, 0.0, 3),
                                                          (1, 12, 0.0, 3), (3, 64, 0.0, 7), (4, 16, 0.0, 6)])
def test_stacked_training_is_each_module_trained_alone(graph, runs, hidden, weight_decay, classes):
    """Bitwise for any class count: a narrow head (Cora's 7 classes) once broke it through the
    head's weight gradient, which plain autograd of ``baddbmm`` forms in another order."""
    gen = torch.Generator().manual_seed(runs)
    x0, *xks = torch.nn.functional.normalize(torch.randn(runs + 1, graph.num_nodes, hidden, generator=gen), dim=2)
    y = graph.y if classes == 3 else torch.randint(0, classes, (graph.num_nodes,), generator=gen)

    def fresh():
        mods, gens = [], []
        for k in range(runs):
            rng = torch.Generator().manual_seed(10 + k)
            with seeded(rng):
                mods.append(ClassificationModule(hidden, classes, True, dropout=0.5, x0_dropout=0.3))
            gens.append(child_generator(rng))
        return mods, gens

    z = lambda k: torch.cat([x0, xks[k]], 1)  # noqa: E731
    (ref, ref_gens), (mods, gens) = fresh(), fresh()
    args = (y, graph.train_mask, graph.val_mask, 25, 1e-3, weight_decay)
    _reference_train(ref, z, *args, ref_gens)
    stacked.train(mods, z, *args, gens)
    kept = set()
    for a, b in zip(ref, mods):
        _same_state(a.state_dict(), b.state_dict())
        assert not b.training
        kept.add(int(b.bn.num_batches_tracked))
        assert torch.equal(a(z(0)), b(z(0)))
    assert len(kept) > 1 or runs == 1  # the runs kept different epochs: the checkpoint is per run
    assert all(torch.equal(a.get_state(), b.get_state()) for a, b in zip(ref_gens, gens))  # the same draws


def test_without_validation_nodes_the_last_epoch_is_kept(graph):
    no_val = graph.clone()
    no_val.val_mask = torch.zeros_like(graph.val_mask)
    runs, hidden = 3, 16
    x0 = torch.randn(graph.num_nodes, hidden, generator=torch.Generator().manual_seed(1))
    x0 = torch.nn.functional.normalize(x0, dim=1)
    z = lambda k: torch.cat([x0, x0.roll(k + 1, 0)], 1)  # noqa: E731
    made = []
    for _ in range(2):
        mods, gens = [], []
        for k in range(runs):
            rng = torch.Generator().manual_seed(k)
            with seeded(rng):
                mods.append(ClassificationModule(hidden, 3, True, dropout=0.5, x0_dropout=0.3))
            gens.append(child_generator(rng))
        made.append((mods, gens))
    args = (no_val.y, no_val.train_mask, no_val.val_mask, 7, 1e-3, 0.0)
    _reference_train(made[0][0], z, *args, made[0][1])
    stacked.train(made[1][0], z, *args, made[1][1])
    for a, b in zip(made[0][0], made[1][0]):
        _same_state(a.state_dict(), b.state_dict())
        assert int(b.bn.num_batches_tracked) == 7


def _views(release, graph):
    query = query_graph(graph, graph.x * 1.5, "none")
    return (release.view("weights"), release.view("api")(graph), release.view("api")(query),
            resolve(release.info["accuracy"]))


def _same_views(a, b):
    _same_state(a[0], b[0])
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])
    assert dict(a[3]) == dict(b[3])


@pytest.mark.parametrize("runs", [1, 3, 5])
def test_fit_batch_is_fit_and_the_unstacked_module(graph, runs, monkeypatch):
    t = build("caribou", **FAST)
    t.prepare(graph)
    seeds = [torch.Generator().manual_seed(40 + k) for k in range(runs)]
    batch = t.fit_batch(graph, [copy.deepcopy(g) for g in seeds])
    got = [_views(r, graph) for r in batch]
    for k in range(runs):  # run k alone (fit: a batch of one)
        _same_views(got[k], _views(t.fit(graph, copy.deepcopy(seeds[k])), graph))
    monkeypatch.setattr(stacked, "train", _reference_train)
    unstacked = t.fit_batch(graph, [copy.deepcopy(g) for g in seeds])
    for k in range(runs):
        _same_views(got[k], _views(unstacked[k], graph))
    assert runs == 1 or not torch.equal(got[0][1], got[1][1])


def test_one_read_trains_the_whole_batch_once(graph, monkeypatch):
    calls = []
    real = stacked.train

    def counting(modules, *args):
        calls.append(len(modules))
        return real(modules, *args)

    monkeypatch.setattr(stacked, "train", counting)
    t = build("caribou", **FAST)
    batch = t.fit_batch(graph, [torch.Generator().manual_seed(s) for s in range(4)])
    assert calls == []  # lazily: nothing trained until a view needs a CM
    batch[2].view("api")(graph)
    assert calls == [4]
    for r in batch:
        r.view("weights")
        r.view("api")(query_graph(graph, graph.x, "none"))
    assert calls == [4]


@pytest.mark.parametrize("hidden, runs, stacked_calls, alone", [(12, 3, [], 3), (16, 1, [], 1), (16, 3, [3], 0)])
def test_stack_sizes(graph, monkeypatch, hidden, runs, stacked_calls, alone):
    """Unaligned widths train stacks of one; a stack of one is the module trained alone."""
    calls, singles = [], []
    real, real_alone = stacked.train, stacked._fit_best_val
    monkeypatch.setattr(stacked, "train", lambda modules, *a: (calls.append(len(modules)), real(modules, *a))[1])
    monkeypatch.setattr(stacked, "_fit_best_val", lambda *a: (singles.append(1), real_alone(*a))[1])
    t = build("caribou", **{**FAST, "hidden": hidden})
    batch = t.fit_batch(graph, [torch.Generator().manual_seed(s) for s in range(runs)])
    batch[0].view("weights")
    assert calls == stacked_calls and len(singles) == alone


def test_unaligned_widths_do_not_stack(graph):
    with pytest.raises(ValueError, match="multiple of 32"):
        stacked.train([ClassificationModule(12, 3, True)] * 2, None, graph.y, graph.train_mask, graph.val_mask, 1,
                      1e-3, 0.0, [])


@pytest.mark.parametrize("dataset", ["csbm", "csbm:classes=7"])  # 7: Cora's class count, a narrow head
def test_linkteller_audit_scores_do_not_depend_on_batch(tmp_path, dataset):
    def scores(batch):
        spec = AuditSpec(target="caribou", attack="linkteller", trials=12, seed=5, batch=batch, dataset=dataset,
                         params={k: str(v) for k, v in FAST.items()})
        result = run_audit(spec, out=tmp_path / f"b{batch}", progress=False)
        assert result["batch"] == (batch or trial_runner.AUTO_BATCH_TRAINING)
        with Store(result["store"]) as s:
            return s.trials(result["key"])

    one = scores(1)
    assert scores(5) == one and scores(0) == one and len(one) == 12
    assert len({s for _, _, s in one}) > 1
