"""A composed node-level release audited jointly (issue #32): canaries.joint:HubWithGradient (the node's
edges and its training example in one pair) and attacks.joint:JointLRT (mechanism + trace LLR)."""
from __future__ import annotations

import numpy as np
import torch

from attacks.gradient import FullVectorGradientCanary
from attacks.joint import JointLRT
from canaries.joint import HubWithGradient
from targets.base import build

# the encoder's DP-SGD and one PMA hop; no classifier, so the claim is the two parts the score reads
# a hub of degree D = max_degree: the degree bound keeps every edge, so the hop is an exact Gaussian
JOINT = dict(unit="node", hops=1, epochs=0, encoder_epochs=2, batch_size=179, trace_module="encoder",
             max_degree=100)


def _pair(csbm, **kw):
    target = build("gap", epsilon=8, **{**JOINT, **kw})
    return target, HubWithGradient(degree=100).worlds(csbm, np.random.default_rng(0), target)


def test_world_one_is_the_node_with_its_edges_and_its_example_as_the_gradient_canary(csbm):
    _, pair = _pair(csbm)
    node = pair.info["node"]
    assert pair.g0.num_nodes == pair.g1.num_nodes == csbm.num_nodes + 1
    assert not bool((pair.g0.edge_index == node).any())  # isolated in world 0
    assert int((pair.g1.edge_index[0] == node).sum()) == 100
    assert not bool(pair.g1.train_mask[node]) and not bool(pair.g0.train_mask[node])  # one example: the canary
    assert getattr(pair.g0, "canary_gradient", None) is None
    assert float(pair.g1.canary_gradient.norm()) == pair.info["clip_norm"] == 1.0
    assert pair.info["noise_std"] > 0 and 0 < pair.info["sampling_rate"] <= 1


def test_joint_score_separates_the_worlds_with_the_noise_off_and_is_the_sum_of_its_parts(csbm):
    target, pair = _pair(csbm, bug="no-noise")
    attack, trace = JointLRT(), FullVectorGradientCanary()
    scores = []
    for b, g in enumerate((pair.g0, pair.g1)):
        for seed in range(2):
            release = target.fit(g, torch.Generator().manual_seed(10 * b + seed))
            s = attack.score(release, pair)
            assert np.isclose(s, attack.mechanism_llr(release, pair) + trace.score(release, pair), rtol=1e-9, atol=1e-9)
            scores.append((b, s))
    # noiseless, each world's score is ∓(‖Δm‖²/s² + the trace's ‖c‖²/s² per step)/2: symmetric about 0
    assert max(s for b, s in scores if b == 0) < 0 < min(s for b, s in scores if b == 1)


def test_the_mechanism_part_is_the_gaussian_llr_with_the_claimed_std(csbm):
    """With the noise off and no edge dropped by the bound, the hop's LLR is +‖m1 − m0‖²/(2s²) in world 1."""
    target, pair = _pair(csbm, bug="no-noise")
    release = target.fit(pair.g1, torch.Generator().manual_seed(3))
    step = release.view("mechanism")[0]
    d = (step.mean(pair.g1) - step.mean(pair.g0)).double()
    d[pair.info["node"]] = 0  # the canary's own row is not scored
    std = release.info["noise_std"]
    assert np.isclose(JointLRT().mechanism_llr(release, pair), float((d * d).sum()) / (2 * std**2), rtol=1e-6)
