"""The subsampled-Gaussian family fit in the default (issue #45, items 1-3 wired): where the portfolio
may use it, the sampler measured before the certificate, a failed check refusing it, the gradient score
that stops reading the rest of the batch under a sampler that is not Poisson, and the report's
direction (the optimistic PLD figure, which the pessimistic-PLD mutant breaks)."""
import numpy as np
import pytest
import torch

from attacks.gradient import FullVectorGradientCanary
from audit.stats import family_fit
from audit.plan import portfolio, portfolio_choice, portfolio_validity
from audit.stats.estimators import known
from audit.stats.estimators import subsampled_fit as fit
from audit.stats.sampler_check import check_sampler
from canaries.base import CanaryPair
from mutants import pessimistic_report
from targets.base import Claim, Level, Release, build
from targets.common.trace import DPSGDTrace, TraceStep

_PASSED = {"checked": True, "ok": True, "deviations": [], "steps": [{"status": "pass", "law": "gaussian"}]}
_RECORD = {"canary": "dirac-gradient", "noise": "gaussian", "noise_std": 2.0, "sampling_rate": 0.5}


def _claim(delta=1e-5):
    return Claim(epsilon=2.0, delta=delta, accountant="test", unit="node")


@pytest.mark.parametrize("change, valid", [
    ({}, True),
    ({"node": 3}, False),                     # a whole node: k_t drawn with the batch
    ({"sampling_rate": 1.0}, False),          # no sampling: gdp's case
    ({"noise": "sml"}, False),                # not the Gaussian family
])
def test_family_valid_only_on_a_sampled_gaussian_gradient_canary(change, valid):
    got = portfolio_validity.family_valid(_claim(), Level.TRACE, _PASSED, {**_RECORD, **change})
    assert bool(got) is valid


def test_family_refused_at_delta_zero_off_the_trace_and_on_a_failed_check():
    assert portfolio_validity.family_valid(_claim(0.0), Level.TRACE, _PASSED, _RECORD) is None
    assert portfolio_validity.family_valid(_claim(), Level.MECHANISM, _PASSED, _RECORD) is None
    failed = {**_PASSED, "ok": False, "steps": [{"status": "fail", "law": "gaussian", "tests": []}]}
    assert portfolio_validity.family_valid(_claim(), Level.TRACE, failed, _RECORD) is None


def test_the_estimator_choice_goes_to_the_fit_where_valid_and_not_below_gdp():
    """cp's held-out bound on a pilot does not move the choice (a user's DP-SGD trainer at half its std: a pilot's cp
    0.076 against the fit's 0.008 sent the certificate to sequential cp, which stopped at 424 trials for futility,
    where the fit certifies 1.06-1.36 > 1 at its budget); a valid gdp that beats the fit's pilot bound does."""
    row = {"level": Level.TRACE, "attack": "gradient-lrt", "canary": "dirac-gradient", "heldout_eps_lb": 0.0,
           "heldout_gdp_eps_lb": 0.0, "gdp_valid": None, "family_valid": "yes", "heldout_family_eps_lb": 0.0,
           "heldout_auc": 0.6}
    winner = portfolio.Candidate(Level.TRACE, "gradient-lrt", "dirac-gradient")
    spec = type("S", (), {"estimator": "auto"})()
    assert portfolio_choice.estimator(spec, [row], winner)[0] == portfolio.FAMILY
    assert portfolio_choice.estimator(spec, [{**row, "heldout_eps_lb": 0.3}], winner)[0] == portfolio.FAMILY
    gdp = {**row, "gdp_valid": "the claim is μ-GDP", "heldout_gdp_eps_lb": 0.3}
    assert portfolio_choice.estimator(spec, [gdp], winner)[0] == "gdp"
    assert portfolio_choice.estimator(spec, [{**gdp, "heldout_family_eps_lb": 0.4}], winner)[0] == portfolio.FAMILY
    assert portfolio_choice.estimator(spec, [{**row, "family_valid": None}], winner)[0] == "auto"
    assert portfolio_choice.rank({**row, "heldout_family_eps_lb": 0.7}) == (0.7, 0.6)
    assert portfolio_choice.rank({**row, "heldout_family_eps_lb": 0.7, "family_valid": None}) == (0.0, 0.6)


def _sampler(inclusions, sizes, population):
    check = check_sampler(inclusions, sizes, population=population, declared_q=0.5, q_level=0.005)
    return family_fit.Sampler(steps=inclusions.shape[1], declared_q=0.5, population=population, check=check)


@pytest.mark.slow
def test_certify_on_an_exact_subsampled_trace_with_cp_beside():
    """q measured (a CP interval over two lattice cells), the fit's bound positive and above cp's (75 s
    on the loaded 2-core machine: the PLDs of three sampling rates)."""
    rng = np.random.default_rng(3)
    out, inn, _ = known.subsampled_gaussian(rng, 4000, 0.5, 3, 3.0)
    inc = rng.random((200_000, 3)) < 0.5   # many releases: q's interval spans two cells (a fast test)
    sizes = rng.binomial(400, 0.5, size=inc.shape)
    est, cp = family_fit.certify(out, inn, _sampler(inc, sizes, 400), delta=1e-5, confidence=0.95, seed=0)
    assert est.method == fit.METHOD and est.assumption == fit.ASSUMPTION
    assert est.counts["q"][0] < 0.5 < est.counts["q"][1]   # q measured, not declared
    assert 0 < est.eps_lb and cp.method == "cp" and est.eps_lb > cp.eps_lb


def test_certify_refuses_a_sampler_that_failed_its_checks():
    rng = np.random.default_rng(4)
    out, inn, inc = known.subsampled_gaussian(rng, 600, 0.5, 3, 1.2)
    sampler = _sampler(inc, np.full(inc.shape, 200), 400)   # fixed-size batches: no variance
    assert not sampler.check.ok
    with pytest.raises(ValueError, match="refused: batch-size variance"):
        family_fit.certify(out, inn, sampler, delta=1e-5, confidence=0.95, seed=0)


def _reported_optimistic(seed: int) -> bool:
    """The fit reports ε(σ̂) from the optimistic PLD: strictly below the pessimistic figure at σ̂."""
    out, inn, _ = known.subsampled_gaussian(np.random.default_rng(seed), 3000, 0.5, 3, 3.0)
    e = fit.fit(out, inn, delta=1e-5, steps=3, q=0.5)
    assert e.counts["sigma_hat"] is not None
    return e.eps_lb < e.counts["pessimistic_eps"]


def test_the_report_is_the_optimistic_figure():
    assert _reported_optimistic(5)


def test_the_pessimistic_report_mutant_fails_the_direction_check(monkeypatch):
    pessimistic_report(monkeypatch)
    assert not _reported_optimistic(5)


def _release(noisy, clean, canary_in):
    trace = DPSGDTrace(noise="gaussian", noise_std=1.0, clip_norm=1.0, sampling_rate=0.5)
    for n, c, i in zip(noisy, clean, canary_in):
        trace.steps.append(TraceStep(noisy=n, central=torch.arange(3), canary_in=i, clean=c))
    return Release(trace=trace)


def test_gradient_lrt_stops_reading_the_rest_where_the_sampler_is_not_poisson():
    gc = torch.tensor([0.0, 1.0, 0.0])
    noisy = [torch.tensor([0.3, 1.4, -0.2]), torch.tensor([0.1, -0.5, 0.9])]
    clean = [torch.tensor([0.2, 1.6, 0.0]), torch.tensor([0.0, 0.4, 0.0])]  # the rest: 0.6 and 0.4 on the canary
    g1 = type("G", (), {"canary_gradient": gc})()
    attack = FullVectorGradientCanary()
    poisson = CanaryPair(None, g1, dict(_RECORD, noise_std=1.0))
    shuffled = CanaryPair(None, g1, dict(_RECORD, noise_std=1.0, sampler="not poisson: batch-size variance"))
    release = _release(noisy, clean, [True, False])
    read, blind = attack.step_llrs(release, poisson), attack.step_llrs(release, shuffled)
    assert np.allclose(read, [(1.4 - 0.6) - 0.5, (-0.5 - 0.4) - 0.5])
    assert np.allclose(blind, [1.4 - 0.5, -0.5 - 0.5])
    # on a coordinate every other example leaves at exactly 0 the two scores agree
    zero_rest = _release(noisy, [torch.tensor([0.2, 1.0, 0.0]), torch.tensor([0.0, 0.0, 0.0])], [True, False])
    assert np.allclose(attack.step_llrs(zero_rest, poisson), attack.step_llrs(zero_rest, shuffled))


def test_measure_sampler_on_heterpoisson_passes_and_names_its_steps(csbm):
    from canaries import base as canaries

    target = build("heterpoisson", epsilon=2.0, hidden=8, steps=3, sampling_rate=0.5, noise="gaussian")
    pair = canaries.make("dirac-gradient").worlds(csbm, np.random.default_rng(0), target)
    got = family_fit.measure_sampler(target, pair, seed=0, confidence=0.95, releases=120)
    assert got.steps == 3 and got.check.trials == 120 and got.declared_q == 0.5
    assert got.check.ok, got.check.failures
    assert got.check.q_interval[0] < 0.5 < got.check.q_interval[1]


def test_the_played_pairs_exact_epsilon_is_the_subsampled_gaussian_pld(csbm):
    from audit.stats import pair_epsilon
    from audit.stats.estimators import subsampled_curve as curve
    from canaries import base as canaries

    target = build("heterpoisson", epsilon=2.0, hidden=8, steps=3, sampling_rate=0.5, noise="gaussian")
    pair = canaries.make("dirac-gradient").worlds(csbm, np.random.default_rng(0), target)
    delta = target.claim(csbm).delta
    sigma = pair.info["noise_std"] / float(pair.g1.canary_gradient.norm())
    got = pair_epsilon.of_run(target, pair, level=Level.TRACE, delta=delta, confidence=0.95, seed=0, declared_ok=True)
    assert got.value == pytest.approx(curve.epsilon(sigma, 0.5, 3, delta, pessimistic=False))
    assert got.value <= got.interval[1] == pytest.approx(curve.epsilon(sigma, 0.5, 3, delta, pessimistic=True))
    assert "not checked" in " ".join(got.caveats)   # no sampler check ran for this pair
    assert "PLD" in pair_epsilon.slack_line(2.0, got, 0.0)
    pair.info["node"] = 3   # a node whose k_t no step records rides its own coin: still this family
    assert pair_epsilon.of_run(target, pair, level=Level.TRACE, delta=delta, confidence=0.95, seed=0,
                               declared_ok=True).value == pytest.approx(got.value)
    pair.info["node_scale_recorded"] = True   # a whole node with k_t recorded: not this family (node_curve's,
    assert pair_epsilon.of_run(target, pair, level=Level.TRACE, delta=delta, confidence=0.95, seed=0,  # whose
                               declared_ok=True).value is None  # law this record does not state)


def _meter(budget, units=0.0, trials=0, probe=None):
    """The portfolio's meter after pilots that spent `units` and `trials` (its target is not read here)."""
    from audit.plan.portfolio import Meter

    meter = Meter(budget, target=None, t0=0.0, probe=lambda: probe)
    meter.units, meter.trials = units, trials
    return meter


def _trace_release(steps, accounted):
    trace = DPSGDTrace(noise="gaussian", noise_std=1.0, clip_norm=1.0, sampling_rate=0.5, accounted_steps=accounted)
    for _ in range(steps):
        trace.steps.append(TraceStep(noisy=torch.zeros(3), central=torch.arange(3), canary_in=True, clean=torch.zeros(3)))
    return Release(trace=trace)


def test_the_sampler_measurement_is_sized_from_what_is_left_and_charged():
    from audit.plan.budget import Budget

    meter = _meter(Budget(units=120.0), units=40.0)      # 80 left: a quarter is 20 units, 166 releases at 0.12
    n, why = meter.sampler_releases(0.12)
    assert why is None and n == int(family_fit.SAMPLER_SHARE * 80 / 0.12)
    assert meter.units == pytest.approx(40.0 + n * 0.12)
    rich = _meter(Budget(units=1e6))
    assert rich.sampler_releases(0.004) == (family_fit.SAMPLER_RELEASES, None)
    trials = _meter(Budget(trials=4000), trials=1000)
    n, _ = trials.sampler_releases(0.12)    # a trial budget counts releases as trials
    assert n == 750 and trials.trials == 1750


def test_the_fit_is_refused_as_budget_limited_where_the_smallest_measurement_does_not_fit():
    from audit.plan.budget import Budget

    meter = _meter(Budget(units=120.0), units=110.0, probe=_trace_release(16, 8))
    n, why = meter.sampler_releases(0.12)
    assert n == 0 and meter.units == 110.0
    assert why.startswith(f"budget-limited: measuring the sampler needs {family_fit.MIN_SAMPLER_RELEASES} releases")
    assert "10 units left" in why and "releases 16 steps, the accountant charged 8" in why


def test_the_accounting_check_reads_the_trace_length_against_the_accounted_steps():
    assert "releases 16 steps, the accountant charged 8" in family_fit.accounting_check(_trace_release(16, 8).trace)
    assert family_fit.accounting_check(_trace_release(8, 8).trace) is None
    assert family_fit.accounting_check(_trace_release(8, 0).trace) is None   # not declared: not read


def test_the_portfolio_table_says_the_fit_was_refused_as_budget_limited():
    record = {"budget": "120 work units", "pilot_stream": 1, "certification_trials": 8, "why": "-",
              "winner": {"attack": "gradient-lrt", "canary": "dirac-gradient", "level": "trace"}, "candidates": [],
              "estimator": "cp", "estimator_why": "budget-limited: measuring the sampler needs 100 releases"}
    assert "estimator: cp (budget-limited: measuring the sampler needs 100 releases)" in portfolio.render(record)
    assert "estimator:" not in portfolio.render({**record, "estimator": "auto", "estimator_why": "gdp: valid"})


def test_a_trace_that_does_not_record_the_canarys_inclusion_refuses_the_fit_instead_of_failing_the_run(small_csbm):
    """A user's own trace (tests/user_targets/poisson_sgd.py, one that reads the canary) need not record
    ``TraceStep.canary_in``: the sampler
    is then unmeasured, so the family fit is refused (cp certifies) and the gradient scores stop reading the rest of
    the batch, where before the whole default run stopped with a usage error at its first trace pilot."""
    from pathlib import Path

    from audit.play import estimation
    from audit.play.run_spec import AuditSpec
    from canaries import base as canaries
    from targets.api import load_file
    from targets.common.pair_law import PairLaw

    user = Path(__file__).with_name("user_targets") / "poisson_sgd.py"
    target = load_file(str(user)).UnrecordedPoissonSGD(epsilon=2.0)
    pair = canaries.make("dirac-gradient").worlds(small_csbm, np.random.default_rng(0), target)
    spec = AuditSpec(target=f"{user}:UnrecordedPoissonSGD", seed=0)
    sampler = estimation.measure_sampler(spec, target, pair, releases=20)
    assert not sampler.check.ok and sampler.check.failures == (family_fit.UNRECORDED,)
    assert sampler.steps == 5 and sampler.declared_q == pytest.approx(0.3)
    assert pair.info["sampler"].startswith("unmeasured") and PairLaw.of(pair.info).not_poisson
    from audit.stats import estimators

    rng = np.random.default_rng(1)
    cp = estimators.estimate(rng.normal(0, 1, 400), rng.normal(0.5, 1, 400), method="cp", delta=1e-5)
    got, why, record = estimation.family_estimate(spec, target.claim(small_csbm), sampler, [], cp, "chosen")
    assert got is cp and record["refused"] == family_fit.UNRECORDED and "fit refused: unmeasured" in why
