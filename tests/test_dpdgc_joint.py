"""DPDGC's joint binding row (issue #32): the played pair's Z shift is the claim's Δ_Z, and the pair's exact ε
(dp-accounting's PLD in benchmarks/tightness_report.py) is GDP's at μ = √(T/4 + 1)/σ."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from attacks.joint import JointLRT
from attacks.mechanism import shift_norm2
from audit.play.data import load
from canaries.joint import HubWithGradient
from targets.base import Level, build
from targets.common.accounting import gdp_epsilon

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import tightness_report  # noqa: E402

PARAMS = {"unit": "node", "k": "4", "epochs_encoder": "1", "epochs_classifier": "1", "batch_size": "100000"}


def _target(eps: float = 4.0):
    return build("dpdgc", epsilon=eps, **{k: (int(v) if v.isdigit() else v) for k, v in PARAMS.items()})


def test_hub_moves_z_by_the_claimed_sensitivity_and_carries_a_g_c_canary():
    graph, target = load("csbm"), _target()
    pair = HubWithGradient(degree=4).worlds(graph, np.random.default_rng(0), target)
    claim = target.claim(pair.g1)
    assert claim.details["sampling_rate"] == 1.0 and claim.details["steps_encoder"] == 1
    release = target.fit(pair.g1, torch.Generator().manual_seed(1))
    # Z_{\r}'s mean moves by c·√k exactly (W's rows on the sphere), the canary node's own row not read
    assert math.sqrt(shift_norm2(release.mechanism[0], pair)) == pytest.approx(target.z_sensitivity(), rel=1e-6)
    assert target.z_sensitivity() == pytest.approx(2.0)  # c = 1, k = 4
    canary = torch.as_tensor(pair.g1.canary_gradient)
    assert float(canary.norm()) == pytest.approx(target.canary_norm()) == pytest.approx(5.0)  # g·C, g = k + 1
    assert claim.details["trace_noise_std"] == pytest.approx(2 * claim.details["noise_multiplier"] * 5.0)


@pytest.mark.parametrize("eps", [4.0, 8.0])
def test_pair_epsilon_pld_matches_the_gaussian_closed_form(eps):
    row = {"target": "dpdgc", "epsilon": eps, "dataset": "csbm", "params": PARAMS}
    claim = _target(eps).claim(load("csbm"))
    sigma = claim.details["noise_multiplier"]
    closed = gdp_epsilon(math.sqrt(1 / 4 + 1) / sigma, claim.delta)
    exact = tightness_report.dpdgc_joint_exact(row, replace=False)
    assert exact == pytest.approx(closed, abs=2e-3)
    assert exact < 0.6 * claim.epsilon  # the slack the row reports: the classifier step and the g·C canary


def test_replace_pair_carries_opposite_canaries_and_its_trace_llr_is_the_two_means():
    graph = load("csbm")
    target = build("dpdgc", epsilon=4.0, bug="no-noise", unit="node", k=4, epochs_encoder=2,
                   epochs_classifier=1, batch_size=100000)
    pair = HubWithGradient.parse("4:replace").worlds(graph, np.random.default_rng(0), target)
    v = torch.as_tensor(pair.g1.canary_gradient, dtype=torch.float64)
    assert torch.equal(torch.as_tensor(pair.g0.canary_gradient, dtype=torch.float64), -v)
    assert pair.info["gradient_pair"] == "replace-one"
    std, steps = pair.info["noise_std"], 2
    for sign, g in ((-1.0, pair.g0), (1.0, pair.g1)):
        release = target.fit(g, torch.Generator().manual_seed(3))
        trace = release.view(Level.TRACE)
        assert len(trace) == steps and all(torch.equal(s.canary.double(), sign * v) for s in trace)
        # no noise: x_t is the world's own canary ±v, so ℓ = Σ_t ⟨±v, 2v⟩ / std² = ±2T‖v‖²/std²
        assert JointLRT.replace_llr(release, pair) == pytest.approx(sign * 2 * steps * float(v @ v) / std**2, rel=1e-5)


def test_replace_pair_epsilon_is_gdp_at_root_t_plus_one_over_sigma():
    row = {"target": "dpdgc", "epsilon": 8.0, "dataset": "csbm", "params": {**PARAMS, "epochs_encoder": "20"}}
    claim = build("dpdgc", epsilon=8.0, unit="node", k=4, epochs_encoder=20, epochs_classifier=1,
                  batch_size=100000).claim(load("csbm"))
    closed = gdp_epsilon(math.sqrt(20 + 1) / claim.details["noise_multiplier"], claim.delta)
    assert tightness_report.dpdgc_joint_exact(row, replace=True) == pytest.approx(closed, abs=2e-3)
    assert 0.8 * claim.epsilon < closed < claim.epsilon
