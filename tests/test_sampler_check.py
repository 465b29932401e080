"""The sampler checks (``audit/stats/sampler_check.py``) on simulated samplers: Poisson passes; fixed-size
batches fail the variance check; shuffled batches (each example once per epoch) fail the
independence check; a declared q the sampler does not follow is said."""
import numpy as np
import pytest
import torch

from audit.stats.sampler_check import check_sampler
from targets.common.trace import DPSGDTrace, TraceStep

N, Q, T, TRIALS = 400, 0.5, 4, 600


def poisson(rng, q=Q):
    return rng.random((TRIALS, T)) < q, rng.binomial(N, q, (TRIALS, T))


def shuffled(rng):
    """Batches of size qN from a fresh permutation per epoch of 1/q steps: the canary is in exactly
    one step of each epoch."""
    per_epoch = round(1 / Q)
    first = rng.integers(0, per_epoch, (TRIALS, T // per_epoch))
    inc = np.zeros((TRIALS, T), bool)
    for e in range(T // per_epoch):
        inc[np.arange(TRIALS), e * per_epoch + first[:, e]] = True
    return inc, np.full((TRIALS, T), round(Q * N))


def test_poisson_passes_and_its_rate_is_covered():
    passed = covered = 0
    for seed in range(20):
        c = check_sampler(*poisson(np.random.default_rng(seed)), population=N, declared_q=Q)
        passed += c.ok
        covered += c.q_interval[0] < Q < c.q_interval[1]
    assert passed >= 19 and covered >= 19


def test_fixed_size_batches_fail_the_variance_check():
    inc, _ = poisson(np.random.default_rng(0))
    c = check_sampler(inc, np.full((TRIALS, T), round(Q * N)), population=N)
    assert not c.ok and any("batch-size variance" in f for f in c.failures)


def test_shuffled_batches_fail_the_independence_check():
    c = check_sampler(*shuffled(np.random.default_rng(0)), population=N)
    assert any("not independent" in f for f in c.failures)
    assert any("batch-size variance" in f for f in c.failures)


def test_a_wrong_declared_q_is_said_not_trusted():
    c = check_sampler(*poisson(np.random.default_rng(0)), population=N, declared_q=Q / 2)
    assert c.ok and c.notes and "outside the measured interval" in c.notes[0]


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="differ in shape"):
        check_sampler(np.zeros((5, 3), bool), np.zeros((5, 2)), population=10)


def test_trace_records_inclusion_and_batch_size():
    steps = [TraceStep(noisy=torch.zeros(2), central=torch.arange(k), canary_in=b) for k, b in ((3, True), (5, False))]
    assert DPSGDTrace(steps=steps).sampling_record() == {"canary_in": [True, False], "batch_size": [3, 5]}


def test_poisson_near_q_one_passes_on_few_releases():
    """GAP's catalogue loader: B = N − 1 of N = 180 (q = 0.9944), 16 steps, 100 releases. A plug-in q̂ makes
    Nq̂(1 − q̂) off by tens of percent there; the check tests against every q in the interval instead."""
    q, n = 179 / 180, 180
    passed = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        c = check_sampler(rng.random((100, 16)) < q, rng.binomial(n, q, (100, 16)), population=n, declared_q=q)
        passed += not any("batch-size variance" in f for f in c.failures)
    assert passed >= 38
    fixed = check_sampler(np.random.default_rng(0).random((100, 16)) < q, np.full((100, 16), 179), population=n)
    assert any("batch-size variance" in f for f in fixed.failures)
