"""DPDGC's DP-Emb trace and the Dirac gradient canary in it (the `sqrt-group-noise` audit)."""
import math

import numpy as np
import pytest
import torch

from audit.play import game
from canaries.gradient import DiracGradient
from targets.common.accounting import gaussian_rdp
from targets.base import build
from targets.dpdgc import ORDERS, lemma_f1_epsilon, wor_gaussian_rdp

K = 25
G = K + 1  # DP-Emb examples one k-neighbour change touches
#: full-batch DP-Emb (q = 1), the regression audit's configuration
AUDIT = dict(unit="node", k=K, batch_size=1000, epochs_encoder=4, epochs_classifier=1, hidden=8, epsilon=8)


def target(bug=None, **kw):
    return build("dpdgc", **{**AUDIT, **kw}, bug=bug)


def fit(t, graph, seed=0):
    return t.fit(graph, torch.Generator().manual_seed(seed))


def noise_of(trace) -> torch.Tensor:
    return torch.cat([s.noisy.double() - s.clean.double() for s in trace])


def test_claim_names_the_trace_law(csbm):
    t = target()
    det = t.claim(csbm).details
    sigma = det["noise_multiplier"]
    assert det["sampling_rate"] == 1.0 and det["steps_encoder"] == 4
    assert det["trace_noise_std"] == pytest.approx(2 * sigma * G * 1.0)
    assert det["canary_norm"] == G * 1.0 and t.dimension(csbm) == csbm.num_nodes * 8 + 8
    # a bug changes the release, never the claim
    assert target("sqrt-group-noise").claim(csbm).details["trace_noise_std"] == det["trace_noise_std"]
    assert "trace_noise_std" not in build("dpdgc", unit="edge").claim(csbm).details


def test_full_batch_accountant_is_the_plain_gaussian(csbm):
    # q = 1: fixed-size sampling is no sampling; replace-one sensitivity 2C against noise 2σC is σ
    for sigma, steps in [(0.7, 1), (1.3, 4), (5.0, 9)]:
        assert np.allclose(wor_gaussian_rdp(ORDERS, 1.0, sigma, steps), gaussian_rdp(ORDERS, sigma, steps),
                           rtol=1e-12)
    claim = target().claim(csbm)
    d = claim.details
    steps = d["steps_encoder"] + 1 + d["steps_classifier"]  # DP-Emb, Z, classifier
    eps = lemma_f1_epsilon(ORDERS, gaussian_rdp(ORDERS, d["noise_multiplier"], steps), claim.delta)[0]
    assert eps == pytest.approx(claim.epsilon, rel=1e-9)


def test_trace_noise_has_the_claimed_std(csbm):
    t = target()
    r = fit(t, csbm)
    trace = r.view("trace")
    std = t.claim(csbm).details["trace_noise_std"]
    assert len(trace) == 4 and trace.dim == t.dimension(csbm) and trace.sampling_rate == 1.0
    assert all(s.central.numel() == int(csbm.train_mask.sum()) for s in trace)
    e = noise_of(trace)  # 4 × 4808 draws: the sample std is within ~1 % of the truth
    assert float(e.std()) == pytest.approx(std, rel=0.04)
    assert abs(float(e.mean())) < 4 * std / math.sqrt(e.numel())


def test_sqrt_group_noise_bug_is_sqrt_g_times_smaller(csbm):
    t = target("sqrt-group-noise")
    trace = fit(t, csbm).view("trace")
    sigma = t.claim(csbm).details["noise_multiplier"]
    assert trace.noise_std == pytest.approx(2 * sigma * math.sqrt(G))
    assert float(noise_of(trace).std()) == pytest.approx(2 * sigma * math.sqrt(G), rel=0.04)


def test_canary_sits_at_j_with_norm_g_clip(csbm):
    t = target()
    pair = DiracGradient().worlds(csbm, np.random.default_rng(0), t)
    j, gc = pair.info["coordinate"], pair.g1.canary_gradient
    assert pair.info["magnitude"] == G and pair.info["noise_std"] == t.claim(csbm).details["trace_noise_std"]
    assert float(gc.norm()) == G and torch.nonzero(gc).view(-1).tolist() == [j]
    r0, r1 = fit(t, pair.g0, 3).view("trace"), fit(t, pair.g1, 3).view("trace")
    assert all(s.canary_in for s in r1) and all(s.canary_in is None for s in r0)
    # step 0: same model, same batch, same noise in both worlds; only the canary differs
    assert torch.equal(r1[0].clean - r0[0].clean, gc)
    assert torch.equal(r1[0].noisy - r1[0].clean, r0[0].noisy - r0[0].clean)


def test_the_bugs_canary_law_stays_the_claimed_one(csbm):
    pair = DiracGradient().worlds(csbm, np.random.default_rng(0), target("sqrt-group-noise"))
    assert pair.info["noise_std"] == target().claim(csbm).details["trace_noise_std"]


def test_same_seed_same_trace(csbm):
    t = target()
    a, b, c = (fit(t, csbm, s).view("trace") for s in (5, 5, 6))
    assert all(torch.equal(x.noisy, y.noisy) and torch.equal(x.clean, y.clean) for x, y in zip(a, b))
    assert not torch.equal(a[0].noisy, c[0].noisy)


@pytest.mark.parametrize("kw", [AUDIT, dict(unit="node", k=2, epochs_encoder=2, epochs_classifier=1, hidden=16)])
def test_the_trace_changes_no_other_view(csbm, kw):
    t = build("dpdgc", **kw)
    plain = fit(t, csbm, 11)  # the trace is never read
    traced = fit(t, csbm, 11)
    assert len(traced.view("trace")) > 0  # read before the other views
    assert torch.equal(plain.mechanism[0].output, traced.mechanism[0].output)
    assert torch.equal(plain.api(csbm), traced.api(csbm))
    assert all(torch.equal(plain.weights[k], traced.weights[k]) for k in plain.weights)
    assert plain.info == traced.info


def test_canary_needs_full_batch_and_a_node_level(csbm):
    gc = torch.zeros(csbm.num_nodes * 8 + 8)
    gc[0] = G
    g1 = csbm.clone()
    g1.canary_gradient = gc
    with pytest.raises(ValueError, match="full-batch"):
        fit(target(batch_size=64), g1)
    with pytest.raises(ValueError, match="k-neighbour or node"):
        fit(build("dpdgc", unit="edge", hidden=8, epochs_encoder=1, epochs_classifier=1, batch_size=1000), g1)
    assert fit(build("dpdgc", unit="edge", epochs_encoder=1, epochs_classifier=1), csbm).trace is None


@pytest.mark.parametrize("bug, verdict", [("sqrt-group-noise", "VIOLATION"), (None, "CONSISTENT")])
def test_audit_end_to_end(tmp_path, bug, verdict):
    spec = game.AuditSpec(target="dpdgc", epsilon=8, bug=bug, attack="gradient-lrt", estimator="gdp", trials=100,
                          params={k: str(v) for k, v in AUDIT.items() if k != "epsilon"})
    res = game.run_audit(spec, out=tmp_path, progress=False)
    assert res["level"] == "trace" and res["canary"]["magnitude"] == G and res["verdict"] == verdict
