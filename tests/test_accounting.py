import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from targets.common import accounting as acc


@pytest.mark.parametrize("mu, delta, eps", [
    (0.5, 1e-5, 1.993), (0.5, 1e-8, 2.708), (1, 1e-5, 4.377), (1, 1e-7, 5.349),
    (2, 1e-6, 10.997), (3, 1e-5, 16.676), (3, 1e-8, 20.774)])
def test_gdp_epsilon_matches_spec_table(mu, delta, eps):
    assert acc.gdp_epsilon(mu, delta) == pytest.approx(eps, abs=1e-3)


def test_gdp_inverse_and_point_anchors():
    assert acc.gdp_mu(4, 1e-7) == pytest.approx(0.7705, abs=1e-4)
    assert acc.gdp_mu(2, 1e-5) == pytest.approx(0.5016, abs=1e-3)
    mu = acc.gdp_mu_from_rates(0.01, 0.5)
    assert mu == pytest.approx(2.326, abs=1e-3)
    assert acc.gdp_epsilon(mu, 1e-5) == pytest.approx(12.06, abs=0.01)


def test_gdp_delta_at_zero_and_edge_cases():
    from scipy.stats import norm
    assert acc.gdp_delta(0.0, 0.7) == pytest.approx(2 * norm.cdf(0.35) - 1)
    assert acc.gdp_epsilon(0.0, 1e-5) == 0.0
    assert acc.gdp_epsilon(math.inf, 1e-5) == math.inf
    with pytest.raises(ValueError, match="delta"):
        acc.gdp_epsilon(1.0, 1.5)
    with pytest.raises(ValueError, match="epsilon"):
        acc.gdp_mu(0.0, 1e-5)


@settings(max_examples=40, deadline=None)
@given(eps=st.floats(0.05, 30), delta=st.floats(1e-10, 1e-2))
def test_gdp_round_trip(eps, delta):
    assert acc.gdp_epsilon(acc.gdp_mu(eps, delta), delta) == pytest.approx(eps, rel=1e-6)


def test_gaussian_rdp_closed_form_and_conversion():
    orders = np.array([2.0, 8.0, 32.0])
    assert np.allclose(acc.gaussian_rdp(orders, 2.0, count=3), 3 * orders / 8)
    # classic conversion of a single Gaussian: min_a a/(2σ²) + ln(1/δ)/(a−1) → ρ + 2 sqrt(ρ L)
    sigma, delta = 10.0, 1e-5
    eps, _ = acc.rdp_to_dp(np.linspace(1.01, 200, 20000), acc.gaussian_rdp(np.linspace(1.01, 200, 20000), sigma),
                           delta, conversion="classic")
    rho, big_l = 1 / (2 * sigma**2), math.log(1 / delta)
    assert eps == pytest.approx(rho + 2 * math.sqrt(rho * big_l), rel=1e-4)
    improved, _ = acc.rdp_to_dp(acc.DEFAULT_ORDERS, acc.gaussian_rdp(acc.DEFAULT_ORDERS, sigma), delta)
    assert improved < eps


def test_subsampled_rdp_is_below_full_batch():
    orders = [2.0, 4.0, 8.0]
    sub = acc.subsampled_gaussian_rdp(orders, 0.01, 1.0, 100)
    assert np.all(sub < acc.gaussian_rdp(orders, 1.0, count=100))
    assert np.all(acc.subsampled_gaussian_rdp(orders, 0.0, 1.0, 100) == 0)


def test_subsampled_rdp_memo_is_the_accountant_and_safe_to_mutate():
    """The memoised curve equals a fresh dp_accounting composition, and a caller writing into the returned
    array does not change what the next caller reads."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    orders = [1.5, 2, 4, 8.5, 32]
    fresh = rdp_lib.RdpAccountant(orders)
    fresh.compose(dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(0.2, dp_event.GaussianDpEvent(1.3)), 7))
    first = acc.subsampled_gaussian_rdp(np.array(orders), 0.2, 1.3, 7)
    assert np.array_equal(first, np.asarray(fresh._rdp, float))
    first[:] = -1.0
    assert np.array_equal(acc.subsampled_gaussian_rdp(orders, 0.2, 1.3, 7), np.asarray(fresh._rdp, float))


@settings(max_examples=25, deadline=None)
@given(target=st.floats(0.1, 20))
def test_calibration_never_overshoots(target):
    def eps_of(sigma):
        return acc.gdp_epsilon(1.0 / sigma, 1e-5)

    sigma = acc.calibrate_decreasing(eps_of, target)
    assert eps_of(sigma) <= target
    assert eps_of(sigma) == pytest.approx(target, rel=1e-6)


def test_gap_delta_rule():
    assert acc.gap_delta(10556) == 1e-5
    assert acc.gap_delta(48) == 1e-2
