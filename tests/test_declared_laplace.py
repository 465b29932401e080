"""The declared check's Laplace battery (audit/declared_model/declared_laplace.py, issue #44 item 2): a step declaring
a Laplace law is tested (shape, scale, independence across entries, rows and steps) and a correct one
passes; each deviant of tests/laplace_deviants.py fails by its test. Rates: benchmarks/pure_dp.md."""
from __future__ import annotations

import numpy as np
import pytest

from audit.declared_model import declared
from canaries.edge import ExplicitEdge
from graphs.ops import degrees
from targets.base import build

DEVIANTS = [
    ("SmallScale", "scale", "noise std differs from the declared"),
    ("GaussianNoise", "laplace-kurtosis", "noise is not the declared Laplace law"),
    ("RowBroadcast", "rows-shared", "noise shared across rows"),
    ("EntryBroadcast", "cols-shared", "noise shared across columns"),
    ("SharedSteps", "shared-steps", "noise shared or correlated across steps"),
]


@pytest.fixture(scope="module")
def pair(csbm):
    top = int(degrees(csbm).argmax())
    nbrs = set(csbm.edge_index[1][csbm.edge_index[0] == top].tolist())
    v = next(i for i in range(csbm.num_nodes) if i != top and i not in nbrs)
    return ExplicitEdge(top, v).worlds(csbm, np.random.default_rng(0))


def _check(name, pair, seed, n=8, alpha=1e-3):
    return declared.check_declared(build(f"tests.laplace_deviants:{name}"), pair, seed=seed, n=n, alpha=alpha)


@pytest.mark.parametrize("name", ["HonestLaplace", "TwoSteps"])
def test_a_correct_laplace_step_is_tested_and_passes(pair, name):
    check = _check(name, pair, seed=0)
    assert check.ok and check.allows_declared_model, check.reason
    assert all(s.law == "laplace" and s.status == "pass" for s in check.steps)
    names = {t.name for s in check.steps for t in s.tests}
    assert {"scale", "entry-mean", "global-mean", "rows-shared", "cols-shared", "laplace-shape", "laplace-kurtosis",
            "world-scale", "identical"} <= names
    assert ("shared-steps" in names) == (name == "TwoSteps")
    assert check.steps[0].measured_std[0] == pytest.approx(check.steps[0].declared_std, rel=0.05)


@pytest.mark.parametrize("name,test,fragment", DEVIANTS, ids=[d[0] for d in DEVIANTS])
@pytest.mark.parametrize("seed", [0, 1])
def test_each_laplace_deviant_is_caught_by_its_test(pair, name, test, fragment, seed):
    check = _check(name, pair, seed)
    assert not check.ok and fragment in check.reason, check.reason
    assert test in {t.name for s in check.steps for t in s.failures()}


def test_the_false_alarm_rate_is_within_alpha(pair):
    """At alpha = 0.2 the correct Laplace mechanism fails on at most 25 of 80 seeds (a check at rate 0.2
    fails this w.p. ≤ 0.01, one at rate 0.4 w.p. 0.933: tests/size.py)."""
    from size import count_failures

    seeds = range(2000, 2080)
    failed = {s for s in seeds if not _check("HonestLaplace", pair, s, alpha=0.2).ok}
    count_failures(lambda r: seeds[r] in failed, len(seeds), 0.2, "the Laplace check failed the correct mechanism")
