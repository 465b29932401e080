"""dpsgd-gcn's stacked fit: the closed-form clipped sum is the per-example vmap(grad) one, the
initialisation is _Net's, and fit_batch(g, rngs)[k] releases bitwise what fit(g, rngs[k]) does."""
import pytest
import torch
import torch.nn.functional as F

from targets.common import stacked_mlp
from targets.base import build, child_generator, resolve, seeded
from targets.common.dpsgd import flatten, per_example_gradients
from targets.dpsgd_gcn import DPSGDGCN, _Net, propagate


def _gens(seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


def _flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


@pytest.mark.parametrize("hidden,hops", [(16, 0), (0, 0), (8, 1)])
def test_closed_form_clipped_sum_is_the_vmap_one(csbm, hidden, hops):
    t = DPSGDGCN(hidden=hidden, hops=hops)
    classes = int(csbm.y.max()) + 1
    x, y = propagate(csbm, hops), csbm.y.long()
    train_idx = csbm.train_mask.nonzero().view(-1)
    batch = train_idx[torch.rand(train_idx.numel(), generator=torch.Generator().manual_seed(0)) < 0.6]
    torch.manual_seed(1)
    model = _Net(x.size(1), hidden, classes)
    per_example = flatten(per_example_gradients(
        model, lambda out, target: F.cross_entropy(out.unsqueeze(0), target.unsqueeze(0)), x[batch], y[batch]))
    norms = per_example.norm(dim=1)

    layers = t._layers(csbm)
    d = t.dimension(csbm)
    rows = stacked_mlp.padded(train_idx.numel())
    params = torch.zeros(1, stacked_mlp.padded(d))
    params[0, :d] = _flat(model)
    a = stacked_mlp.pad_rows(x[train_idx], rows).unsqueeze(0)
    onehot = stacked_mlp.pad_rows(F.one_hot(y[train_idx], classes).float(), rows)
    mask = torch.zeros(1, rows)
    mask[0, :train_idx.numel()] = torch.isin(train_idx, batch).float()

    clip = float(norms.median())  # about half the examples clipped, half not
    assert (norms > 1.01 * clip).sum() > 5 and (norms < 0.99 * clip).sum() > 5
    for c in (clip, 10 * float(norms.max())):  # mixed, then none clipped
        t.config.clip_norm = c
        want = (per_example * torch.clamp(c / (norms + 1e-12), max=1.0).unsqueeze(1)).sum(0)
        got = t._clipped_sum(params, layers, a, onehot, mask)
        assert got.shape == params.shape and torch.all(got[0, d:] == 0)
        assert (got[0, :d] - want).norm() <= 1e-5 * want.norm()


@pytest.mark.parametrize("hidden", [16, 0])
def test_init_is_net_seeded_from_the_generator(csbm, hidden):
    t = DPSGDGCN(hidden=hidden, steps=1, noise_multiplier=1.0, lr=1e-30)
    a, b = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    release = t.fit(csbm, a)
    with seeded(b):
        model = _Net(csbm.x.size(1), hidden, int(csbm.y.max()) + 1)
    child_generator(b)
    assert list(release.weights) == [k for k, _ in model.named_parameters()]
    for (name, p) in model.named_parameters():  # lr 1e-30: one step moves no weight
        assert torch.equal(release.weights[name], p.detach()), name
    torch.rand(csbm.train_mask.sum().item(), generator=b)
    torch.randn(t.dimension(csbm), generator=b, dtype=torch.float64)
    assert torch.equal(a.get_state(), b.get_state())


def _same(r1, r2, graph):
    assert len(r1.trace) == len(r2.trace)
    for s1, s2 in zip(r1.trace, r2.trace):
        assert torch.equal(s1.noisy, s2.noisy) and torch.equal(s1.clean, s2.clean)
        assert torch.equal(s1.central, s2.central) and s1.canary_in == s2.canary_in
    assert list(r1.weights) == list(r2.weights)
    assert all(torch.equal(r1.weights[k], r2.weights[k]) for k in r1.weights)
    assert torch.equal(r1.api(graph), r2.api(graph))
    assert torch.equal(r1.api(graph, nodes=[3, 1]), r2.api(graph, nodes=[3, 1]))
    assert torch.allclose(r1.api(graph, nodes=[3, 1]), r2.api(graph)[[3, 1]], atol=1e-6)
    assert resolve(r1.info["accuracy"]) == resolve(r2.info["accuracy"])
    assert {k: v for k, v in r1.info.items() if k != "accuracy"} == {k: v for k, v in r2.info.items() if k != "accuracy"}


SMALL = dict(steps=4, epsilon=4.0)
CONFIGS = [dict(), dict(hidden=0), dict(sampling_rate=0.4, hops=1), dict(hidden=7, bug="no-noise"),
           dict(hidden=13, features=29), dict(hidden=0, features=29)]


@pytest.mark.parametrize("kw", CONFIGS)
def test_fit_batch_equals_fit(csbm, kw):
    kw = dict(kw)
    features = kw.pop("features", None)
    if features:  # odd widths: products whose output width is not a multiple of 4
        csbm = csbm.clone()
        csbm.x = csbm.x[:, :features].contiguous()
    t = build("dpsgd-gcn", **SMALL, **kw)
    seeds = [3, 4, 5]
    batch = t.fit_batch(csbm, _gens(seeds))
    other = t.fit_batch(csbm, _gens([9, 5]))  # seed 5 in another stack, at another place
    for j, seed in enumerate(seeds):
        _same(batch[j], t.fit(csbm, torch.Generator().manual_seed(seed)), csbm)
    _same(other[1], batch[2], csbm)
    assert not torch.equal(batch[0].trace.noisy_matrix(), batch[1].trace.noisy_matrix())
    if kw.get("bug") == "no-noise":
        assert all(torch.equal(s.noisy, s.clean) for s in batch[0].trace)


@pytest.mark.parametrize("node,per_step", [(True, False), (False, False), (False, True)])
def test_fit_batch_equals_fit_with_canaries(csbm, node, per_step):
    t = build("dpsgd-gcn", **SMALL, sampling_rate=0.5)
    d = t.dimension(csbm)
    z = int(csbm.train_mask.nonzero()[3])
    g = torch.randn(4, d) if per_step else torch.full((d,), 0.5 / d ** 0.5)
    kw = dict(canary_gradient=g, canary_node=z if node else None)
    batch = t.fit_batch(csbm, _gens([1, 2, 3]), **kw)
    plain = t.fit_batch(csbm, _gens([1, 2, 3]))
    for j, seed in enumerate([1, 2, 3]):
        _same(batch[j], t.fit(csbm, torch.Generator().manual_seed(seed), **kw), csbm)
        for i, (s, s0) in enumerate(zip(batch[j].trace, plain[j].trace)):
            assert torch.equal(s.central, s0.central)  # the canary changes no batch and no noise
            assert torch.allclose(s.noisy - s.clean, s0.noisy - s0.clean, atol=1e-5)
            if i == 0:  # same weights before the first step: the clean sums differ by the canary alone
                extra = g[0] if per_step else g
                assert torch.allclose(s.clean, s0.clean + (extra if s.canary_in else 0), atol=1e-5)
            if node:
                assert s.canary_in == bool((s.central == z).any())
    flags = [s.canary_in for r in batch for s in r.trace]
    assert any(flags) and not all(flags)


def test_run_is_the_same_for_any_batch(stored_runs):
    runs = stored_runs("dpsgd-gcn", {"steps": "3"}, [("one", 1, 1), ("auto", 0, 1), ("odd", 5, 1)])
    rows = runs["one"][0]
    assert len(rows) == 24 and len({sc for _, _, sc in rows}) == 24
    assert all(r == runs["one"] for r in runs.values())
