"""The subsampled-Gaussian curve fit (``audit/stats/estimators/subsampled_fit.py``): its curve, its input
checks, and (slow) its size on simulated exact traces with the mutants that must fail it.

| check (``tests/size_subsampled.py``) | trials per world | reps | β | limit | P(fail \\| rate 2β) |
|---|---|---|---|---|---|
| q ∈ {0.1, 0.5} × T ∈ {3, 20}, ε = 2, q measured | 50,000 | 80 | 0.2 | 25 | 0.933 |

| mutant | check that fails on it |
|---|---|
| bound × 1.1 | q = 0.5, T = 3 |
| the box's bounds on the wrong side (lower CP bounds) | q = 0.5, T = 3 |
| the declared q trusted when the true q is twice it | q = 0.5, T = 3 (declared 0.25) |

Not caught by a size check: ε(σ̂) reported from the pessimistic PLD (``mutants.pessimistic_report``); the
direction check of ``tests/test_family_fit.py`` catches it (the report must lie below the pessimistic figure). At the fit's
discretisation (1e-3) the two PLDs differ by about 0.002 in ε, and the pessimistic figure exceeded
the truth in 0 of 80 runs at q = 0.5, T = 20; at a coarse 0.05 it stays below too (1.60-1.78 against
2 in 3 runs at q = 0.1, T = 20), because the coarse curve loosens σ̂ more than the report gains.
"""
import math

import numpy as np
import pytest
from scipy.stats import norm

from audit.stats.estimators import subsampled_curve as curve
from audit.stats.estimators import subsampled_fit as fit
from mutants import box_on_the_wrong_side, inflate_bound, trust_declared_q
from size_subsampled import FIT_CHECKS


def test_unsampled_curve_is_the_gaussian_curve_from_below():
    """At q = 1, T steps of noise multiplier σ are √T/σ-GDP: the dual curve lies just below G_μ."""
    alphas = np.array([1e-3, 0.01, 0.1, 0.3, 0.5])
    f = curve.tradeoff(2.0, 1.0, 4)(alphas)
    g = norm.cdf(norm.isf(alphas) - 1.0)
    assert np.all(f <= g + 1e-9)
    assert np.all(g - f < 0.01)


def test_epsilon_orders():
    """Optimistic ≤ pessimistic within the discretisation; ε grows with q and falls with σ."""
    opt, pess = (curve.epsilon(2.0, 0.5, 3, 1e-5, pessimistic=p) for p in (False, True))
    assert opt <= pess < opt + 3 * 3 * curve.DISCRETISATION
    assert curve.epsilon(2.0, 0.25, 3, 1e-5) < opt < curve.epsilon(1.8, 0.5, 3, 1e-5)


def test_no_signal_certifies_nothing():
    rng = np.random.default_rng(0)
    e = fit.fit(rng.standard_normal(3000), rng.standard_normal(3000), delta=1e-5, steps=3, q=0.5)
    assert e.eps_lb == 0.0 and e.assumption == fit.ASSUMPTION and e.counts["sigma_hat"] is None


def test_q_cells_cover_the_interval_outward():
    cells = fit._q_cells(0.4987, 0.5031)
    assert cells[0] <= 0.4987 and cells[-1] >= 0.5031 and np.all(np.diff(cells) > 0)
    assert list(fit._q_cells(0.3, 0.3)) == [0.3, 0.3]


@pytest.mark.parametrize("kwargs, match", [({"q": 0.0}, "sampling rate"), ({"q": (0.6, 0.5)}, "sampling rate"),
                                           ({"q": 0.5, "q_level": 0.06}, "q_level"),
                                           ({"q": 0.5, "select_fraction": 1.0}, "select_fraction")])
def test_bad_input_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit.fit(np.zeros(100), np.ones(100), delta=1e-5, steps=3, **kwargs)


def test_inclusion_interval_covers_the_rate():
    inc = np.random.default_rng(1).random((2000, 3)) < 0.5
    lo, hi = fit.inclusion_interval(inc, 0.01)
    assert lo < 0.5 < hi and hi - lo < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIT_CHECKS))
def test_size_at_the_truth(name):
    FIT_CHECKS[name].run(name)


@pytest.mark.slow
def test_inflated_bound_fails(monkeypatch):
    inflate_bound(monkeypatch, fit.METHOD, 1.1)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        FIT_CHECKS["q=0.5,T=3"].run("q=0.5,T=3")


@pytest.mark.slow
def test_box_on_the_wrong_side_fails(monkeypatch):
    box_on_the_wrong_side(monkeypatch)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        FIT_CHECKS["q=0.5,T=3"].run("q=0.5,T=3")


@pytest.mark.slow
def test_declared_q_trusted_fails(monkeypatch):
    trust_declared_q(monkeypatch, 0.25)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        FIT_CHECKS["q=0.5,T=3"].run("q=0.5,T=3")


def test_the_ceiling_is_what_a_perfect_attack_reports():
    """``max_certifiable_eps`` is the fit's own ceiling (was ∞, so the power line could never read
    budget-limited): no error at any threshold. A perfectly separating score stays at or below it (its
    thresholds sit at OUT quantiles, so it still has false positives there), and it rises with the trials."""
    rng = np.random.default_rng(0)
    out, inn = rng.random(150), 2 + rng.random(150)
    e = fit.fit(out, inn, delta=1e-5, steps=3, q=1.0, confidence=0.95)
    assert math.isfinite(e.max_certifiable_eps) and 0 < e.eps_lb <= e.max_certifiable_eps
    small, large = (fit.max_certifiable(n, n, q=(1.0, 1.0), steps=3, delta=1e-5, beta_box=0.05)
                    for n in (20, 2000))
    assert 0 < small < large < math.inf
