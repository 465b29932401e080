"""DPDGC's vectorised fit: fit_batch(g, rngs)[j] releases what fit(g, rngs[j]) does, and the
classifier (api, its weights, the accuracy) is trained only when read, from randomness split off
at fit time."""
import pytest
import torch

from targets.base import build, resolve

FAST = dict(epochs_encoder=3, epochs_classifier=2, hidden=16)


def _gens(seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


@pytest.mark.parametrize("kw", [dict(), dict(unit="node", k=2), dict(unit="node", max_degree=5)])
def test_fit_batch_equals_fit(csbm, kw):
    t = build("dpdgc", **FAST, **kw)
    batch = t.fit_batch(csbm, _gens([3, 4, 5]))
    for j, seed in enumerate([3, 4, 5]):
        one = t.fit(csbm, torch.Generator().manual_seed(seed))
        assert torch.equal(batch[j].mechanism[0].output, one.mechanism[0].output)
        assert torch.equal(batch[j].weights["emb.W"], one.weights["emb.W"])
        assert torch.equal(batch[j].api(csbm), one.api(csbm))
        assert batch[j].info == one.info
    assert not torch.equal(batch[0].mechanism[0].output, batch[1].mechanism[0].output)


def test_batched_trace_replays(csbm):
    t = build("dpdgc", unit="node", k=2, **FAST)
    rel = t.fit_batch(csbm, _gens([7, 8]))[1]
    lone = t.fit(csbm, torch.Generator().manual_seed(8))
    a, b = rel.view("trace"), lone.view("trace")  # the replay checks it gives back the released W
    assert all(torch.equal(x.noisy, y.noisy) for x, y in zip(a, b))


def test_classifier_is_lazy_and_reading_it_changes_nothing(csbm):
    t = build("dpdgc", **FAST)
    calls = []
    train = t._train_classifier
    t._train_classifier = lambda *a, **k: calls.append(1) or train(*a, **k)
    read = t.fit(csbm, torch.Generator().manual_seed(1))
    unread = t.fit(csbm, torch.Generator().manual_seed(1))
    assert torch.equal(read.mechanism[0].output, unread.mechanism[0].output)
    assert not calls  # a mechanism-only audit trains no classifier
    acc = resolve(read.info["accuracy"])
    assert 0 <= acc["test"] <= 1 and len(calls) == 1
    assert "clf.head.weight" in read.weights and len(calls) == 1
    assert torch.equal(read.api(csbm), unread.api(csbm)) and len(calls) == 2
