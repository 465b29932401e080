"""GAP's node-level DP-SGD trace and its gradient canary (targets/gap/, ``trace_module``)."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from audit.play.data import load
from audit.stats.family_fit import accounting_check
from canaries.gradient import DiracGradient
from targets.base import build, resolve

# the catalogue's audit of `poisson-loader-steps`: B = N_train − 1, so the reference loader runs
# ⌈N/B⌉ = 2 steps per epoch where ⌊epochs·N/B⌋ = epochs are accounted
AUDIT = dict(epsilon=8, unit="node", hops=1, epochs=0, encoder_epochs=8, batch_size=179)
SMALL = dict(epsilon=8, unit="node", hops=1, epochs=2, encoder_epochs=2, batch_size=64)


def fit(graph, seed=0, **kw):
    target = build("gap", **kw)
    return target, target.fit(graph, torch.Generator().manual_seed(seed))


def with_canary(graph, gc):
    g1 = copy.copy(graph)
    g1.canary_gradient = gc
    return g1


@pytest.mark.parametrize("module", ["encoder", "classifier"])
def test_released_noise_has_the_claimed_std(csbm, module):
    target, rel = fit(csbm, 1, trace_module=module, **SMALL)
    trace = rel.view("trace")
    std = target.claim(csbm).details["trace_noise_std"]
    assert trace.noise == "gaussian" and trace.noise_std == pytest.approx(std)
    assert {s.module for s in trace} == {module} and trace.dim == target.dimension(csbm)
    noise = torch.stack([s.noisy - s.clean for s in trace]).double()
    assert abs(float((noise / std).pow(2).mean()) - 1.0) < 0.1  # ~4,000 entries: sd of the mean ≈ 0.02
    assert abs(float(noise.mean())) < 5 * std / math.sqrt(noise.numel())
    _, quiet = fit(csbm, 1, trace_module=module, bug="no-noise", **SMALL)
    assert all(torch.equal(s.noisy, s.clean) for s in quiet.trace)


def test_canary_is_in_clean_exactly_when_its_coin_is_up(csbm):
    # q = 64/180: some coins down; a canary coordinate far above any natural clipped sum (≤ 180·C)
    kw = dict(SMALL, encoder_epochs=4)
    target = build("gap", trace_module="encoder", **kw)
    gc = torch.zeros(target.dimension(csbm))
    gc[7] = 1000.0
    g1 = with_canary(csbm, gc)
    r0 = target.fit(csbm, torch.Generator().manual_seed(3)).view("trace")
    r1 = target.fit(g1, torch.Generator().manual_seed(3)).view("trace")
    coins = [s.canary_in for s in r1]
    assert True in coins and False in coins and all(s.canary_in is None for s in r0)
    for s in r1:
        assert (float(s.clean[7]) > 500) == s.canary_in
    for s0, s1 in zip(r0, r1):  # same batches and noise in both worlds
        assert torch.equal(s0.central, s1.central)
        assert torch.allclose(s0.noisy - s0.clean, s1.noisy - s1.clean, atol=1e-3)
    first = next(i for i, c in enumerate(coins) if c)  # the models agree up to the first canary step
    assert torch.allclose(r1[first].clean - r0[first].clean, gc, atol=1e-4)


def test_same_seed_same_trace(csbm):
    _, a = fit(csbm, 5, trace_module="classifier", **SMALL)
    _, b = fit(csbm, 5, trace_module="classifier", **SMALL)
    _, c = fit(csbm, 6, trace_module="classifier", **SMALL)
    assert torch.equal(a.trace.noisy_matrix(), b.trace.noisy_matrix())
    assert torch.equal(a.trace.clean_matrix(), b.trace.clean_matrix())
    assert not torch.equal(a.trace.noisy_matrix(), c.trace.noisy_matrix())


def test_trace_and_canary_coins_leave_the_other_views_unchanged(csbm):
    runs = {m: fit(csbm, 2, trace_module=m, **SMALL)[1] for m in ("all", "encoder", "classifier")}
    ref = runs["all"]
    assert [s.module for s in ref.trace] == ["encoder"] * 5 + ["classifier"] * 5
    for module in ("encoder", "classifier"):
        rel = runs[module]
        for s0, s1 in zip(ref.mechanism, rel.mechanism):
            assert torch.equal(s0.output, s1.output)
        assert torch.equal(ref.api(csbm), rel.api(csbm))
        w0, w1 = resolve(ref.weights), resolve(rel.weights)
        assert w0.keys() == w1.keys() and all(torch.equal(w0[k], w1[k]) for k in w0)
        mine = [s for s in ref.trace if s.module == module]
        assert all(torch.equal(a.noisy, b.noisy) for a, b in zip(mine, rel.trace))
    assert ref.trace[0]["module"] == "encoder" and torch.equal(ref.trace[0]["noisy_sum"], ref.trace[0].noisy)


def test_bug_runs_the_loaders_steps_while_the_claim_counts_fewer(csbm):
    for kw, loader, accounted in ((AUDIT, 8 * 2, 8), (dict(SMALL, encoder_epochs=3), 3 * 3, 3 * 180 // 64)):
        _, ok = fit(csbm, 0, trace_module="encoder", **kw)
        _, bad = fit(csbm, 0, trace_module="encoder", bug="poisson-loader-steps", **kw)
        assert len(ok.trace) == ok.trace.accounted_steps == bad.trace.accounted_steps == accounted
        assert len(bad.trace) == loader  # epochs·⌈N/B⌉
        # the family fit's accounting check reads exactly this, from one trace
        assert accounting_check(ok.trace) is None
        assert f"releases {loader} steps, the accountant charged {accounted}" in accounting_check(bad.trace)


def test_gradient_canary_reads_the_trace_law_from_the_claim(csbm):
    target = build("gap", trace_module="encoder", **AUDIT)
    claim = target.claim(csbm)
    pair = DiracGradient().worlds(csbm, np.random.default_rng(0), target)
    d = claim.details
    assert pair.info["noise_std"] == pytest.approx(d["noise_multiplier"] * d["max_grad_norm"])
    assert pair.info["magnitude"] == d["max_grad_norm"] and pair.info["dimension"] == target.dimension(csbm)
    assert pair.info["sampling_rate"] == pytest.approx(179 / 180)


def test_claim_charges_the_classifier_without_an_encoder(csbm):
    # the loader's rate comes from the batch size, not from the (absent) encoder's schedule
    d = build("gap", epsilon=4, unit="node", encoder_layers=0, epochs=4, batch_size=64).claim(csbm).details
    assert d["sampling_rate"] == pytest.approx(64 / 180) and d["rdp_at_best_order"]["classifier"] > 0


def test_trace_is_node_level_only(csbm):
    edge = build("gap", epsilon=4)
    assert "trace" not in edge.levels and "trace" in build("gap", epsilon=4, unit="node").levels
    with pytest.raises(ValueError, match="node level only"):
        build("gap", epsilon=4, trace_module="encoder")
    with pytest.raises(ValueError, match="trace_module"):
        build("gap", epsilon=4, unit="node").dimension(csbm)
    with pytest.raises(ValueError, match="encoder_layers"):
        build("gap", epsilon=4, unit="node", encoder_layers=0, trace_module="encoder")
    target = build("gap", epsilon=4, unit="node", epochs=1, encoder_epochs=1)
    with pytest.raises(ValueError, match="trace_module"):
        target.fit(with_canary(csbm, torch.zeros(10)), torch.Generator().manual_seed(0))


def test_gdp_conversion_is_conservative_for_the_audited_trace():
    """Why the catalogue audits this trace with gdp although q < 1.

    The score is the exact LLR of T iid steps, each a Poisson(q)-subsampled Gaussian with noise
    multiplier σ (the canary's coordinate; the rest of the sum is known), so at its threshold 0 the
    test's FPR + FNR = 1 − TV. gdp bounds μ by the Gaussian with that TV and reports ε_δ(G_μ): a
    valid lower bound when the true ε_δ of the T steps is at least the TV-matched Gaussian's. Check
    it with dp-accounting's PLD (TV rounded up, ε rounded down) for the correct (T = 8) and the
    buggy (T = 16) runs of the catalogue configuration.
    """
    from dp_accounting.pld import privacy_loss_distribution as pld
    from scipy.stats import norm

    from targets.common.accounting import gdp_epsilon

    claim = build("gap", trace_module="encoder", **AUDIT).claim(load("csbm"))
    sigma, q, delta = claim.details["noise_multiplier"], claim.details["sampling_rate"], claim.delta
    for steps in (8, 16):
        def composed(pessimistic):
            return pld.from_gaussian_mechanism(sigma, sampling_prob=q, pessimistic_estimate=pessimistic,
                                               use_connect_dots=pessimistic,
                                               value_discretization_interval=1e-3).self_compose(steps)
        tv_up = composed(True).get_delta_for_epsilon(0.0)
        eps_low = composed(False).get_epsilon_for_delta(delta)
        assert gdp_epsilon(2 * norm.ppf((1 + tv_up) / 2), delta) <= eps_low
    assert eps_low > claim.epsilon  # the bug's 16 steps break the claim of 8 accounted ones


def test_short_audit_end_to_end(csbm, tmp_path):
    from audit.play.game import AuditSpec, run_audit

    params = {k: str(v) for k, v in AUDIT.items() if k != "epsilon"} | {"trace_module": "encoder"}
    spec = AuditSpec(target="gap", epsilon=8, params=params, attack="gradient-lrt", trials=40,
                     estimator="gdp", bug="poisson-loader-steps")
    res = run_audit(spec, out=tmp_path, progress=False)
    assert res["level"] == "trace" and res["canary"]["canary"] == "dirac-gradient"
    assert res["trials"] == 40 and res["auc"] > 0.7


def test_noiseless_proxy_trains_on_the_catalogue_batch(csbm):
    """The node level's noiseless map trains an edge-level proxy with this config's batch_size (179 of 180
    training rows, BatchNorm on): it used to stop on a one-row batch (issue #42)."""
    target = build("gap", trace_module="encoder", **AUDIT)
    sums = target.noiseless(csbm)
    assert sums.shape[1] == csbm.num_nodes and torch.isfinite(sums).all()


def test_shuffled_batches_leave_no_one_row_batch():
    from targets.common.runtime import shuffled_batches
    rows = torch.arange(180)
    batches = shuffled_batches(rows, 179, torch.Generator().manual_seed(0))
    assert [b.numel() for b in batches] == [180]
    assert sorted(torch.cat(batches).tolist()) == rows.tolist()
    assert [b.numel() for b in shuffled_batches(rows, 60, torch.Generator().manual_seed(0))] == [60, 60, 60]
    assert [b.numel() for b in shuffled_batches(rows, 50, torch.Generator().manual_seed(0))] == [50, 50, 50, 30]
