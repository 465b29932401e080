"""Mutation checks: each mutant of ``tests/mutants.py`` must make the tests that guard against it
fail. Each test runs the guarding check under the mutant and asserts that it raises (an asserted
expected failure, not an xfail).

| mutant | checks that fail on it |
|---|---|
| cp, bayes, gdp, fdp, one-run bound × 1.1 and × 1.2 | its size check (tests/test_estimator_size.py) |
| cp held-out split bound × 1.1 and × 1.2 | the cp-split size check |
| gdp bound × 1.1 and × 1.2 | the tight gdp catalogue entry (tests/test_catalogue.py: the exact Gaussian) |
| cp bound × 1.1 and × 1.2 | the tight cp catalogue entry (EdgeRand, pure ε) |
| bayes bound × 1.1 and × 1.2 | the tight bayes catalogue entry (the same EdgeRand trials) |
| fdp bound × 1.1 and × 1.2 | the tight fdp catalogue entry (exact randomized response, 100,000 trials) |
| one-run bound × 1.1 and × 1.2 | the tight one-run catalogue entry (exact randomized response, 5,000 canaries) |
| one-run-fdp bound × 2 | its size check |
| cp, bayes, fdp, one-run bound × 1.1 at δ = 0 | its size check at δ = 0 (``PURE_CHECKS``) |
| Gaussian mechanism's noise × 0.9 | the tight gdp catalogue entry; the released-noise scale test (tests/test_gaussian.py); the declared-model check (audit/declared_model/declared.py) |

one-run-fdp is mutated × 2 only: with the paper's one-sided guesses on a fixed fraction k = 0.2 m,
its bound on Gaussian canaries stays near 0.56 of the true ε however many canaries (measured
0.54-0.60 for ε = 2, 4, 8 and m = 1,000 to 64,000), so a bound inflated by 10 % or 20 % still
sits below the truth in every configuration, and no test can fail on it. In its size check (100
runs, limit 30) the bound's median is 0.538 of the truth and its largest 0.751: × 1.1 and × 1.2
exceed the truth in 0 runs, × 1.5 in 3, × 1.8 in 45 and × 2 in 66.
"""
import numpy as np
import pytest

from mutants import inflate_bound, shrink_noise
from size import CHECKS, PURE_CHECKS, TIGHT, check_entry, tight_entries


@pytest.mark.parametrize("factor", [1.1, 1.2])
@pytest.mark.parametrize("name", TIGHT)
def test_inflated_bound_fails_its_size_check(monkeypatch, name, factor):
    check = CHECKS[name]
    inflate_bound(monkeypatch, check.method, factor)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        check.run(name)


@pytest.mark.parametrize("name", sorted(PURE_CHECKS))
def test_inflated_bound_fails_its_size_check_at_delta_zero(monkeypatch, name):
    check = PURE_CHECKS[name]
    inflate_bound(monkeypatch, check.method, 1.1)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        check.run(name)


def test_doubled_one_run_fdp_bound_fails_its_size_check(monkeypatch):
    """The one mutant of one-run-fdp a check can see (module docstring): its bound × 2."""
    inflate_bound(monkeypatch, "one-run-fdp", 2.0)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        CHECKS["one-run-fdp"].run("one-run-fdp")


@pytest.mark.parametrize("factor", [1.1, 1.2])
@pytest.mark.parametrize("method", ["gdp", "cp", "bayes", "fdp", "one-run"])
def test_inflated_bound_fails_the_tight_catalogue_entry(monkeypatch, tight_out, method, factor):
    inflate_bound(monkeypatch, method, factor)
    with pytest.raises(AssertionError, match="VIOLATION"):
        check_entry(tight_entries()[method], tight_out)


def test_less_noise_fails_the_tight_catalogue_entry(monkeypatch, tmp_path):
    shrink_noise(monkeypatch, 0.9)  # other noise, other trials: a folder of its own
    with pytest.raises(AssertionError, match="VIOLATION"):
        check_entry(tight_entries()["gdp"], tmp_path)


def test_less_noise_fails_the_noise_scale_test(monkeypatch, csbm):
    from test_gaussian import test_released_noise_has_the_stated_scale

    test_released_noise_has_the_stated_scale(csbm, None, 1.0)  # the honest mechanism passes
    shrink_noise(monkeypatch, 0.9)
    with pytest.raises(AssertionError):
        test_released_noise_has_the_stated_scale(csbm, None, 1.0)


def test_less_noise_fails_the_declared_check(monkeypatch, csbm):
    from audit.declared_model import declared
    from canaries.base import make as make_canary
    from targets.base import build

    def check():
        target = build("gaussian", epsilon=2.0)
        pair = make_canary("random-edge").worlds(csbm, np.random.default_rng(0), target)
        return declared.check_declared(target, pair, seed=0, n=8, alpha=1e-3)

    assert check().ok
    shrink_noise(monkeypatch, 0.9)
    assert not check().ok
