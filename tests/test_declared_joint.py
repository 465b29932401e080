"""Declarations checked together (audit.declared_model.declared_joint) and the score that exploits noise-free rows
(attacks.exact_rows), on the user targets of tests/user_targets."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from attacks.exact_rows import ExactRows
from attacks.mechanism import MechanismLRT
from audit.declared_model import declared
from canaries.edge import RandomEdge
from canaries.edge_removal import IsolatingEdge
from targets.base import get

USER = Path(__file__).with_name("user_targets")


def user(spec: str):
    return get(f"{USER / spec.split(':')[0]}:{spec.split(':')[1]}")()


def _check(target, pair, n=6):
    return declared.check_declared(target, pair, seed=0, n=n, graph=pair.g1)


def _failed(check, name):
    return [t for s in check.steps for t in s.tests if t.name == name and not t.passed]


def test_independent_steps_pass_the_joint_tests(small_csbm):
    pair = RandomEdge().worlds(small_csbm, np.random.default_rng(0))
    check = _check(user("aggregation.py:TwoHops"), pair)
    assert check.ok and check.deviations == []
    shared = [t for s in check.steps for t in s.tests if t.name == "shared-steps"]
    assert len(shared) == 2 and all(t.passed for t in shared)   # steps 0 and 1, in each world


def test_noise_shared_across_steps_fails_the_check(small_csbm):
    pair = RandomEdge().worlds(small_csbm, np.random.default_rng(0))
    check = _check(user("shared_noise.py:SharedNoise"), pair)
    assert not check.ok and _failed(check, "shared-steps")
    assert any(d.startswith("shared-steps") for d in check.deviations)
    assert "shared or correlated across steps" in check.reason
    method, prior, note = declared.apply_policy(check, "gdp", 0.0)
    assert (method, prior) == ("cp", None) and "not trusted" in note


def test_rows_released_without_noise_fail_the_check(small_csbm):
    pair = RandomEdge().worlds(small_csbm, np.random.default_rng(0))
    check = _check(user("train_rows_only.py:TrainRowsOnly"), pair)
    failed = _failed(check, "noise-free")
    assert not check.ok and {t.world for t in failed} == {0, 1}
    untrained = int((~small_csbm.train_mask).sum())
    assert f"{untrained * small_csbm.x.size(1)} entries ({untrained} rows)" in failed[0].detail


def test_a_fixed_seed_fails_the_identity_test(small_csbm):
    pair = RandomEdge().worlds(small_csbm, np.random.default_rng(0))
    check = _check(user("fixed_seed.py:FixedSeed"), pair)
    assert not check.ok and _failed(check, "identical")
    assert any(d.startswith("identical") for d in check.deviations)


def test_exact_rows_is_the_likelihood_ratio_where_every_row_is_noisy(small_csbm):
    target = user("aggregation.py:Aggregation")
    pair = RandomEdge().worlds(small_csbm, np.random.default_rng(0))
    releases = [target.fit(pair.world(b), torch.Generator().manual_seed(i)) for i, b in enumerate([0, 1] * 3)]
    exact = [ExactRows().score(r, pair) for r in releases]
    lrt = MechanismLRT().score_batch(releases, pair)
    assert exact == pytest.approx(lrt, rel=1e-9, abs=1e-9)


def test_exact_rows_separates_a_noise_free_fallback(csbm):
    """IsolatedFallback releases an isolated node's row exact: the removal pair isolates a leaf."""
    target = user("isolated_fallback.py:IsolatedFallback")
    pair = IsolatingEdge().worlds(csbm, np.random.default_rng(0))
    scores = {b: [ExactRows().score(target.fit(pair.world(b), torch.Generator().manual_seed(10 * i + b)), pair)
                  for i in range(5)] for b in (0, 1)}
    assert max(scores[0]) < -1e5 < 0 <= min(scores[1]) + 1e5
    check = _check(target, pair)
    assert [t.world for t in _failed(check, "noise-free")] == [0]     # only the world with the isolated leaf
