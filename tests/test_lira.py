"""Node LiRA / RMIA: shadows independent of scored trials, signal on a non-private GCN, the signal φ."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attacks.base import make as make_attack
from attacks.lira import RMIA, LiRA, OnlineLiRA, logit_confidence
from audit.stats.estimators import auc
from canaries.node import InsertNode, RemoveNode
from targets.gcn import NonPrivateGCN

TRIALS = 12


@pytest.fixture(scope="module")
def target():
    return NonPrivateGCN(epochs=100)


def _releases(target, pair, trials=TRIALS):
    """Trial releases (bits alternate), seeded apart from every shadow seed."""
    return [(i % 2, target.fit(pair.world(i % 2), torch.Generator().manual_seed(10_000 + i)))
            for i in range(trials)]


def _auc(attack, releases, pair, graph):
    scores = {0: [], 1: []}
    for b, rel in releases:
        scores[b].append(attack.score(rel, pair, graph))
    assert all(math.isfinite(s) for v in scores.values() for s in v)
    return auc(scores[0], scores[1])


def test_registry_builds_the_offline_attack():
    attack = make_attack("lira")
    assert isinstance(attack, LiRA) and attack.levels == ("api",) and not attack.online
    assert attack.shadows == 8 and attack.method == "lira"
    assert OnlineLiRA().online and RMIA().method == "rmia"


def test_logit_confidence_is_stable_and_matches_the_logit():
    p = torch.tensor([[0.9, 0.1], [0.25, 0.75], [1.0 - 1e-15, 1e-15]], dtype=torch.float64)
    phi = logit_confidence(p, [0, 0, 0])
    assert phi[0] == pytest.approx(math.log(9.0))
    assert phi[1] == pytest.approx(math.log(1 / 3))
    assert phi[2] == pytest.approx(math.log(1e15), rel=1e-3)  # not lost to 1 − p rounding
    three = torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64)
    assert logit_confidence(three, [1])[0] == pytest.approx(math.log(0.3 / 0.7))


def test_shadows_are_independent_of_the_scored_trials(small_csbm, target):
    pair = InsertNode(degree=3).worlds(small_csbm, np.random.default_rng(0), target)
    (b0, r0), (b1, r1) = _releases(target, pair, trials=2)
    a = LiRA(shadows=3, shadow_target=target)
    s0, s1 = a.score(r0, pair, small_csbm), a.score(r1, pair, small_csbm)
    assert a.score(r0, pair, small_csbm) == s0  # same instance, same release → same score
    other = LiRA(shadows=3, shadow_target=target)  # fresh instance, releases in the other order
    assert other.score(r1, pair, small_csbm) == s1 and other.score(r0, pair, small_csbm) == s0
    # the shadow bits/statistics do not move with the releases scored
    assert np.array_equal(a.shadow_stats(pair)["phi"], other.shadow_stats(pair)["phi"])
    assert s0 != s1


@pytest.fixture(scope="module")
def removed(small_csbm, target):
    pair = RemoveNode().worlds(small_csbm, np.random.default_rng(0), target)
    return pair, _releases(target, pair)


def test_offline_lira_and_rmia_separate_worlds_with_a_removed_node(small_csbm, target, removed):
    # inclusion gives z its edges and its label; here its confidence rises, so the two-sided offline
    # score and the one-sided ones (cdf, RMIA) all separate the worlds
    pair, rel = removed
    offline = LiRA(shadows=4, shadow_target=target)
    assert _auc(offline, rel, pair, small_csbm) >= 0.85
    assert _auc(LiRA(shadows=4, offline_score="cdf", shadow_target=target), rel, pair, small_csbm) >= 0.85
    assert _auc(RMIA(shadows=4, shadow_target=target), rel, pair, small_csbm) >= 0.85
    assert (offline.shadow_stats(pair)["bits"] == 0).all()  # offline: the canary is OUT of every shadow


def test_online_lira_separates_worlds_with_a_removed_node(small_csbm, target, removed):
    pair, rel = removed
    a = LiRA(shadows=4, online=True, shadow_target=target)
    assert _auc(a, rel, pair, small_csbm) >= 0.85
    assert _auc(LiRA(shadows=4, online=True, fixed_variance=False, shadow_target=target), rel, pair, small_csbm) >= 0.85
    bits = a.shadow_stats(pair)["bits"]
    assert sorted(bits.tolist()) == [0, 0, 1, 1]  # balanced IN/OUT shadows


def test_the_target_comes_from_the_release_or_a_binding(small_csbm, target):
    pair = InsertNode().worlds(small_csbm, np.random.default_rng(0), target)
    rel = target.fit(pair.g1, torch.Generator().manual_seed(5))
    with pytest.raises(ValueError, match="shadow models need the target"):
        LiRA(shadows=1).score(rel, pair, small_csbm)
    bound = LiRA(shadows=2)
    bound.bind_target(target)
    rel.info["target"] = target
    via_info = LiRA(shadows=2)
    assert bound.score(rel, pair, small_csbm) == via_info.score(rel, pair, small_csbm)
    assert rel.info["attack_queries"] == 2


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="method"):
        LiRA(method="x")
    with pytest.raises(ValueError, match="shadows"):
        LiRA(shadows=1, online=True)
    with pytest.raises(ValueError, match="keep"):
        LiRA(keep=0.0)
