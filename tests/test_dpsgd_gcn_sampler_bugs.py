"""dpsgd-gcn's ``shuffled-batches`` bug (issue #45, item 4) seen by the sampler checks: it fails the
checks of ``audit/stats/sampler_check.py`` on the trace's sampling record, where the correct Poisson sampler
passes them."""
import numpy as np
import pytest
import torch

from audit.stats.sampler_check import check_sampler
from targets.base import build


def _records(target, graph, runs: int):
    d = target.dimension(graph)
    releases = target.fit_batch(graph, [torch.Generator().manual_seed(s) for s in range(runs)],
                                canary_gradient=torch.ones(d) / d ** 0.5)
    recs = [r.trace.sampling_record() for r in releases]
    return np.array([r["canary_in"] for r in recs]), np.array([r["batch_size"] for r in recs]), releases


@pytest.mark.slow
def test_shuffled_batches_fail_the_sampler_checks_and_poisson_passes(csbm):
    population = int(csbm.train_mask.sum())
    checks = {}
    for bug in (None, "shuffled-batches"):
        t = build("dpsgd-gcn", epsilon=4.0, sampling_rate=0.5, steps=4, bug=bug)
        inc, sizes, _ = _records(t, csbm, 120)
        checks[bug] = check_sampler(inc, sizes, population=population, declared_q=0.5)
    assert checks[None].ok, checks[None].failures
    failed = " ".join(checks["shuffled-batches"].failures)
    assert "batch-size variance" in failed and "not independent" in failed
