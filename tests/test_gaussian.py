import numpy as np
import pytest
import torch

from targets.common.accounting import gdp_epsilon
from targets.base import build


def test_claim_anchor_and_round_trip(csbm):
    claim = build("gaussian", epsilon=2, delta=1e-5).claim(csbm)
    assert claim.gdp_mu == pytest.approx(0.5016, abs=1e-3)
    assert claim.details["sensitivity"] == pytest.approx(2**0.5)
    assert gdp_epsilon(1 / claim.details["noise_multiplier"], 1e-5) == pytest.approx(2.0, rel=1e-6)


@pytest.mark.parametrize("bug, factor", [(None, 1.0), ("half-noise", 0.5), ("no-noise", 0.0)])
def test_released_noise_has_the_stated_scale(csbm, bug, factor):
    target = build("gaussian", epsilon=2, bug=bug)
    release = target.fit(csbm, torch.Generator().manual_seed(0))
    step, = release.mechanism
    resid = (step.output - step.mean(csbm)).flatten().numpy()
    claimed = target.claim(csbm).details["noise_std"]
    assert step.noise_std == pytest.approx(claimed)  # the auditor is told the claimed law
    assert resid.std() == pytest.approx(factor * claimed, rel=0.03, abs=1e-9)
    if factor:
        assert abs(resid.mean()) < 4 * factor * claimed / np.sqrt(resid.size)


def test_sensitivity_is_exactly_sqrt2_for_any_edge(csbm):
    from audit.play.data import add_edge
    t = build("gaussian")
    base = t.noiseless(csbm)
    for u, v in [(0, 599), (5, 77), (100, 300)]:
        assert float((t.noiseless(add_edge(csbm, u, v)) - base).norm()) == pytest.approx(2**0.5, rel=1e-5)


def test_unknown_bug_and_bad_values_are_rejected():
    with pytest.raises(ValueError, match="unknown bug 'nope'.*half-noise"):
        build("gaussian", bug="nope")
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        build("gaussian", epsilon=-1)
    with pytest.raises(ValueError, match="unknown parameter"):
        build("gaussian", hops="3")


def test_raw_feature_variant_has_the_exact_worst_case_sensitivity(csbm):
    from audit.play.data import add_edge
    t = build("gaussian", normalize=False)
    norms = csbm.x.norm(dim=1)
    top = torch.topk(norms, 2).indices.tolist()
    change = float((t.noiseless(add_edge(csbm, *top)) - t.noiseless(csbm)).norm())
    assert change == pytest.approx(t.claim(csbm).details["sensitivity"], rel=1e-5)
    assert float((t.noiseless(add_edge(csbm, 0, 599)) - t.noiseless(csbm)).norm()) <= change


def test_worst_case_canary_certifies_more_than_a_random_one(tmp_path):
    """Issue 9: same trial budget, same claim; the canary search must pay off where edges differ."""
    from audit.play.game import AuditSpec, run_audit
    kw = dict(target="gaussian", epsilon=2, params={"normalize": "false"}, trials=2000, seed=0)
    worst = run_audit(AuditSpec(canary="worst-edge", **kw), out=tmp_path, progress=False)
    rand = run_audit(AuditSpec(canary="random-edge", **kw), out=tmp_path, progress=False)
    assert worst["eps_lb"] > rand["eps_lb"] + 0.3
    assert worst["verdict"] == "CONSISTENT" and worst["eps_lb"] <= 2.0  # the exact claim still holds
