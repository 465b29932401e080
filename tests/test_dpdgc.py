"""DPDGC target (specs/dpdgc.md): accountant anchors, calibration, release views, planted bugs."""
import math

import numpy as np
import pytest
import torch

from audit.play.data import add_edge
from targets.common.accounting import gaussian_rdp
from targets.base import build, resolve
from targets.dpdgc import (ORDERS, DPDGC, DPDGCConfig, bound_column_degree, lemma_f1_epsilon,
                           wor_gaussian_rdp)

FAST = dict(epochs_encoder=3, epochs_classifier=3)


def fit(graph, seed=0, **kw):
    t = build("dpdgc", **{**FAST, **kw})
    return t, t.fit(graph, torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------ accountant anchors (spec §3.6)
def test_lemma_f1_single_gaussian():
    # spec §3.6: one Gaussian σ=2, δ=1e-5 → ε ≈ 2.166 at α ≈ 9.6
    eps, order = lemma_f1_epsilon(ORDERS, gaussian_rdp(ORDERS, 2.0), 1e-5)
    assert eps == pytest.approx(2.166, rel=1e-3)
    assert order == pytest.approx(9.6, abs=0.2)


def test_wor_rdp_matches_dp_accounting():
    from dp_accounting.rdp.rdp_privacy_accountant import _compute_rdp_sample_wor_gaussian
    for q, s in [(64 / 2031, 1.914), (0.3, 5.0), (0.01, 0.7)]:
        ref = _compute_rdp_sample_wor_gaussian(q, s, ORDERS)
        assert np.allclose(wor_gaussian_rdp(ORDERS, q, s, 3), 3 * ref, rtol=1e-10)
    assert np.allclose(wor_gaussian_rdp(ORDERS, 1.0, 2.0, 5), 5 * np.asarray(ORDERS) / 8)


@pytest.mark.parametrize("kw, delta, sigma", [
    (dict(unit="node", k=1, epsilon=16), 1e-4, 1.914),      # Cora N_k/node
    (dict(unit="node", k=0, epsilon=16), 1e-4, 1.886),      # Cora N_0 (no Gaussian term)
    (dict(unit="edge", epsilon=1), 1e-5, 15.06),            # Cora edge
])
def test_cora_worked_numbers(csbm, kw, delta, sigma):
    # spec §3.6: m = 2031, B = 64, 100 + 100 epochs → T = 3173 per module; within 1 %
    claim = build("dpdgc", delta=delta, num_train=2031, batch_size=64, **kw).claim(csbm)
    assert claim.details["steps_encoder"] == 3173
    assert claim.details["noise_multiplier"] == pytest.approx(sigma, rel=0.01)
    assert claim.epsilon == pytest.approx(kw["epsilon"], rel=1e-3)
    assert claim.delta == delta


def test_facebook_worked_number(csbm):
    claim = build("dpdgc", unit="node", k=1, epsilon=16, delta=1e-5, num_train=19805,
                  batch_size=256).claim(csbm)
    assert claim.details["noise_multiplier"] == pytest.approx(1.402, rel=0.01)


def test_noise_applied_cora_k(csbm):
    # spec §3.6 table: Z std = 1.914·c·√k; DP-Emb noise_mult 7.66 (linear g) / 5.41 (√g) for k=1
    kw = dict(unit="node", epsilon=16, delta=1e-4, num_train=2031, norm_scale=1.0)
    d = build("dpdgc", k=5, **kw).claim(csbm).details
    assert d["noise_std"] == pytest.approx(4.28, rel=0.01)
    d = build("dpdgc", k=1, **kw).claim(csbm).details
    assert d["encoder_noise_multiplier"] == pytest.approx(7.66, rel=0.01)
    assert d["classifier_noise_std"] == pytest.approx(3.83, rel=0.01)
    d = build("dpdgc", k=1, group_scaling="sqrt", **kw).claim(csbm).details
    assert d["encoder_noise_multiplier"] == pytest.approx(5.41, rel=0.01)


def test_calibration_round_trip(csbm):
    for eps in (0.5, 3.0):
        t = build("dpdgc", epsilon=eps)
        d = t.claim(csbm).details
        sigma = d["noise_multiplier"]
        rdp = t._rdp(sigma, d["sampling_rate"], d["steps_encoder"], d["steps_classifier"])
        back = lemma_f1_epsilon(ORDERS, rdp, t.claim(csbm).delta)[0]
        assert back <= eps and back == pytest.approx(eps, rel=1e-4)
        # slightly less noise would overshoot the target: σ is the smallest that fits
        rdp2 = t._rdp(sigma * 0.999, d["sampling_rate"], d["steps_encoder"], d["steps_classifier"])
        assert lemma_f1_epsilon(ORDERS, rdp2, t.claim(csbm).delta)[0] > eps


def test_delta_rule(csbm):
    m = int(csbm.train_mask.sum())
    e = csbm.edge_index.size(1)
    assert build("dpdgc").claim(csbm).delta == 10.0 ** -len(str(e))
    assert build("dpdgc", unit="node", k=2).claim(csbm).delta == 10.0 ** -len(str(m))


def test_claim_details(csbm):
    c = build("dpdgc", epsilon=2).claim(csbm)
    for key in ("noise_multiplier", "noise_std", "sensitivity", "steps_encoder", "sampling_rate", "order"):
        assert key in c.details
    assert c.details["sensitivity"] == pytest.approx(1.0)  # c (default 1, spec §9 #2)
    assert c.details["components"] == ["SGD_enc(wor)", "Gaussian(Z)"]
    assert "directed" in c.unit_text
    n = build("dpdgc", unit="node", epsilon=2, max_degree=10, norm_scale=1e-8).claim(csbm).details
    assert n["sensitivity"] == pytest.approx(1e-8 * math.sqrt(20)) and n["group_size"] == 21
    assert build("dpdgc", unit="node", node_group="paper", max_degree=10).group_size() == 11


@pytest.mark.parametrize("level", [dict(), dict(unit="node", k=5), dict(unit="node")])
def test_claim_does_not_depend_on_c(csbm, level):
    # c scales Z's signal and its noise alike (spec §9 #2): σ and ε are the same, the Z noise std is σ·Δ_Z
    small, big = (build("dpdgc", epsilon=4, norm_scale=c, **level).claim(csbm) for c in (1e-8, 1.0))
    assert small.epsilon == big.epsilon and small.delta == big.delta
    assert small.details["noise_multiplier"] == big.details["noise_multiplier"]
    assert small.details["encoder_noise_std"] == big.details["encoder_noise_std"]
    assert small.details["noise_std"] == pytest.approx(1e-8 * big.details["noise_std"])


# ------------------------------------------------------------------ release
def test_release_views(csbm):
    t, r = fit(csbm)
    assert r.levels == ("api", "weights", "mechanism")
    p = r.api(csbm, [0, 5, 7])
    assert p.shape == (3, int(csbm.y.max()) + 1)
    assert torch.allclose(p.sum(1), torch.ones(3), atol=1e-5)
    acc = resolve(r.info["accuracy"])
    assert 0.0 <= acc["test"] <= 1.0 and r.info["fresh_noise_per_query"] is False
    norms = r.weights["emb.W"].norm(dim=1)
    assert torch.allclose(norms, torch.full_like(norms, t.config.norm_scale), rtol=1e-5)  # projected rows


def test_normalize_z_feeds_unit_rows(csbm):
    t = build("dpdgc")  # normalize_z by default (Alg. 2)
    z = torch.randn(csbm.num_nodes, t.config.hidden, dtype=torch.float64) * 30
    inputs = t._classifier_inputs(csbm.x, z, torch.zeros(t.config.hidden))
    assert torch.equal(inputs[:, :csbm.x.size(1)], csbm.x.float())
    assert torch.allclose(inputs[:, csbm.x.size(1):].norm(dim=1), torch.ones(csbm.num_nodes), atol=1e-5)
    plain = build("dpdgc", normalize_z=False)._classifier_inputs(csbm.x, z, torch.zeros(t.config.hidden))
    assert torch.equal(plain[:, csbm.x.size(1):], z.float())


def test_classifier_shapes_declared_without_training(csbm):
    """The ``weights`` view declares its lazy classifier entries' shapes (for the declared check's
    leak scan) without training it or drawing from torch's global generator; the declared shapes
    are the trained classifier's (the view checks them when it computes)."""
    t = build("dpdgc", **FAST)
    before = torch.random.get_rng_state()
    r = t.fit(csbm, torch.Generator().manual_seed(0))
    assert torch.equal(before, torch.random.get_rng_state())
    shapes = r.weights.rest_shapes
    assert shapes and "clf.head.weight" in shapes and not r.weights.computed
    trained = {k: tuple(v.shape) for k, v in r.weights.items() if k.startswith("clf.")}
    assert trained == shapes


def test_noise_has_claimed_scale(csbm):
    t, r = fit(csbm, epsilon=2)
    step = r.mechanism[0]
    resid = step.output - step.mean(csbm)
    assert step.noise_std == pytest.approx(t.claim(csbm).details["noise_std"])
    # 600×64 entries: the sample std is within ~0.5 % of the truth; allow 3 %
    assert resid.std().item() == pytest.approx(step.noise_std, rel=0.03)
    assert abs(resid.mean().item()) < 0.05 * step.noise_std


def test_mean_follows_canary_edge(csbm):
    _, r = fit(csbm)
    step, w = r.mechanism[0], r.weights["emb.W"].double()
    ei = csbm.edge_index
    u, v = 0, next(j for j in range(1, csbm.num_nodes) if not ((ei[0] == 0) & (ei[1] == j)).any())
    diff = step.mean(add_edge(csbm, u, v)) - step.mean(csbm)
    assert torch.allclose(diff[u], w[v]) and torch.allclose(diff[v], w[u])
    assert diff.abs().sum(1).nonzero().view(-1).tolist() == sorted([u, v])


def test_node_mode_degree_bound(csbm):
    ei = csbm.edge_index
    kept = bound_column_degree(ei, csbm.num_nodes, 3, seed=7)
    assert torch.bincount(kept[1], minlength=csbm.num_nodes).max() <= 3
    assert torch.equal(kept, bound_column_degree(ei, csbm.num_nodes, 3, seed=7))
    assert not torch.equal(kept, bound_column_degree(ei, csbm.num_nodes, 3, seed=8))
    t, r = fit(csbm, unit="node", max_degree=3, epsilon=16)
    step = r.mechanism[0]
    # the bound's hash seed is not released: the auditor's mean uses a public seed, no exact LLR
    assert step.noise_std is None
    seed = r.info["degree_hash_seed"]
    adj = t._adjacency(t._edges(csbm, seed), csbm.num_nodes, torch.float64)
    run_mean = torch.sparse.mm(adj, r.weights["emb.W"].double()) + r.weights["emb.b"].double()
    assert (step.output - run_mean).std().item() == pytest.approx(t.claim(csbm).details["noise_std"], rel=0.03)
    assert not torch.equal(step.mean(csbm), run_mean) or seed == 0


# ------------------------------------------------------------------ bugs
def test_no_noise_bug(csbm):
    t, r = fit(csbm, bug="no-noise")
    step = r.mechanism[0]
    assert torch.equal(step.output, step.mean(csbm))
    assert step.noise_std == t.claim(csbm).details["noise_std"] > 0  # the claim is unchanged
    assert r.info["encoder_noise_std"] == 0.0


def test_norm_noop_bug(csbm):
    t, r = fit(csbm, bug="norm-noop", norm_scale=1e-8)  # the paper's c, far below the trained row norms
    c = t.config.norm_scale
    norms = r.weights["emb.W"].norm(dim=1)
    # true sensitivity of Z under one directed entry is max_j ‖W_j‖; the claim is c
    assert norms.max().item() > 1e5 * c
    assert t.claim(csbm).details["sensitivity"] == pytest.approx(c)
    _, ok = fit(csbm, norm_scale=1e-8)
    assert ok.weights["emb.W"].norm(dim=1).max().item() <= c * (1 + 1e-5)


def test_sqrt_group_noise_bug(csbm):
    kw = dict(unit="node", k=8, epsilon=16)
    t, good = fit(csbm, **kw)
    _, bad = fit(csbm, bug="sqrt-group-noise", **kw)
    sigma = t.claim(csbm).details["noise_multiplier"]
    assert good.info["encoder_noise_std"] == pytest.approx(2 * sigma * 9)
    assert bad.info["encoder_noise_std"] == pytest.approx(2 * sigma * 3)
    assert not torch.equal(good.weights["emb.W"], bad.weights["emb.W"])


# ------------------------------------------------------------------ config
@pytest.mark.parametrize("kw, word", [
    (dict(unit="nodes"), "unit"), (dict(k=-1, unit="node"), "k"), (dict(k=2), "k"),
    (dict(max_degree=0), "max_degree"), (dict(norm_scale=0.0), "norm_scale"), (dict(batch_size=0), "batch_size"),
    (dict(group_scaling="cubic"), "group_scaling"), (dict(dropout=1.0), "dropout"), (dict(lr=-1.0), "lr"),
    (dict(epochs_classifier=0), "epochs_classifier"), (dict(checkpoint="best"), "checkpoint"),
    (dict(num_train=0), "num_train"),
])
def test_bad_config_rejected(kw, word):
    with pytest.raises(ValueError, match=f"'{word}' parameter"):
        DPDGCConfig(**kw)


def test_unknown_bug_and_num_train_mismatch(csbm):
    with pytest.raises(ValueError, match="unknown bug"):
        build("dpdgc", bug="nope")
    with pytest.raises(ValueError, match="accounting only"):
        build("dpdgc", num_train=2031, **FAST).fit(csbm, torch.Generator().manual_seed(0))


def test_published_and_paper_split(csbm, spec_numbers):
    written = spec_numbers("dpdgc")  # the paper's Table 2, as the spec copies it
    assert [k for k, v in DPDGC.published_accuracy.items() if v not in written] == []
    tr, va, te = build("dpdgc", split="paper")._masks(csbm)
    assert int(va.sum()) == 60 and int(te.sum()) == 90 and int(tr.sum()) == 450
    assert not (tr & va).any() and not (tr & te).any()
