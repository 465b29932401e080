"""cp at one false-positive share fixed before any trial (:func:`audit.stats.estimators.cp_every_trial.cp_at_rank`),
and the share read off a pair's declared law (:func:`audit.stats.pair_prior.prior_fraction`): what the default
certifies with where it chose a pair by its exact ε (HeterPoisson at q = 0.5, issue #45).

Size checks as in ``tests/size.py``: on randomized response at ε = 1 (tied scores, the share on the trade-off
line, so the bound sits near the truth), on the Gaussian pair, and on two identical worlds (true ε 0). Their
mutants: the bound × 1.1, and the share picked on the reported scores (the largest bound over the grid of
shares, a selection the whole-β test does not pay for).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import ks_2samp

from audit.stats import estimators as est
from audit.stats import pair_prior
from audit.stats.estimators.known import gaussian, randomized_response
from mutants import inflate_bound
from size import SizeCheck, count_exceedances, stable_seed

RR_SHARE = 1.0 / (1.0 + math.e)  # randomized response at ε = 1: P(OUT says 1), a point on its trade-off line
CHECKS = {
    "rank-rr": SizeCheck("cp", randomized_response, 5000, 1.0, reps=80, options={"fp_fraction": RR_SHARE}),
    "rank-gaussian": SizeCheck("cp", gaussian, 5000, 1.0, reps=80, options={"fp_fraction": 0.05}),
}


def identical(rng, n, eps, delta):
    """Two worlds of one law: the true ε is 0 at every δ."""
    return rng.standard_normal(n), rng.standard_normal(n), 0.0


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_the_bound_at_an_a_priori_share_stays_within_its_size(name):
    CHECKS[name].run(name)


def test_the_bound_at_an_a_priori_share_has_power():
    """Randomized response at ε = 1, 5,000 trials a world, the share on the line: near the truth."""
    rng = np.random.default_rng(stable_seed("rank-power"))
    bounds = [est.estimate(*randomized_response(rng, 5000, 1.0)[:2], delta=1e-5, method="cp", confidence=0.8,
                           fp_fraction=RR_SHARE, seed=r).eps_lb for r in range(20)]
    assert np.median(bounds) > 0.85  # true ε 1.0
    wide = [est.estimate(*randomized_response(rng, 5000, 1.0)[:2], delta=1e-5, method="cp", confidence=0.8,
                         seed=r).eps_lb for r in range(20)]
    assert np.median(bounds) >= np.median(wide) - 0.02  # at least what the Bonferroni grid gives


def test_an_inflated_bound_fails_the_size_check(monkeypatch):
    """On the line (randomized response): the Gaussian pair's best point at δ = 1e-5 lies far in the tail, where
    5,000 trials leave the bound well below the truth, so its check cannot see a 10 % inflation."""
    inflate_bound(monkeypatch, "cp", 1.1)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        CHECKS["rank-rr"].run("rank-rr")


def _picked_on_the_data(out, inn, delta, beta):
    """The mutant: the share chosen on the reported scores, each share's test still at the whole β."""
    return max(est.estimate(out, inn, delta=delta, method="cp", confidence=1 - beta, fp_fraction=f).eps_lb
               for f in pair_prior.FRACTIONS[::4])


def test_identical_worlds_certify_nothing_and_a_share_picked_on_the_data_does():
    rng = np.random.default_rng(stable_seed("rank-identical"))

    def honest(r):
        out, inn, truth = identical(rng, 400, 0.0, 1e-5)
        return est.estimate(out, inn, delta=1e-5, method="cp", confidence=0.8, fp_fraction=0.2, seed=r).eps_lb, truth

    count_exceedances(honest, 80, 0.2, "an a-priori share on identical worlds")

    def picked(r):
        out, inn, truth = identical(rng, 400, 0.0, 1e-5)
        return _picked_on_the_data(out, inn, 1e-5, 0.2), truth

    with pytest.raises(AssertionError, match="exceeded the true ε"):
        count_exceedances(picked, 80, 0.2, "a share picked on the data")


def test_the_share_must_be_a_fraction():
    with pytest.raises(ValueError, match="false-positive fraction"):
        est.estimate(np.zeros(10), np.ones(10), delta=1e-5, method="cp", fp_fraction=1.0)



def test_the_rank_threshold_leaves_exactly_k_false_positives_even_on_ties():
    """:func:`at_rank` (shared by cp_at_rank and the whole-node fit at the share): k = ⌊fraction·n_out⌋ OUT scores
    above the threshold, tied scores split at random, and cp_at_rank is mix_eps at those counts."""
    from audit.stats.estimators import cp_every_trial as cp

    rng = np.random.default_rng(3)
    for out, inn in [(rng.standard_normal(997), rng.standard_normal(1003) + 1.0),
                     (rng.integers(0, 2, 1000).astype(float), rng.integers(0, 2, 1000).astype(float))]:
        for fraction in (0.0, 0.05, 0.37):
            r = cp.at_rank(out, inn, fraction, seed=1)
            assert (r.n_out, r.n_in, r.k) == (out.size, inn.size, math.floor(fraction * out.size))
            assert r.fp == r.k and 0 <= r.fn <= inn.size
            eps, threshold, fp, fn = cp.cp_at_rank(out, inn, 1e-5, 0.05, fraction, seed=1)
            assert (threshold, fp, fn) == (r.threshold, r.fp, r.fn)
            assert eps == pytest.approx(float(cp.mix_eps(np.array([r.n_in - r.fn]), np.array([r.k]), r.n_out,
                                                         r.n_in, 1e-5, 0.05)[0]))
    with pytest.raises(ValueError, match="false-positive fraction"):
        cp.at_rank(np.zeros(5), np.ones(5), -0.1)

# ---------------------------------------------------------------------------------------------------------------
# the declared law of the exact loss on a pair, and the share it fixes
# ---------------------------------------------------------------------------------------------------------------
NODE = {"noise": "gaussian", "noise_std": 15.93, "sampling_rate": 0.5, "magnitude": 0.5, "node": 85,
        "node_training_out_degree": 2, "node_keep_probability": 0.5, "node_scale_recorded": True}


def test_the_declared_law_is_the_exact_loss_given_the_node_scales():
    """Given k_t the loss is N(±m/2, m): its mean is ±E[m]/2 and E[e^{-L}] = 1 under IN (an LLR)."""
    from audit.stats import node_curve

    out, inn = pair_prior.law_scores(NODE, 3, n=400_000)
    values, probs, _ = node_curve.scale_law(0.5, 2, 0.5)
    mean_m = 3 * (0.5 / 15.93) ** 2 * float((probs * values ** 2).sum() / probs.sum())
    tolerance = 5 * math.sqrt(mean_m / 400_000)
    assert abs(inn.mean() - mean_m / 2) < tolerance and abs(out.mean() + mean_m / 2) < tolerance
    assert np.mean(np.exp(-inn)) == pytest.approx(1.0, abs=2e-3) and np.mean(np.exp(out)) == pytest.approx(1.0, abs=2e-3)
    fixed = {k: v for k, v in NODE.items() if not k.startswith("node")}
    out, inn = pair_prior.law_scores(fixed, 3, n=400_000)  # a fixed vector, each step with probability q
    assert np.mean(np.exp(-inn)) == pytest.approx(1.0, abs=2e-3) and out.mean() < 0 < inn.mean()
    assert pair_prior.law_scores({**NODE, "noise": "laplace"}, 3) is None
    assert pair_prior.law_scores({**NODE, "magnitude": None}, 3) is None


def test_the_share_is_read_off_the_record_and_expects_a_bound():
    found = pair_prior.prior_fraction(NODE, 3, 7000, 7000, 0.003305, 0.95)
    assert found is not None
    share, expected = found
    assert 0 < share <= 0.5 and expected > 0
    assert pair_prior.prior_fraction({**NODE, "noise": "sml"}, 3, 7000, 7000, 0.003305, 0.95) is None


@pytest.mark.slow
def test_the_declared_law_is_the_law_of_the_trial_scores(tmp_path):
    """HeterPoisson at q = 0.5, the whole node's pair: gradient-lrt's scores on 3,000 trials against draws of
    pair_prior's declared law (two-sample KS in each world); a law with the canary's norm × 1.5 is rejected."""
    from audit.play import game
    from audit.records.store import Store

    spec = game.AuditSpec(target="heterpoisson", epsilon=2.0, seed=0, canary="dirac-node", attack="gradient-lrt",
                          level="trace", trials=3000, estimator="cp",
                          params={"hidden": "32", "steps": "3", "sampling_rate": "0.5", "noise": "gaussian"})
    r = game.run_audit(spec, out=tmp_path, progress=False)
    with Store(r.store) as store:
        out_s, in_s = game.worlds(store.trials(r.key, limit=3000))
    out_d, in_d = pair_prior.law_scores(r.canary, 3, n=50_000)
    assert ks_2samp(out_s, out_d).pvalue > 1e-3 and ks_2samp(in_s, in_d).pvalue > 1e-3
    wrong = pair_prior.law_scores({**r.canary, "magnitude": 1.5 * r.canary["magnitude"]}, 3, n=50_000)
    assert min(ks_2samp(out_s, wrong[0]).pvalue, ks_2samp(in_s, wrong[1]).pvalue) < 1e-3


def test_a_node_whose_scales_no_step_records_is_a_fixed_gradient_on_its_own_coin():
    """DPSGD-GCN takes no whole-node canary: dirac-node is C·e_j on z's Poisson coin, which no step reveals, so its
    exact ε is the subsampled Gaussian's (the k-revealed figure, 4.61 on the opposed-rows twin, exceeded its claim
    of 2) and the law of the exact loss is the Poisson mixture's."""
    from audit.stats.estimators import subsampled_curve

    hidden = {**NODE, "node_scale_recorded": False}
    assert pair_prior.exact_from_record(hidden, 3, 0.003305) == pytest.approx(
        subsampled_curve.epsilon(15.93 / 0.5, 0.5, 3, 0.003305))
    assert pair_prior.exact_from_record(NODE, 3, 0.003305) > pair_prior.exact_from_record(hidden, 3, 0.003305)
    fixed = {k: v for k, v in NODE.items() if not k.startswith("node")}
    assert np.allclose(pair_prior.law_scores(hidden, 3, n=1000)[1], pair_prior.law_scores(fixed, 3, n=1000)[1])


def test_only_a_target_that_records_the_scales_says_so(make_csbm):
    from canaries.gradient import DiracNode
    from targets.dpsgd_gcn import DPSGDGCN
    from targets.heterpoisson import HeterPoisson

    graph = make_csbm(n=120, seed=0)
    for target, recorded in ((HeterPoisson(epsilon=2.0, hidden=8, steps=3, sampling_rate=0.5, noise="gaussian"), True),
                             (DPSGDGCN(epsilon=2.0, sampling_rate=0.5), False)):
        pair = DiracNode(probe=False).worlds(graph, np.random.default_rng(0), target)
        assert pair.recorded("node_scale_recorded") is recorded
        assert ("k_t recorded" in pair.recorded("inclusion")) is recorded
