"""The shuffled-batches computation of ``benchmarks/shuffle_vs_poisson.py`` (issue #45): its Monte Carlo of
Chua et al.'s pair and its FFT composition agree with a closed form where one exists, and the pair leaks
more than the Dirac canary's max-over-steps test where the benchmark says it does."""
import math

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from benchmarks import shuffle_vs_poisson as svp

DELTA = 1 / 180 ** 1.1


def _gdp_epsilon(mu: float) -> float:
    return brentq(lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - DELTA, 0, 100)


@pytest.mark.parametrize("mu, epochs", [(0.5, 1), (1.0, 4)])
def test_chua_pair_with_one_step_per_epoch_is_the_gaussian_mechanism(monkeypatch, mu, epochs):
    # L = 1: the canary's step is the only one, P = N(μ), Q = N(0); E epochs compose to GDP at μ√E
    monkeypatch.setattr(svp, "MC", 200_000)
    got = svp.max_test_epsilon(mu, 1, epochs, DELTA, pmf_of=svp.chua_loss_pmf)
    assert got == pytest.approx(_gdp_epsilon(mu * math.sqrt(epochs)), abs=0.05)


def test_chua_pair_leaks_more_than_the_dirac_max_test_and_than_the_poisson_claim(monkeypatch):
    monkeypatch.setattr(svp, "MC", 200_000)
    from targets.dpsgd_gcn import dpsgd_epsilon

    claim = dpsgd_epsilon(1.0, sampling_rate=0.1, steps=10, delta=DELTA)[0]
    dirac = svp.max_test_epsilon(1.0, 10, 1, DELTA)
    chua = svp.max_test_epsilon(1.0, 10, 1, DELTA, pmf_of=svp.chua_loss_pmf)
    assert dirac < claim < 1.5 * claim < chua   # the table's row q = 0.1, one epoch, σ = 1: 0.89, 1.74, 5.56
