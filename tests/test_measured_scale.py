"""The measured-scale score (:mod:`attacks.measured_scale`), the wrong-scale candidate: a size test with
power on a Gaussian mechanism whose second step is quieter than declared, its mutant (shift and
scales measured on the certification trials) failing the same test; the pilot order after a scale
deviation; the fit drawn from the run's seed."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from attacks.measured_scale import N_FIT, MeasuredScaleLRT, measured_variance, step_ratio
from audit.stats import estimators as est
from size import count_exceedances, limit, stable_seed
from targets.common.accounting import gdp_epsilon

#: two steps of P entries, both declared at std 1; the second's noise is at std 0.5
P, SIGMA, DECLARED = 200, (1.0, 0.5), 1.0
#: each step moves by d_k with ‖d_k‖ = 0.5: μ = √(Σ ‖d_k‖² / σ_k²) = √(0.25 + 1) exactly
D_NORM = 0.5
MU = float(np.sqrt(sum(D_NORM**2 / s**2 for s in SIGMA)))
DELTA = 0.1
REPS, BETA = 400, 0.05
FPR = 0.1


def _shift(k: int) -> np.ndarray:
    d = np.zeros(P)
    d[k::4] = 1.0
    return d * D_NORM / np.linalg.norm(d)


def _draw(rng, n: int, bit: int) -> list[np.ndarray]:
    return [bit * _shift(k) + SIGMA[k] * rng.standard_normal((n, P)) for k in range(2)]


def _scores(x: list[np.ndarray], d: list[np.ndarray], var: list[float]) -> np.ndarray:
    return sum(step_ratio(x[k], np.zeros(P), d[k], var[k]) for k in range(2))


def _audit(r: int, *, mutant: bool, trials: int = 100) -> tuple[float, float]:
    rng = np.random.default_rng(stable_seed("measured-scale size", r))
    out, inn = _draw(rng, trials, 0), _draw(rng, trials, 1)
    if mutant:  # shift and scales measured on the certification trials themselves
        d = [inn[k].mean(0) - out[k].mean(0) for k in range(2)]
        var = [float(np.vstack([out[k] - out[k].mean(0), inn[k] - inn[k].mean(0)]).var()) for k in range(2)]
        threshold = float(np.quantile(_scores(out, d, var), 1 - FPR))
    else:  # the declared shift; scales and threshold from fit releases of their own
        fit0, fit1 = _draw(rng, N_FIT, 0), _draw(rng, N_FIT, 1)
        d = [_shift(k) for k in range(2)]
        var = [measured_variance(float((fit0[k] ** 2).sum() + ((fit1[k] - d[k]) ** 2).sum()), 2 * N_FIT * P,
                                 DECLARED**2) for k in range(2)]
        threshold = float(np.quantile(_scores(_draw(rng, 200, 0), d, var), 1 - FPR))
    e = est.estimate(_scores(out, d, var), _scores(inn, d, var), delta=DELTA, method="cp", confidence=1 - BETA,
                     threshold=threshold)
    return e.eps_lb, gdp_epsilon(MU, DELTA)


def test_size_of_the_measured_scale_score():
    count_exceedances(lambda r: _audit(r, mutant=False), REPS, BETA, "measured-scale (fitted apart)")


def test_the_mutant_measured_on_the_certification_trials_fails_the_size_test():
    with pytest.raises(AssertionError, match="the bound exceeded the true ε"):
        count_exceedances(lambda r: _audit(r, mutant=True), REPS, BETA, "measured-scale (fitted on its trials)")


def test_the_size_limit_has_power_against_twice_the_nominal_rate():
    assert limit(REPS, BETA) < REPS


def test_the_measured_weights_beat_the_declared_ones():
    """The point of the score: at the measured scales it separates better than at the declared ones."""
    rng = np.random.default_rng(3)
    out, inn = _draw(rng, 4000, 0), _draw(rng, 4000, 1)
    d = [_shift(k) for k in range(2)]

    def mu_of(var):
        s0, s1 = _scores(out, d, var), _scores(inn, d, var)
        return (s1.mean() - s0.mean()) / np.sqrt((s0.var() + s1.var()) / 2)

    declared, measured = mu_of([1.0, 1.0]), mu_of([s**2 for s in SIGMA])
    assert measured == pytest.approx(MU, rel=0.1) and measured > declared * 1.1


def test_a_scale_deviation_puts_the_measured_scale_first():
    from audit.plan import portfolio, portfolio_choice, portfolio_validity

    pool = [portfolio.Candidate("mechanism", a, "worst-edge")
            for a in ("learned-mechanism", "measured-law", "measured-scale", "edge-correlation")]
    rows: list[dict] = []
    left = portfolio_choice.act_on_deviation("mechanism", "scale: step 2: measured std 1.997 vs declared 3.988", pool, rows)
    assert [c.attack for c in left][:3] == ["measured-scale", "measured-law", "learned-mechanism"]
    left = portfolio_choice.act_on_deviation("mechanism", "shared-steps: correlation 1", pool, [])
    assert [c.attack for c in left][:2] == ["measured-law", "learned-mechanism"] and "measured-scale" in \
        [c.attack for c in left][2:]


def test_the_attack_measures_a_users_quieter_step_from_the_run_seed(small_csbm):
    from canaries.edge import RandomEdge
    from targets.base import get
    from test_user_targets import _path

    target = get(_path("issue43/quieter_last_hop.py:QuieterLastHop"))()
    pair = RandomEdge().worlds(small_csbm, np.random.default_rng(0))
    release = target.fit(pair.world(0), torch.Generator().manual_seed(1))
    assert MeasuredScaleLRT().applies_to(release)
    declared = [float(s.noise_std) for s in release.view("mechanism")]

    def fitted(seed: int) -> MeasuredScaleLRT:
        attack = MeasuredScaleLRT()
        attack.bind_target(target)
        attack.bind_run(seed)
        return attack

    var = fitted(0).variances(pair)
    assert np.sqrt(var[0]) == pytest.approx(declared[0], rel=0.1)
    assert np.sqrt(var[1]) == pytest.approx(declared[1] / 2, rel=0.1)  # the quieter step, measured
    assert fitted(0).variances(pair) == var and fitted(1).variances(pair) != var  # the run's seed decides
    with pytest.raises(ValueError, match="bind_run"):
        unbound = MeasuredScaleLRT()
        unbound.bind_target(target)
        unbound.variances(pair)


def test_the_failed_tests_are_read_off_the_checks_record():
    """A step's failing test is named inside its reason (``mechanism step 1 (hop 2): ... (scale, ...)``):
    the names come from the record's tests, not from the text."""
    from audit.plan import portfolio, portfolio_choice, portfolio_validity

    declared = {"checked": True, "ok": False, "deviations": ["shared-steps: residual correlation 1"],
                "steps": [{"status": "pass", "tests": [{"name": "scale", "passed": True}]},
                          {"status": "fail", "tests": [{"name": "scale", "passed": False},
                                                       {"name": "shape-ks", "passed": True}]}]}
    assert portfolio_validity.failed_tests(declared) == {"scale", "shared-steps"}
    assert portfolio_validity.failed_tests(None) == set()
