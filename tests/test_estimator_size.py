"""Each estimator's size, measured where its bound sits near the true ε (``tests/size.py``).

| check | mechanism, trials per world | reps | β | limit | P(fail \\| rate 2β) |
|---|---|---|---|---|---|
| cp (every trial, tie-broken grid) | randomized response ε = 1, 5,000 | 80 | 0.2 | 25 | 0.933 |
| cp-split (held-out threshold) | randomized response ε = 1, 5,000 | 100 | 0.2 | 30 | 0.975 |
| bayes | randomized response ε = 1, 5,000 | 100 | 0.2 | 30 | 0.975 |
| gdp | Gaussian ε = 4 (exact LLR score), 20,000 | 100 | 0.2 | 30 | 0.975 |
| fdp | randomized response + U(0, ½) jitter ε = 1, 20,000 | 100 | 0.2 | 30 | 0.975 |
| one-run (Steinke et al.) | randomized-response canaries ε = 1, 2 × 2,500 | 80 | 0.2 | 25 | 0.933 |
| one-run-fdp | Gaussian canaries ε = 4, 2 × 500 | 100 | 0.2 | 30 | 0.975 |

At δ = 0 (a pure ε-DP claim: ``PURE_CHECKS``; gdp and one-run-fdp are refused there):

| check | mechanism, trials per world | reps | β | limit | P(fail \\| rate 2β) |
|---|---|---|---|---|---|
| cp-pure-laplace | Laplace mechanism ε = 1 (sensitivity 1, the score itself), 20,000 | 80 | 0.2 | 25 | 0.933 |
| bayes-pure | randomized response ε = 1, 5,000 | 100 | 0.2 | 30 | 0.975 |
| fdp-pure | randomized response + U(0, ½) jitter ε = 1, 20,000 | 100 | 0.2 | 30 | 0.975 |
| one-run-pure | randomized-response canaries ε = 1, 2 × 2,500 | 80 | 0.2 | 25 | 0.933 |

P(a correct estimator, at exactly rate β, fails) ≤ 0.01 in every row. β = 0.2 (confidence 0.8)
because the size guarantee holds at every confidence and 2β = 0.4 is told from 0.2 in 80-100 runs;
at β = 0.05 the same power takes ≥ 400 runs.
"""
import pytest

from size import CHECKS, PURE_CHECKS, limit, power


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_size_at_the_truth(name):
    """Exceedances of the true ε ≤ the row's limit (the module's table)."""
    CHECKS[name].run(name)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n.startswith("cp") else n
                                  for n in sorted(PURE_CHECKS)])
def test_size_at_the_truth_at_delta_zero(name):
    """At δ = 0: exceedances of the true (pure) ε ≤ the row's limit. cp's check (2 min on 2 cores) is slow;
    its ×1.1 mutant check (tests/test_mutants.py), which stops at the limit, runs by default."""
    PURE_CHECKS[name].run(name)


def test_limits_have_the_stated_power():
    """The table above is what tests/size.py computes, and a rate-2β estimator fails w.p. ≥ 0.9."""
    table = {"cp": (80, 25, 0.933), "cp-split": (100, 30, 0.975), "bayes": (100, 30, 0.975),
             "gdp": (100, 30, 0.975), "fdp": (100, 30, 0.975), "one-run": (80, 25, 0.933),
             "one-run-fdp": (100, 30, 0.975), "cp-pure-laplace": (80, 25, 0.933), "bayes-pure": (100, 30, 0.975),
             "fdp-pure": (100, 30, 0.975), "one-run-pure": (80, 25, 0.933)}
    assert all(c.delta == 0.0 for c in PURE_CHECKS.values())
    for name, check in {**CHECKS, **PURE_CHECKS}.items():
        reps, allowed, fail = table[name]
        assert (check.reps, check.limit) == (reps, allowed), name
        assert power(reps, check.beta, allowed) == pytest.approx(fail, abs=5e-4) and fail >= 0.9
    with pytest.raises(ValueError, match="use more reps"):
        limit(300, 0.05)  # P(fail | 10%) = 0.86 at 300 runs (the example): refused
