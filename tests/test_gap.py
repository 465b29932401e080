"""GAP target: accountant anchors (specs/gap.md §3.4), calibration, releases, bugs, validation."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from targets.base import resolve

from audit.play.data import add_edge
from targets.common.accounting import DEFAULT_ORDERS, gap_delta, gdp_epsilon, rdp_to_dp
from targets.base import build
from targets.gap import GAP, bound_out_degree, dpsgd_schedule, rownorm, sum_aggregate

FAST = dict(epochs=5, encoder_epochs=5)


def fit(graph, seed=0, **kw):
    target = build("gap", **kw)
    return target, target.fit(graph, torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------------- accountant
# specs/gap.md §3.4 table: EDP noise multiplier σ = √K/μ(ε, δ), tolerance 1e-3 relative.
SPEC_TABLE = [
    (1e-7, 1, {1: 4.679, 2: 6.617, 3: 8.104, 5: 10.462}),
    (1e-7, 4, {1: 1.298, 2: 1.835, 3: 2.248, 5: 2.902}),
    (1e-7, 8, {1: 0.702, 2: 0.993, 3: 1.216, 5: 1.570}),
    (1e-8, 1, {1: 5.100, 2: 7.213, 3: 8.834, 5: 11.405}),
    (1e-8, 4, {1: 1.396, 2: 1.974, 3: 2.417, 5: 3.121}),
]


@pytest.mark.parametrize("delta,eps,row", SPEC_TABLE)
def test_edge_noise_multiplier_matches_spec_table(csbm, delta, eps, row):
    for hops, sigma in row.items():
        claim = build("gap", epsilon=eps, delta=delta, hops=hops).claim(csbm)
        assert claim.details["noise_multiplier"] == pytest.approx(sigma, rel=1.5e-3)


def test_acceptance_edge_eps4_delta1e7_hops2(csbm):
    # the acceptance: `accounting --target gap --epsilon 4 --delta 1e-7 --set hops=2` → 1.835 ± 0.005
    claim = build("gap", epsilon=4, delta=1e-7, hops="2").claim(csbm)
    assert abs(claim.details["noise_multiplier"] - 1.835) <= 0.005
    assert claim.gdp_mu == pytest.approx(math.sqrt(2) / claim.details["noise_multiplier"])


@pytest.mark.parametrize("eps", [0.5, 1, 4, 8, 16])
def test_edge_calibration_round_trip_never_overshoots(csbm, eps):
    claim = build("gap", epsilon=eps, hops=3).claim(csbm)
    sigma = claim.details["noise_multiplier"]
    again = gdp_epsilon(math.sqrt(3) / sigma, claim.delta)
    assert again <= eps and again == pytest.approx(eps, rel=1e-6)
    assert claim.epsilon == pytest.approx(eps, rel=1e-6)


def test_delta_rule(csbm):
    edge = build("gap", epsilon=1).claim(csbm)
    assert edge.delta == gap_delta(csbm.edge_index.size(1))  # directed edges (PyG count)
    assert csbm.edge_index.size(1) >= 1000 and edge.delta == 1e-4
    node = build("gap", epsilon=1, unit="node").claim(csbm)
    assert node.delta == gap_delta(int(csbm.train_mask.sum()))
    assert build("gap", epsilon=1, delta=1e-9).claim(csbm).delta == 1e-9


def test_undirected_edge_unit_charges_sqrt2(csbm):
    directed = build("gap", epsilon=2).claim(csbm)
    undirected = build("gap", epsilon=2, edge_unit="undirected").claim(csbm)
    assert undirected.details["noise_multiplier"] == pytest.approx(directed.details["noise_multiplier"])
    assert undirected.details["sensitivity"] == pytest.approx(math.sqrt(2))
    assert undirected.details["noise_std"] == pytest.approx(math.sqrt(2) * directed.details["noise_std"])
    assert "directed" in directed.unit_text and "undirected" in undirected.unit_text


def test_dpsgd_schedule_follows_reference_code():
    # NoisySGD charges ⌊epochs · N / B⌋ Poisson steps at rate B/N
    assert dpsgd_schedule(1000, 256, 10) == (0.256, 39)
    assert dpsgd_schedule(180, 64, 2) == (64 / 180, 5)
    assert dpsgd_schedule(180, 256, 10) == (1.0, 10)  # B ≥ N: full-batch DP-GD
    assert dpsgd_schedule(180, 64, 0) == (0.0, 0)


def test_node_accountant_composes_three_modules(csbm):
    claim = build("gap", epsilon=4, unit="node", hops=2, max_degree=10).claim(csbm)
    d = claim.details
    sigma = d["noise_multiplier"]
    assert d["sampling_rate"] == 1.0 and d["steps_encoder"] == d["steps_classifier"] == 10
    # q = 1: everything is Gaussian, RDP = (T_EM + K + T_CM) α / (2σ²)
    total = (10 + 2 + 10) * np.asarray(DEFAULT_ORDERS) / (2 * sigma**2)
    eps, _ = rdp_to_dp(DEFAULT_ORDERS, total, claim.delta)
    assert eps == pytest.approx(4, rel=1e-6) and claim.epsilon <= 4
    assert d["noise_std"] == pytest.approx(sigma * math.sqrt(10))
    assert d["dpsgd_noise_std"] == pytest.approx(sigma * d["max_grad_norm"])
    assert claim.gdp_mu is None


def test_node_accountant_matches_dp_accounting_events(csbm):
    from dp_accounting import dp_event as ev
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    claim = build("gap", epsilon=8, unit="node", batch_size=64, epochs=2, encoder_epochs=1).claim(csbm)
    d = claim.details
    q, s = d["sampling_rate"], d["noise_multiplier"]
    assert (d["steps_encoder"], d["steps_classifier"]) == (2, 5)
    acc = rdp.RdpAccountant(list(DEFAULT_ORDERS))
    acc.compose(ev.ComposedDpEvent([
        ev.SelfComposedDpEvent(ev.PoissonSampledDpEvent(q, ev.GaussianDpEvent(s)), 2),
        ev.SelfComposedDpEvent(ev.GaussianDpEvent(s), 2),
        ev.SelfComposedDpEvent(ev.PoissonSampledDpEvent(q, ev.GaussianDpEvent(s)), 5),
    ]))
    assert acc.get_epsilon(claim.delta) == pytest.approx(8, rel=1e-4)
    assert claim.epsilon <= 8 and claim.epsilon == pytest.approx(8, rel=1e-6)


def test_infinite_epsilon_means_no_noise(csbm):
    claim = build("gap", epsilon=math.inf).claim(csbm)
    assert claim.details["noise_multiplier"] == 0 and math.isinf(claim.epsilon)


# --------------------------------------------------------------------------------- releases
def test_release_views_and_accuracy(csbm):
    target, rel = fit(csbm, epsilon=8)
    assert set(rel.levels) == {"api", "weights", "mechanism"}
    acc = resolve(rel.info["accuracy"])
    assert all(0.0 <= acc[k] <= 1.0 for k in ("train", "val", "test"))
    assert acc["test"] > 0.6  # csbm is easy; GAP at ε = 8 is far above chance (1/3)
    probs = rel.api(csbm)
    assert probs.shape == (600, 3) and torch.allclose(probs.sum(1), torch.ones(600), atol=1e-5)
    assert torch.equal(rel.api(csbm, [3, 5]), probs[[3, 5]])
    assert len(rel.mechanism) == 2 and rel.mechanism[0].output.shape == (600, 16)
    assert any(k.startswith("encoder.") for k in rel.view("weights")) and any(k.startswith("classifier.") for k in rel.view("weights"))


def test_node_level_determinism_and_trace(csbm):
    kw = dict(epsilon=8, unit="node", epochs=2, encoder_epochs=2)
    _, a = fit(csbm, 3, **kw)
    _, b = fit(csbm, 3, **kw)
    _, c = fit(csbm, 4, **kw)
    assert "trace" in a.levels and len(a.trace) == 4  # B ≥ N: one step per epoch, 2 + 2
    assert torch.equal(a.trace[-1]["noisy_sum"], b.trace[-1]["noisy_sum"])
    assert torch.equal(a.mechanism[0].output, b.mechanism[0].output)
    assert not torch.equal(a.trace[0]["noisy_sum"], c.trace[0]["noisy_sum"])


# node level: D above every degree of csbm, so the bound keeps every edge and the auditor's mean
# (under a public bound seed) is the run's own
@pytest.mark.parametrize("kw", [dict(), dict(edge_unit="undirected"), dict(unit="node", max_degree=10_000)])
def test_released_noise_has_claimed_scale(csbm, kw):
    target, rel = fit(csbm, 5, epsilon=4, **FAST, **kw)
    claim = target.claim(csbm)
    std = claim.details["noise_std"]
    for step in rel.mechanism:
        if kw.get("unit") == "node":
            assert step.noise_std is None  # the bound's seed is internal: no exact LLR is offered
        else:
            assert step.noise_std == pytest.approx(std)
        resid = step.output - step.mean(csbm)
        # 9,600 entries: the sample std is within ~1.5 % of the truth at 2 standard errors
        assert resid.std().item() == pytest.approx(std, rel=0.04)
        assert abs(resid.mean().item()) < 4 * std / math.sqrt(resid.numel())


def test_node_level_mean_uses_a_public_bound_seed(csbm, monkeypatch):
    """The bound's sampling seed of a run is never released, so the auditor's mean cannot use it."""
    target, rel = fit(csbm, 5, epsilon=4, unit="node", max_degree=2, **FAST)
    seen, private_edges = [], target._private_edges
    monkeypatch.setattr(target, "_private_edges", lambda g, seed: seen.append(seed) or private_edges(g, seed))
    for step in rel.mechanism:
        step.mean(csbm)
    assert seen and set(seen) == {0}


def test_mechanism_mean_uses_released_previous_hop(csbm):
    _, rel = fit(csbm, 6, epsilon=4, **FAST)
    h1 = rownorm(rel.mechanism[0].output)
    expected = sum_aggregate(h1, csbm.edge_index, 600)
    assert torch.allclose(rel.mechanism[1].mean(csbm), expected, atol=1e-5)
    # adding the undirected edge {u, v} moves rows u and v by the released H1 of the other end
    u, v = 0, 1
    while bool(((csbm.edge_index[0] == u) & (csbm.edge_index[1] == v)).any()):
        v += 1
    g1 = add_edge(csbm, u, v)
    diff = rel.mechanism[1].mean(g1) - rel.mechanism[1].mean(csbm)
    assert torch.allclose(diff[v], h1[u], atol=1e-5) and torch.allclose(diff[u], h1[v], atol=1e-5)
    others = torch.ones(600, dtype=torch.bool)
    others[[u, v]] = False
    assert diff[others].abs().max() < 1e-5


def test_noiseless_is_mean_without_noise(csbm):
    target = build("gap", epsilon=4, **FAST)
    s = target.noiseless(csbm)
    assert s.shape == (2, 600, 16)
    rel = target.fit(csbm, torch.Generator().manual_seed(0))  # uses the prepared encoder
    assert rel.info["encoder_cached"]
    assert torch.allclose(rel.mechanism[0].mean(csbm), s[0], atol=1e-5)


def test_prepare_caches_edge_free_encoder_only_at_edge_level(csbm):
    target = build("gap", epsilon=4, **FAST)
    target.prepare(csbm)
    a = target.fit(csbm, torch.Generator().manual_seed(0))
    b = target.fit(add_edge(csbm, 0, 599), torch.Generator().manual_seed(1))
    assert a.info["encoder_cached"] and b.info["encoder_cached"]
    wa, wb = a.view("weights"), b.view("weights")
    assert all(torch.equal(wa[k], wb[k]) for k in wa if k.startswith("encoder."))
    other = csbm.clone()
    other.x = other.x + 1.0
    assert not target.fit(other, torch.Generator().manual_seed(0)).info["encoder_cached"]
    node = build("gap", epsilon=4, unit="node", **FAST)
    node.prepare(csbm)
    assert not node.fit(csbm, torch.Generator().manual_seed(0)).info["encoder_cached"]


def test_degree_bound():
    ei = torch.tensor([[0, 0, 0, 0, 1, 2], [1, 2, 3, 4, 0, 0]])
    out = bound_out_degree(ei, 5, 2, seed=0)
    assert torch.bincount(out[0], minlength=5).tolist() == [2, 1, 1, 0, 0]
    assert torch.equal(out, bound_out_degree(ei, 5, 2, seed=0))
    assert set(map(tuple, out.t().tolist())) <= set(map(tuple, ei.t().tolist()))


# --------------------------------------------------------------------------------- bugs
def test_bug_no_noise(csbm):
    target, rel = fit(csbm, 0, epsilon=4, bug="no-noise", **FAST)
    for step in rel.mechanism:
        assert torch.allclose(step.output, step.mean(csbm), atol=1e-5)
        assert step.noise_std == pytest.approx(target.claim(csbm).details["noise_std"])  # claim unchanged
    _, node = fit(csbm, 0, epsilon=4, unit="node", bug="no-noise", **FAST)
    assert torch.allclose(node.mechanism[0].output, node.mechanism[0].mean(csbm), atol=1e-5)


def test_bug_fresh_inference_noise(csbm):
    _, ok = fit(csbm, 0, epsilon=4, **FAST)
    assert not ok.info["fresh_noise_per_query"] and torch.equal(ok.api(csbm), ok.api(csbm))
    _, bad = fit(csbm, 0, epsilon=4, bug="fresh-inference-noise", **FAST)
    assert bad.info["fresh_noise_per_query"]
    assert not torch.equal(bad.api(csbm), bad.api(csbm))


def test_bug_poisson_loader_steps(csbm):
    # same config as test_node_accountant_matches_dp_accounting_events (the calibration is shared)
    kw = dict(epsilon=8, unit="node", batch_size=64, epochs=2, encoder_epochs=1)
    _, ok = fit(csbm, 0, **kw)
    _, bad = fit(csbm, 0, bug="poisson-loader-steps", **kw)
    assert len(ok.trace) == 2 + 5  # accounted: ⌊1·180/64⌋ + ⌊2·180/64⌋
    assert len(bad.trace) == 3 + 6  # the reference loader runs ⌈180/64⌉ = 3 steps per epoch
    assert [s["module"] for s in ok.trace].count("encoder") == 2


def test_bug_no_degree_bound(csbm):
    _, ok = fit(csbm, 0, epsilon=8, unit="node", max_degree=2, **FAST)
    _, bad = fit(csbm, 0, epsilon=8, unit="node", max_degree=2, bug="no-degree-bound", **FAST)
    assert ok.info["private_edges"] <= 2 * 600 < bad.info["private_edges"] == csbm.edge_index.size(1)


# --------------------------------------------------------------------------------- config
@pytest.mark.parametrize("key,value,needle", [
    ("hops", 0, "The 'hops' parameter must be an int >= 1, got 0"),
    ("unit", "graph", "'unit'"), ("edge_unit", "both", "'edge_unit'"), ("combine", "att", "'combine'"),
    ("activation", "gelu", "'activation'"), ("hidden_dim", 0, "'hidden_dim'"), ("dropout", 1.0, "'dropout'"),
    ("max_degree", 0, "'max_degree'"), ("batch_size", 0, "'batch_size'"), ("max_grad_norm", 0.0, "'max_grad_norm'"),
    ("learning_rate", -1.0, "'learning_rate'"), ("epochs", -1, "'epochs'"), ("base_layers", 0, "'base_layers'"),
])
def test_bad_config_rejected(key, value, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace("'", "'")):
        GAP(**{key: value})


def test_unknown_bug_rejected():
    with pytest.raises(ValueError, match="unknown bug"):
        build("gap", bug="nope")


def test_published_accuracy_is_read_from_the_specs(spec_numbers):
    """Every published number is written in a spec it cites (GAP's README table, CARIBOU Table 3,
    DPDGC Table 2), so a mistyped or invented value fails."""
    written = spec_numbers("gap", "caribou", "dpdgc")
    assert [k for k, v in GAP.published_accuracy.items() if v not in written] == []


def test_raw_features_without_encoder(csbm):
    # encoder_layers = 0: GAP aggregates the row-normalised raw features (encoder_epochs forced to 0)
    _, rel = fit(csbm, 0, epsilon=8, encoder_layers=0, epochs=5)
    assert rel.mechanism[0].output.shape == (600, csbm.x.size(1))
    assert not any(k.startswith("encoder.") for k in rel.view("weights"))
    expected = sum_aggregate(rownorm(csbm.x), csbm.edge_index, 600)
    assert torch.allclose(rel.mechanism[0].mean(csbm), expected, atol=1e-5)


@pytest.mark.parametrize("name", ["gap", "dpdgc"])
def test_preprocess_drops_isolated_nodes_with_a_notice(csbm, name):
    """GAP's loader (which DPDGC reuses) removes isolated nodes; `train` and the audit apply it."""
    g = csbm.clone()
    g.x = torch.cat([g.x, torch.zeros(3, g.x.size(1))])
    g.y = torch.cat([g.y, torch.zeros(3, dtype=torch.long)])
    for m in ("train_mask", "val_mask", "test_mask"):
        setattr(g, m, torch.cat([getattr(g, m), torch.ones(3, dtype=torch.bool)]))
    g.num_nodes = csbm.num_nodes + 3
    t = build(name, epsilon=1.0)
    same, notice = t.preprocess(csbm)
    assert same is csbm and notice is None
    out, notice = t.preprocess(g)
    assert out.num_nodes == csbm.num_nodes and notice.startswith(f"{name}: dropped 3 isolated")
    assert torch.equal(out.edge_index, csbm.edge_index) and torch.equal(out.train_mask, csbm.train_mask)
