"""HeterPoisson's stacked fit (targets/heterpoisson/stacked.py): the closed-form clipped sum is the
per-example vmap(grad) one, and fit_batch(g, rngs)[k] releases bitwise what fit(g, rngs[k]) does."""
import pytest
import torch
import torch.nn.functional as F

from targets.base import build, child_generator, resolve, seeded
from targets.common.dpsgd import flatten, per_example_gradients
from targets.common import stacked_mlp
from targets.heterpoisson import HeterPoisson, StarNet, stacked


def _gens(seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


def _with_isolated(graph):
    g = graph.clone()
    iso = g.train_mask.nonzero().view(-1)[:20]
    keep = ~(torch.isin(g.edge_index[0], iso) | torch.isin(g.edge_index[1], iso))
    g.edge_index = g.edge_index[:, keep]
    return g


def _layout(graph, hidden, backbone):
    return stacked.Layout(graph.x.size(1), hidden, int(graph.y.max()) + 1, backbone == "gin")


@pytest.mark.parametrize("backbone", ["gcn", "sage", "gin"])
def test_closed_form_clipped_sum_is_the_vmap_one(csbm, backbone):
    t = HeterPoisson(hidden=16, backbone=backbone, sampling_rate=0.5, neighbors=2)
    cache = t._sampler_cache(csbm)
    batch = t.sample_batch(csbm, torch.Generator().manual_seed(1), _cache=cache)
    assert batch.src.numel() > 0 and batch.central.numel() > 10
    torch.manual_seed(0)
    model = StarNet(csbm.x.size(1), 16, int(csbm.y.max()) + 1, backbone)
    if backbone == "gin":
        with torch.no_grad():
            model.gin_eps.fill_(0.3)  # a λ away from 0, so its gradient is not the trivial one
    x, y = csbm.x.float(), csbm.y.long()
    packed = t._pack(x, batch.central, batch.src, batch.dst)
    per_example = flatten(per_example_gradients(
        model, lambda out, target: F.cross_entropy(out.unsqueeze(0), target.unsqueeze(0)), packed, y[batch.central]))
    norms = per_example.norm(dim=1)

    lay = _layout(csbm, 16, backbone)
    train_idx = cache["train_idx"]
    m, rows = train_idx.numel(), stacked_mlp.padded(train_idx.numel())
    slot_of = torch.full((csbm.num_nodes,), -1, dtype=torch.long)
    slot_of[train_idx] = torch.arange(m)
    params = torch.zeros(1, lay.width)
    params[0, :lay.d] = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    s, cnt = stacked.star_inputs(x, slot_of, rows, 1, torch.zeros_like(batch.src), batch.src, batch.dst)
    mask = torch.zeros(1, rows)
    mask[0, slot_of[batch.central]] = 1.0
    xs = stacked_mlp.pad_rows(x[train_idx], rows)
    onehot = stacked_mlp.pad_rows(F.one_hot(y[train_idx], lay.classes).float(), rows)

    clip = float(norms.median())  # about half the examples clipped, half not
    assert (norms > 1.01 * clip).sum() > 5 and (norms < 0.99 * clip).sum() > 5
    for c in (clip, 10 * float(norms.max())):  # mixed, then none clipped
        want = (per_example * torch.clamp(c / (norms + 1e-12), max=1.0).unsqueeze(1)).sum(0)
        got = stacked.clipped_sum(lay, params, xs, s, cnt, onehot, mask, c, backbone)
        assert got.shape == (1, lay.width) and torch.all(got[0, lay.d:] == 0)
        assert (got[0, :lay.d] - want).norm() <= 1e-5 * want.norm()


def test_init_is_starnet_seeded_from_the_generator(csbm):
    lay = _layout(csbm, 16, "gin")
    a, b = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    params, runs = stacked.init_runs(lay, [a])
    with seeded(b):
        model = StarNet(lay.features, lay.hidden, lay.classes, "gin")
    child = child_generator(b)
    infer_seed = int(torch.randint(0, 2**62, (1,), generator=b).item())
    assert torch.equal(params[0, :lay.d], torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    assert runs[0].infer_seed == infer_seed
    assert torch.equal(runs[0].canary_rng.get_state(), child.get_state())
    assert torch.equal(a.get_state(), b.get_state())


def _same(r1, r2, graph):
    assert len(r1.trace) == len(r2.trace)
    for s1, s2 in zip(r1.trace, r2.trace):
        assert torch.equal(s1.noisy, s2.noisy) and torch.equal(s1.clean, s2.clean)
        assert torch.equal(s1.central, s2.central)
        assert s1.canary_in == s2.canary_in and s1.canary_scale == s2.canary_scale
    assert all(torch.equal(r1.weights[k], r2.weights[k]) for k in r1.weights)
    assert torch.equal(r1.api(graph), r2.api(graph))
    assert resolve(r1.info["accuracy"]) == resolve(r2.info["accuracy"])
    assert {k: v for k, v in r1.info.items() if k != "accuracy"} == {k: v for k, v in r2.info.items() if k != "accuracy"}


SMALL = dict(hidden=16, steps=4, epsilon=4.0)
CONFIGS = [
    dict(),
    dict(backbone="gcn", sampling_rate=0.3, noise="gaussian", eval_every=2),
    dict(backbone="sage", sampling_rate=0.5, neighbors=3, bug="order-overlap"),
    dict(sampling_rate=0.4, bug="isolated-fallback", neighbors=2),
    dict(sampling_rate=0.6, bug="per-coordinate-scale"),
    dict(sampling_rate=0.5, bug="extra-steps"),
    dict(bug="no-noise"),
]


@pytest.mark.parametrize("kw", CONFIGS)
def test_fit_batch_equals_fit(csbm, kw):
    graph = _with_isolated(csbm) if kw.get("bug") == "isolated-fallback" else csbm
    t = build("heterpoisson", **SMALL, **kw)
    seeds = [3, 4, 5]
    batch = t.fit_batch(graph, _gens(seeds))
    other = t.fit_batch(graph, _gens([9, 5]))  # seed 5 in another stack, at another place
    for j, seed in enumerate(seeds):
        _same(batch[j], t.fit(graph, torch.Generator().manual_seed(seed)), graph)
    _same(other[1], batch[2], graph)
    assert not torch.equal(batch[0].trace.noisy_matrix(), batch[1].trace.noisy_matrix())


@pytest.mark.parametrize("canary", [dict(node=True), dict(node=False), dict(node=True, whole=True)])
def test_fit_batch_equals_fit_with_canaries(csbm, canary):
    t = build("heterpoisson", **SMALL, sampling_rate=0.5)
    d = t.dimension(csbm)
    z = int(csbm.train_mask.nonzero()[3])
    kw = dict(canary_gradient=torch.full((d,), 0.5 / d ** 0.5), canary_node=z if canary["node"] else None)
    if canary.get("whole"):
        kw["canary_whole_node"] = True
    batch = t.fit_batch(csbm, _gens([1, 2, 3]), **kw)
    for j, seed in enumerate([1, 2, 3]):
        _same(batch[j], t.fit(csbm, torch.Generator().manual_seed(seed), **kw), csbm)
    flags = [s.canary_in for r in batch for s in r.trace]
    assert any(flags) and not all(flags)


def test_run_is_the_same_for_any_batch(stored_runs):
    runs = stored_runs("heterpoisson", {"hidden": "16", "steps": "3"}, [("one", 1, 1), ("auto", 0, 1), ("odd", 5, 1)])
    rows = runs["one"][0]
    assert len(rows) == 24 and len({sc for _, _, sc in rows}) == 24
    assert all(r == runs["one"] for r in runs.values())


@pytest.mark.parametrize("bug", [None, "order-overlap"])
def test_stacked_node_scales_are_node_canary_scale(csbm, bug):
    t = build("heterpoisson", sampling_rate=0.7, neighbors=3, bug=bug)
    cache = t._sampler_cache(csbm)
    train_idx = cache["train_idx"]
    slot_of = torch.full((csbm.num_nodes,), -1, dtype=torch.long)
    slot_of[train_idx] = torch.arange(train_idx.numel())
    seen = set()
    for z in train_idx[:20].tolist():
        sampled = t._sample(cache, _gens([z, z + 1, z + 2]), 0.7)
        scales = t._node_scales(sampled, slot_of, z, 3)
        assert scales == [t.node_canary_scale(sampled.batch_of(k, train_idx), z) for k in range(3)]
        seen.update(scales)
    assert len(seen) > 2  # central or not, and some peripheral stars


def test_standardize_is_a_fit_on_standardised_features_with_the_fits_constants(csbm):
    """`standardize=True` ([code]'s preprocessing) trains and answers exactly as the plain target
    on X standardised with the training graph's column mean/sd, and queries keep those constants."""
    import copy

    from targets.heterpoisson.target import feature_stats, features
    graph = csbm
    pre = copy.copy(graph)
    pre.x = features(graph, feature_stats(graph.x))
    on = build("heterpoisson", epsilon=4.0, standardize=True).fit(graph, torch.Generator().manual_seed(3))
    off = build("heterpoisson", epsilon=4.0).fit(pre, torch.Generator().manual_seed(3))
    raw = build("heterpoisson", epsilon=4.0).fit(graph, torch.Generator().manual_seed(3))
    assert all(torch.equal(a.noisy, b.noisy) for a, b in zip(on.trace.steps, off.trace.steps))
    assert not all(torch.equal(a.noisy, b.noisy) for a, b in zip(on.trace.steps, raw.trace.steps))
    assert torch.equal(on.api(graph), off.api(pre))
    assert build("heterpoisson", standardize=True).claim(graph).details["standardize"]
