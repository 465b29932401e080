"""GAP batched trials: ``fit_batch(g, rngs)[j]`` releases exactly what ``fit(g, rngs[j])`` does."""
from __future__ import annotations

import pytest
import torch

from attacks.mechanism import MechanismLRT
from audit.play.data import add_directed_edge, add_edge, remove_edge
from canaries.edge import CanaryPair
from targets.base import build, seeded
from targets.gap import GAP, GAPConfig, _Classifier, sum_aggregate, transposed_adjacency
from targets.gap.model import aggregate_together, csr_rows, differing_rows, narrow_columns, rownorm, unit_rows
from targets.gap.stacked import _classifier_init
from targets.common.sparse import as_ordered_coo, ordered_spmm

SMALL = dict(encoder_epochs=5, epochs=3, hops=2)


@pytest.fixture(scope="module")
def pair(csbm):
    u, v = 0, 599
    assert not ((csbm.edge_index[0] == u) & (csbm.edge_index[1] == v)).any()
    return CanaryPair(csbm, add_edge(csbm, u, v), {"edge": (u, v)})


def gens(seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


def target(graph, prepare=True, **kw):
    t = build("gap", epsilon=2, **{**SMALL, **kw})
    if prepare:
        t.prepare(graph)
    return t


def assert_same_release(a, b, graph, queries=1):
    """Bitwise equality of everything a release shows: mechanism outputs and means, posteriors,
    weights, info (accuracy included)."""
    assert len(a.mechanism) == len(b.mechanism)
    for sa, sb in zip(a.mechanism, b.mechanism):
        assert torch.equal(sa.output, sb.output)
        assert torch.equal(sa.mean(graph), sb.mean(graph))
        assert sa.noise_std == sb.noise_std and sa.mean_key == sb.mean_key and sa.name == sb.name
    for _ in range(queries):
        assert torch.equal(a.api(None), b.api(None))
    wa, wb = a.view("weights"), b.view("weights")
    assert list(wa) == list(wb) and all(torch.equal(wa[k], wb[k]) for k in wa)
    ia, ib = dict(a.info), dict(b.info)
    assert ia.pop("accuracy").get() == ib.pop("accuracy").get()
    assert ia == ib


def test_batched_flags(csbm):
    assert GAP.batched is True
    edge, node = target(csbm, prepare=False), build("gap", epsilon=2, unit="node")
    assert "encoder" in edge.cached_work() and node.cached_work() is None


@pytest.mark.parametrize("seeds", [[11, 12, 13, 14], list(range(20, 31))], ids=["4", "11"])
def test_fit_batch_equals_fit_bitwise(csbm, seeds):
    """11 trials: hop 2's aggregates in products of 8 and 3 trials side by side."""
    t = target(csbm)
    batch = t.fit_batch(csbm, gens(seeds))
    assert len(batch) == len(seeds)
    for release, seed in zip(batch, seeds):
        assert_same_release(release, t.fit(csbm, torch.Generator().manual_seed(seed)), csbm)


@pytest.mark.parametrize("kw", [
    dict(dropout=0.2, batch_size=64, base_layers=2, head_layers=2),
    dict(hidden_dim=7, combine="sum", activation="tanh"),
    dict(combine="max", batch_norm=False, optimizer="sgd", weight_decay=1e-3, hops=3),
    dict(encoder_layers=0, edge_unit="undirected"),
    dict(batch_size=179),  # 180 training rows: the one-row tail joins the batch before (BatchNorm on)
])
def test_fit_batch_equals_fit_other_configs(csbm, kw):
    t = target(csbm, **kw)
    batch = t.fit_batch(csbm, gens([5, 6, 7]))
    for release, seed in zip(batch, [5, 6, 7]):
        assert_same_release(release, t.fit(csbm, torch.Generator().manual_seed(seed)), csbm)


def test_fresh_inference_bug_batched(csbm):
    t = target(csbm, bug="fresh-inference-noise")
    batch = t.fit_batch(csbm, gens([1, 2]))
    for release, seed in zip(batch, [1, 2]):
        # each query is a fresh PMA; the query streams must agree query by query
        assert_same_release(release, t.fit(csbm, torch.Generator().manual_seed(seed)), csbm, queries=2)
    assert not torch.equal(batch[0].api(None), batch[0].api(None))


def test_without_prepare_each_trial_trains_its_encoder(csbm):
    t = target(csbm, prepare=False)
    batch = t.fit_batch(csbm, gens([3, 4]))
    assert not batch[0].info["encoder_cached"]
    assert all(step.mean_key is None for step in batch[0].mechanism)
    for release, seed in zip(batch, [3, 4]):
        assert_same_release(release, t.fit(csbm, torch.Generator().manual_seed(seed)), csbm)


def test_generators_consumed_as_fit_consumes_them(csbm):
    t = target(csbm)
    a, b = gens([21, 22, 23]), gens([21, 22, 23])
    t.fit_batch(csbm, a)
    for g in b:
        t.fit(csbm, g)
    assert all(torch.equal(x.get_state(), y.get_state()) for x, y in zip(a, b))


def test_batch_composition_does_not_matter(csbm):
    """Same trial, any batch: alone, in a batch of 3, of 5, in another order, used in any order."""
    t = target(csbm)
    seeds = [31, 32, 33, 34, 35]
    five = t.fit_batch(csbm, gens(seeds))
    three = t.fit_batch(csbm, gens([35, 33, 31]))
    alone = t.fit_batch(csbm, gens([33]))
    empty = t.fit_batch(csbm, [])
    assert empty == []
    # use the releases' classifiers in a scrambled order
    assert torch.equal(three[1].api(None), five[2].api(None))
    assert torch.equal(alone[0].api(None), five[2].api(None))
    assert_same_release(three[0], five[4], csbm)
    assert_same_release(three[2], five[0], csbm)
    again = t.fit_batch(csbm, gens(seeds))
    for x, y in zip(five, again):
        assert_same_release(x, y, csbm)
    assert not torch.equal(five[0].mechanism[0].output, five[1].mechanism[0].output)


def test_worlds_and_mechanism_scores(csbm, pair):
    t = target(csbm)
    attack = MechanismLRT()
    for bit in (0, 1):
        seeds = [40 + bit, 50 + bit, 60 + bit]
        batch = t.fit_batch(pair.world(bit), gens(seeds))
        single = [t.fit(pair.world(bit), torch.Generator().manual_seed(s)) for s in seeds]
        scores_b = [attack.score(r, pair, csbm) for r in batch]
        assert scores_b == [attack.score(r, pair, csbm) for r in single]
        if hasattr(attack, "score_batch"):
            assert list(MechanismLRT().score_batch(batch, pair, csbm)) == scores_b
        # hop 1's mean depends on the cached encoder and the graph only: one key for every trial
        keys = {r.mechanism[0].mean_key for r in batch}
        assert len(keys) == 1 and None not in keys
        assert all(r.mechanism[1].mean_key is None for r in batch)
        assert torch.equal(batch[0].mechanism[0].mean(pair.g1), batch[2].mechanism[0].mean(pair.g1))


def test_node_level_falls_back_to_fit(csbm):
    t = build("gap", epsilon=4, unit="node", encoder_epochs=1, epochs=1, hops=1, batch_size=200)
    batch = t.fit_batch(csbm, gens([8, 9]))
    for release, seed in zip(batch, [8, 9]):
        single = t.fit(csbm, torch.Generator().manual_seed(seed))
        assert torch.equal(release.api(None), single.api(None))
        assert torch.equal(release.mechanism[0].output, single.mechanism[0].output)
        assert len(release.trace) == len(single.trace)
        assert all(torch.equal(x["noisy_sum"], y["noisy_sum"]) for x, y in zip(release.trace, single.trace))


def test_classifier_init_matches_module():
    for kw in (dict(), dict(base_layers=2, head_layers=2), dict(batch_norm=False, combine="sum", hidden_dim=7)):
        cfg = GAPConfig(**kw)
        with seeded(torch.Generator().manual_seed(4)):
            module = _Classifier(16, cfg, 5).state_dict()
        with seeded(torch.Generator().manual_seed(4)):
            flat = _classifier_init(16, cfg, 5)
        assert list(module) == list(flat) and all(torch.equal(module[k], flat[k]) for k in module)


def test_transposed_adjacency_is_sum_aggregate(csbm):
    h = torch.randn(csbm.num_nodes, 8)
    adj = transposed_adjacency(csbm.edge_index, csbm.num_nodes)
    assert torch.equal(ordered_spmm(adj, h), sum_aggregate(h, csbm.edge_index, csbm.num_nodes))
    coo = as_ordered_coo(adj)  # the cached form: the same floats as the CSR it came from, at any width
    assert coo.layout == torch.sparse_coo and as_ordered_coo(coo) is coo
    wide = torch.randn(csbm.num_nodes, 40)
    assert torch.equal(ordered_spmm(coo, h), ordered_spmm(adj, h))
    assert torch.equal(ordered_spmm(coo, wide)[:, 8:16], ordered_spmm(adj, wide[:, 8:16]))
    empty = torch.zeros(2, 0, dtype=torch.long)
    assert torch.equal(transposed_adjacency(empty, 4) @ torch.ones(4, 3), torch.zeros(4, 3))


def _reference_score(release, pair):
    """The mechanism LLR from whole world means (the path before row-restricted means)."""
    total = 0.0
    for step in release.mechanism:
        m0, m1 = step.mean(pair.g0).double(), step.mean(pair.g1).double()
        node = pair.info.get("node")
        if node is not None:
            m1 = m1.clone()
            m1[node] = m0[node]
        d = m1 - m0
        rows = d.reshape(d.shape[0], -1).abs().sum(1) > 0
        m0, d = m0[rows], d[rows]
        o = step.output[rows].double()
        total += float(((o - m0) * d).sum() - 0.5 * (d * d).sum()) / step.noise_std**2
    return total


@pytest.mark.parametrize("change", ["add", "add-directed", "remove", "add, node row unscored"])
def test_row_restricted_means_score_bitwise(csbm, change):
    u, v = 0, 599
    eu, ev = (int(x) for x in csbm.edge_index[:, 0])
    g1 = {"add": lambda: add_edge(csbm, u, v), "add-directed": lambda: add_directed_edge(csbm, u, v),
          "remove": lambda: remove_edge(csbm, eu, ev), "add, node row unscored": lambda: add_edge(csbm, u, v)}[change]()
    p = CanaryPair(csbm, g1, {"node": v} if "node" in change else {})
    t = target(csbm)
    releases = [r for bit in (0, 1) for r in t.fit_batch(p.world(bit), gens([70 + bit, 80 + bit, 90 + bit]))]
    for r in releases:
        step = r.mechanism[1]
        rows = step.support(p.g0, p.g1)
        differ = (step.mean(p.g0) != step.mean(p.g1)).any(1).nonzero().view(-1)
        assert rows is not None and set(differ.tolist()) <= set(rows.tolist()) and len(differ)
        for g in (p.g0, p.g1):
            assert torch.equal(step.mean_rows(g, rows), step.mean(g)[rows])
    scores = MechanismLRT().score_batch(releases, p, csbm)
    assert scores == [_reference_score(r, p) for r in releases]
    assert scores == [MechanismLRT().score(r, p, csbm) for r in releases]  # scored one by one
    alone = [t.fit_batch(p.world(bit), gens([s]))[0] for bit in (0, 1) for s in (70 + bit, 80 + bit, 90 + bit)]
    assert [MechanismLRT().score(r, p, csbm) for r in alone] == scores  # fitted one by one


def test_unit_rows_and_narrow_columns():
    x = torch.randn(40, 16)
    x[0], x[1] = 0.0, x[1] * 1e-30
    assert torch.equal(unit_rows(x), rownorm(x))
    adj = transposed_adjacency(torch.tensor([[0, 1, 2, 2, 4, 3], [3, 3, 4, 0, 1, 3]]), 6)
    part = csr_rows(adj, torch.tensor([3, 5, 1]))  # row 5 has no entries
    narrow, cols = narrow_columns(part)
    assert cols.tolist() == [0, 1, 3, 4] and narrow.shape == (3, 4)
    h, h2 = torch.randn(6, 3), torch.randn(6, 3)
    assert torch.equal(ordered_spmm(narrow, h[cols]), ordered_spmm(part, h))
    both = ordered_spmm(narrow, torch.cat([h, h2], 1)[cols])  # trials side by side: each its own product
    assert torch.equal(both[:, :3], ordered_spmm(part, h)) and torch.equal(both[:, 3:], ordered_spmm(part, h2))
    out = torch.empty(40, 48)
    assert torch.equal(unit_rows(x, out=out[:, 16:32]), rownorm(x)) and torch.equal(out[:, 16:32], rownorm(x))


def test_aggregate_together_equals_one_product_per_trial(csbm):
    adj = transposed_adjacency(csbm.edge_index, csbm.num_nodes)
    side = torch.randn(csbm.num_nodes, 16 * 11)
    blocks = [side[:, 16 * j:16 * (j + 1)] for j in range(11)]  # column blocks of one buffer (read in place)
    apart = [torch.randn(csbm.num_nodes, 16) for _ in range(3)]  # separate tensors (concatenated)
    def aggregate(h, out=None):
        return ordered_spmm(adj, h, out=out)

    for hs in (blocks, apart, blocks[:1]):
        for group in (8, None):
            out = torch.full((csbm.num_nodes, 16 * len(hs)), float("nan"))  # its contents are never read
            for dest in (None, out):
                together = aggregate_together(aggregate, hs, group=group, out=dest)
                assert len(together) == len(hs)
                for j, (h, agg) in enumerate(zip(hs, together)):
                    assert torch.equal(agg, ordered_spmm(adj, h.contiguous()))
                    if dest is not None:  # written in place, trial j in its column block
                        assert agg.data_ptr() == out[:, 16 * j].data_ptr()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_one_pass_noise_addition_rounds_as_two(dtype):
    """The batch adds std·noise with addcmul (one pass): the floats of noise·std, then + agg."""
    g = torch.Generator().manual_seed(5)
    noise, agg = torch.randn(4096, 16, generator=g, dtype=dtype), torch.randn(4096, 16, generator=g, dtype=dtype) * 3
    one = torch.ones((), dtype=dtype)
    for std in (0.0, 0.37, 1.0, 7.3125, 41.9):
        two = noise.clone().mul_(std).add_(agg)
        assert torch.equal(torch.addcmul(agg, noise, one, value=std), two)
        assert torch.equal(agg.clone().addcmul_(noise, one, value=std), two)


def storages(releases):
    return {s.output.untyped_storage().data_ptr() for r in releases for s in r.mechanism}


def outputs_equal(releases, outputs):
    return all(torch.equal(s.output, o) for r, outs in zip(releases, outputs) for s, o in zip(r.mechanism, outs))


def test_pooled_buffers_never_overwrite_held_releases(csbm):
    t, fresh = target(csbm), target(csbm)
    first = t.fit_batch(csbm, gens([1, 2, 3]))
    held = [[s.output.clone() for s in r.mechanism] for r in first]
    second = t.fit_batch(csbm, gens([4, 5, 6]))  # the first batch is still held: other buffers
    assert not storages(first) & storages(second) and outputs_equal(first, held)
    before = storages(first)
    del first
    third = t.fit_batch(csbm, gens([1, 2, 3]))  # the first batch's buffers, now free, are reused
    assert storages(third) <= before and outputs_equal(third, held)
    for a, b in zip(second, fresh.fit_batch(csbm, gens([4, 5, 6]))):
        assert_same_release(a, b, csbm)


def test_ordered_product_is_width_free_where_csr_may_not_be(csbm):
    """Each trial's columns of a wide product are the floats of its own product, in every layout the
    batch reads (issue #42's CI machine: MKL's AVX-512 CSR kernel rounded the two apart by one ulp)."""
    adj = transposed_adjacency(csbm.edge_index, csbm.num_nodes)
    wide = torch.randn(csbm.num_nodes, 16 * 33)
    both = ordered_spmm(adj, wide)
    for j in (0, 7, 32):
        block = wide[:, 16 * j:16 * (j + 1)]
        assert torch.equal(both[:, 16 * j:16 * (j + 1)], ordered_spmm(adj, block.contiguous()))
        assert torch.equal(both[:, 16 * j:16 * (j + 1)], sum_aggregate(block, csbm.edge_index, csbm.num_nodes))
    assert ordered_spmm(adj, wide.double()).dtype == torch.float64


def test_differing_rows_counts_multiplicity():
    a = torch.tensor([[0, 1, 2], [3, 3, 4]])
    assert differing_rows(a, a, 5).tolist() == []
    assert differing_rows(a, torch.tensor([[0, 1, 1, 2], [3, 3, 3, 4]]), 5).tolist() == [3]
    assert differing_rows(a, torch.tensor([[0, 2, 2], [3, 4, 1]]), 5).tolist() == [1, 3]
    adj = transposed_adjacency(torch.tensor([[0, 1, 2, 2, 4], [3, 3, 4, 0, 1]]), 5)
    h = torch.randn(5, 3)
    rows = torch.tensor([0, 3, 4])
    assert torch.equal(ordered_spmm(csr_rows(adj, rows), h), ordered_spmm(adj, h)[rows])


def test_prepare_shared_per_process(csbm):
    a, b = target(csbm), target(csbm)  # two chunks' targets, same config and graph
    assert a._prepared is b._prepared
    assert target(csbm, encoder_epochs=4)._prepared is not a._prepared
    assert_same_release(a.fit(csbm, torch.Generator().manual_seed(5)),
                        b.fit(csbm, torch.Generator().manual_seed(5)), csbm)
