"""Mutation checks: each mutant of ``tests/mutants.py`` must make the tests that guard against it
fail. Each test runs the guarding check under the mutant and asserts that it raises (an asserted
expected failure, not an xfail).

| mutant | checks that fail on it |
|---|---|
| cp, bayes, gdp, fdp, one-run bound × 1.1 and × 1.2 | its size check (tests/test_estimator_size.py) |
| cp held-out split bound × 1.1 and × 1.2 | the cp-split size check |
| gdp bound × 1.1 and × 1.2 | the tight gdp catalogue entry (tests/test_catalogue.py: the exact Gaussian) |
| cp bound × 1.1 and × 1.2 | the tight cp catalogue entry (EdgeRand, pure ε) |
| Gaussian mechanism's noise × 0.9 | the tight gdp catalogue entry; the released-noise scale test (tests/test_gaussian.py); the declared-model check (audit/declared.py) |

The bayes, fdp and one-run mutants fail their size checks only: no correct catalogue entry at a
budget CI affords has those bounds within 10 % of its claim.

one-run-fdp is not mutated: its bound sits at half the truth at the canary counts a test affords,
so no count of runs separates a 10 % inflation (tests/size.py).
"""
import numpy as np
import pytest

from mutants import inflate_bound, shrink_noise
from size import CHECKS, TIGHT, check_entry, tight_entries


@pytest.mark.parametrize("factor", [1.1, 1.2])
@pytest.mark.parametrize("name", TIGHT)
def test_inflated_bound_fails_its_size_check(monkeypatch, name, factor):
    check = CHECKS[name]
    inflate_bound(monkeypatch, check.method, factor)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        check.run(name)


@pytest.mark.parametrize("factor", [1.1, 1.2])
@pytest.mark.parametrize("method", ["gdp", "cp"])
def test_inflated_bound_fails_the_tight_catalogue_entry(monkeypatch, tmp_path, method, factor):
    inflate_bound(monkeypatch, method, factor)
    with pytest.raises(AssertionError, match="VIOLATION"):
        check_entry(tight_entries()[method], tmp_path)


def test_less_noise_fails_the_tight_catalogue_entry(monkeypatch, tmp_path):
    shrink_noise(monkeypatch, 0.9)
    with pytest.raises(AssertionError, match="VIOLATION"):
        check_entry(tight_entries()["gdp"], tmp_path)


def test_less_noise_fails_the_noise_scale_test(monkeypatch, csbm):
    from test_gaussian import test_released_noise_has_the_stated_scale

    test_released_noise_has_the_stated_scale(csbm, None, 1.0)  # the honest mechanism passes
    shrink_noise(monkeypatch, 0.9)
    with pytest.raises(AssertionError):
        test_released_noise_has_the_stated_scale(csbm, None, 1.0)


def test_less_noise_fails_the_declared_check(monkeypatch, csbm):
    from audit import declared
    from canaries.base import make as make_canary
    from targets.base import build

    def check():
        target = build("gaussian", epsilon=2.0)
        pair = make_canary("random-edge").worlds(csbm, np.random.default_rng(0), target)
        return declared.check_declared(target, pair, seed=0, n=8, alpha=1e-3)

    assert check().ok
    shrink_noise(monkeypatch, 0.9)
    assert not check().ok
