"""The declared-model check streamed (issue #35): releases read ``chunk`` at a time into running
moments give the same verdicts and statistics as the check that holds every residual."""
from __future__ import annotations

import numpy as np
import pytest

from audit.declared_model import declared
from audit.declared_model import declared_moments as moments
from canaries.base import make as make_canary
from targets.base import build, replace_config


def pinned(name: str, graph, **params):
    t = build(name, **params)
    pins = t.public_params(graph)
    return type(t)(replace_config(t.config, **pins)) if pins else t


@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_running_moments_equal_the_two_pass_sums(offset):
    """Pébay's one-pass moments against the stacked residuals' sums, also far from zero (where
    raw power sums would cancel) and with the KS subsample drawn before any release."""
    rng = np.random.default_rng(5)
    R = offset + rng.laplace(size=(7, 50, 600)) * np.linspace(0.5, 2.0, 600)
    where = moments.ks_positions(R.size, np.random.default_rng(1))
    assert where is not None and where.size == moments.KS_SUBSAMPLE
    run = moments.ResidualMoments(7, where)
    for r in R:
        run.add(r)
    a, b = run.summary(), moments.summarise(R, where)
    assert (a.n, a.rows, a.cols) == (b.n, b.rows, b.cols) == (7, 50, 600)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12, atol=1e-9)
    for field in ("sum_c2", "sum_c4", "sum_r2", "colsum_c2", "rowsum_c2"):
        assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-9), field
    np.testing.assert_allclose(a.ks, b.ks, rtol=1e-9, atol=1e-9)


def test_small_residuals_keep_every_entry_for_ks():
    R = np.random.default_rng(2).normal(size=(4, 3, 5))
    run = moments.ResidualMoments(4, moments.ks_positions(R.size, np.random.default_rng(0)))
    for r in R:
        run.add(r)
    np.testing.assert_allclose(run.summary().ks, (R - R.mean(0)).ravel(), atol=1e-12)


def _same(streamed: declared.DeclaredCheck, batch: declared.DeclaredCheck) -> None:
    assert (streamed.ok, streamed.reason, streamed.tests, streamed.leaks, streamed.deviations) == \
        (batch.ok, batch.reason, batch.tests, batch.leaks, batch.deviations)
    assert [(s.status, s.reason.split(" (")[0]) for s in streamed.steps] == \
        [(s.status, s.reason.split(" (")[0]) for s in batch.steps]
    for s, t in zip(streamed.steps, batch.steps):
        np.testing.assert_allclose(s.measured_std, t.measured_std, rtol=1e-9)
        assert [(x.name, x.world, x.passed) for x in s.tests] == [(x.name, x.world, x.passed) for x in t.tests]
        for x, y in zip(s.tests, t.tests):
            if x.p is None:
                assert y.p is None
            else:
                assert x.p == pytest.approx(y.p, rel=1e-6, abs=1e-12), (x.name, x.detail, y.detail)


class _Counting:
    """Wraps a target: records the size of every fit_batch call."""

    def __init__(self, target):
        self.target, self.sizes = target, []

    def __getattr__(self, name):
        return getattr(self.target, name)

    def fit_batch(self, graph, rngs):
        self.sizes.append(len(rngs))
        return self.target.fit_batch(graph, rngs)


@pytest.mark.parametrize("name,params", [
    ("gap", {"hops": 2}),  # two Gaussian steps: the shared-steps co-moment
    ("gaussian", {}),
    ("tests.deviants:SmallNoise", {}),
    ("tests.deviants:LaplaceNoise", {}),
    ("tests.deviants:ReusedNoise", {}),
    ("tests.deviants:RowBroadcastNoise", {}),
    ("tests.deviants:SelfLoopMean", {}),
    ("tests.deviants:PartlyReusedNoise", {}),
    ("caribou", {"hops": 2}),  # no law declared: freshness only
    ("tests.deviants:TraceTarget", {"law": "sml"}),  # trace steps: their rows kept per release
    ("tests.deviants:TraceTarget", {"applied_scale": 0.8}),
])
def test_streamed_check_equals_the_batch_check(csbm, name, params):
    target = pinned(name, csbm, **params)
    pair = make_canary("random-edge").worlds(csbm, np.random.default_rng(0), target)
    counting = _Counting(target)
    streamed = declared.check_declared(counting, pair, seed=3, n=8, attack="mechanism-lrt", graph=csbm, chunk=3)
    batch = declared.check_declared(target, pair, seed=3, n=8, attack="mechanism-lrt", graph=csbm, stream=False)
    assert counting.sizes == [3, 3, 2, 3, 3, 2]  # never more than `chunk` releases at once
    _same(streamed, batch)
    if name.startswith("tests.deviants") and params != {"law": "sml"}:
        assert not streamed.ok
    if name == "gap":
        assert streamed.ok and any(t.name == "shared-steps" for s in streamed.steps for t in s.tests)
