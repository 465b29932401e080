"""dpsgd-gcn's ``normalised-by-batch-size`` bug (issue #45, item 4; Opacus #571) and the two trace scores
made for the sampler bugs: ``realised-mean-lrt`` (attacks/realised_mean.py) and ``gradient-max``
(attacks/step_max.py), each a default candidate only where its probe check says so."""
import types

import numpy as np
import pytest
import torch

from attacks.realised_mean import MARGIN, RealisedMeanLRT, probe_margin
from attacks.step_max import StepMax, fixed_batches
from targets.base import build

Q = 0.1


def _dirac(target, graph):
    d = target.dimension(graph)
    gc = torch.zeros(d)
    gc[d - 1] = 1.0
    return gc


def _pair(gc, q):
    """The record a dirac-gradient pair hands the attacks (g1 carries the canary)."""
    return types.SimpleNamespace(g1=types.SimpleNamespace(canary_gradient=gc), info={"sampling_rate": q})


def test_the_bug_releases_the_noisy_sum_over_the_realised_batch(csbm):
    """Same seed, same batches and noise: the bug's release is its noisy sum times E/B, B the realised
    batch with the canary counted when in; without the canary, B is the rest of the batch."""
    runs = {}
    for bug in (None, "normalised-by-batch-size"):
        t = build("dpsgd-gcn", epsilon=2.0, sampling_rate=0.5, steps=3, noise_multiplier=1.0, bug=bug)
        gc = _dirac(t, csbm)
        runs[bug] = [t.fit(csbm, torch.Generator().manual_seed(5), canary_gradient=g).trace for g in (None, gc)]
    expected = 0.5 * int(csbm.train_mask.sum())
    for world in (0, 1):
        for good, bad in zip(runs[None][world], runs["normalised-by-batch-size"][world]):
            realised = good.central.numel() + (1 if good.canary_in else 0)
            assert torch.equal(good.central, bad.central)
            noise = good.noisy - good.clean  # the same draw in both runs (the parameters differ after step 0)
            torch.testing.assert_close(bad.noisy, (bad.clean + noise) * (expected / realised), rtol=1e-5, atol=1e-4)
    assert any(s.canary_in for s in runs[None][1]) and not all(s.canary_in for s in runs[None][1])


def test_realised_mean_lrt_is_a_candidate_only_on_the_bug(csbm):
    rng = torch.Generator()
    bad = build("dpsgd-gcn", epsilon=2.0, noise_multiplier=1.0, sampling_rate=Q, steps=10, bug="normalised-by-batch-size")
    good = build("dpsgd-gcn", epsilon=2.0, noise_multiplier=1.0, sampling_rate=Q, steps=10)
    full = build("dpsgd-gcn", epsilon=2.0, noise_multiplier=1.0, steps=10, bug="normalised-by-batch-size")  # q = 1: B = E in a probe
    attack = RealisedMeanLRT()
    assert attack.applies_to(bad.fit(csbm, rng.manual_seed(1))) and attack.pointed_by(bad.fit(csbm, rng.manual_seed(1)))
    assert probe_margin(good.fit(csbm, rng.manual_seed(1)).trace) < -MARGIN
    assert not attack.applies_to(good.fit(csbm, rng.manual_seed(1)))
    assert probe_margin(full.fit(csbm, rng.manual_seed(1)).trace) == pytest.approx(0.0, abs=1e-6)


def _aucs(target, graph, attack, runs):
    gc = _dirac(target, graph)
    gens = lambda off: [torch.Generator().manual_seed(off + s) for s in range(runs)]  # noqa: E731
    out = [attack.score(r, _pair(gc, Q)) for r in target.fit_batch(graph, gens(0))]
    inn = [attack.score(r, _pair(gc, Q)) for r in target.fit_batch(graph, gens(10_000), canary_gradient=gc)]
    o, i = np.array(out), np.array(inn)
    return float((i[:, None] > o[None, :]).mean())


@pytest.mark.slow
def test_realised_mean_lrt_separates_the_worlds_of_the_bug_only(csbm):
    """Power where it should have it, and the size of a weak score on the correct target (its AUC near
    the plain canary's; the certificate holds its threshold out either way)."""
    bad = build("dpsgd-gcn", epsilon=2.0, sampling_rate=Q, steps=20, bug="normalised-by-batch-size")
    good = build("dpsgd-gcn", epsilon=2.0, sampling_rate=Q, steps=20)
    attack = RealisedMeanLRT()
    assert _aucs(bad, csbm, attack, 80) > 0.75
    assert _aucs(good, csbm, attack, 80) < 0.72


def test_gradient_max_is_a_candidate_only_on_shuffled_batches(csbm):
    rng = torch.Generator()
    shuffled = build("dpsgd-gcn", epsilon=2.0, noise_multiplier=1.0, sampling_rate=Q, steps=10, bug="shuffled-batches")
    poisson = build("dpsgd-gcn", epsilon=2.0, noise_multiplier=1.0, sampling_rate=Q, steps=10)
    assert "shuffled batches" in fixed_batches(shuffled.fit(csbm, rng.manual_seed(2)).trace)
    assert not any(StepMax().applies_to(poisson.fit(csbm, rng.manual_seed(s))) for s in range(10))


def test_gradient_max_sums_each_epochs_largest_projection(csbm):
    t = build("dpsgd-gcn", epsilon=2.0, noise_multiplier=1.0, sampling_rate=0.25, steps=10, bug="shuffled-batches")
    gc = 2.0 * _dirac(t, csbm)
    release = t.fit(csbm, torch.Generator().manual_seed(3), canary_gradient=gc)
    o = np.array([float(s.noisy[-1]) / 2.0 for s in release.trace])
    want = o[0:4].max() + o[4:8].max() + o[8:10].max()
    assert StepMax().score(release, _pair(gc, 0.25)) == pytest.approx(want)
    # the canary is in exactly one step of each epoch of 4
    inc = np.array([bool(s.canary_in) for s in release.trace])
    assert inc[0:4].sum() == 1 and inc[4:8].sum() == 1
