"""Privacy accounting formulas shared by every target.

Pure functions, keyword-friendly, no state. Each docstring names the result it implements.

* μ-GDP ↔ (ε, δ): Dong, Roth & Su (2019), Corollary 2.13 (specs/auditing.md §5).
* RDP → (ε, δ): the classic conversion (Mironov 2017, Prop. 3) and the improved one of
  Balle et al. 2020 / Canonne, Kamath & Steinke 2020 (specs/auditing.md §5).
* Poisson-subsampled Gaussian RDP: through ``dp_accounting`` (Mironov, Talwar & Zhang 2019).
* Calibration: a monotone root finder that never returns a noise level whose ε exceeds the target.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr
from scipy.stats import norm

#: RDP orders used throughout (dense near 1, then integers, then large orders).
DEFAULT_ORDERS: tuple[float, ...] = tuple(
    [1.0 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [64, 80, 96, 128, 192, 256, 512, 1024]
)


def check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    epsilon = float(epsilon)
    if not (epsilon > 0) or math.isnan(epsilon):
        raise ValueError(f"{name} must be > 0, got {epsilon!r}")
    return epsilon


def check_delta(delta: float, name: str = "delta", *, pure: bool = False) -> float:
    """`delta` as a float, in (0, 1); with ``pure`` in [0, 1) (δ = 0: a pure ε-DP claim)."""
    delta = float(delta)
    if pure and delta == 0.0:
        return delta
    if not (0.0 < delta < 1.0):
        raise ValueError(f"{name} must be in {'[0, 1) (0: pure ε-DP)' if pure else '(0, 1)'}, got {delta!r}")
    return delta


# ---------------------------------------------------------------------------------------------
# Gaussian differential privacy
# ---------------------------------------------------------------------------------------------
def _log_sub_exp(a: float, b: float) -> float:
    """log(e^a − e^b) for a ≥ b."""
    if b == -math.inf:
        return a
    if b >= a:
        return -math.inf
    return a + math.log1p(-math.exp(b - a))


def gdp_delta(epsilon: float, mu: float) -> float:
    """δ(ε) of a μ-GDP mechanism: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (DRS 2019, Cor. 2.13)."""
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    log_a = float(log_ndtr(-epsilon / mu + mu / 2))
    log_b = epsilon + float(log_ndtr(-epsilon / mu - mu / 2))
    return math.exp(_log_sub_exp(log_a, log_b))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Smallest ε with δ(ε; μ) ≤ δ; 0 when δ(0) already ≤ δ; ∞ for μ = ∞, and for every μ > 0 at
    δ = 0 (δ(ε; μ) > 0 for every finite ε: a Gaussian curve is no pure ε-DP curve)."""
    check_delta(delta, pure=True)
    if mu <= 0:
        return 0.0
    if math.isinf(mu) or delta == 0.0:
        return math.inf
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gdp_delta(hi, mu) > delta:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    return brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12)


def gdp_mu(epsilon: float, delta: float) -> float:
    """The μ for which a μ-GDP mechanism is exactly (ε, δ)-DP (inverse of :func:`gdp_epsilon`)."""
    check_epsilon(epsilon)
    check_delta(delta)
    lo, hi = 1e-8, 1.0
    while gdp_delta(epsilon, hi) < delta:
        hi *= 2.0
    return brentq(lambda m: gdp_delta(epsilon, m) - delta, lo, hi, xtol=1e-14, rtol=1e-13)


def gdp_mu_from_rates(fpr: float, fnr: float) -> float:
    """The μ implied by one point of a test: Φ⁻¹(1 − FPR) − Φ⁻¹(FNR) (specs/auditing.md §5)."""
    return float(norm.isf(fpr) - norm.ppf(fnr))


def gdp_compose(*mus: float) -> float:
    """Composition of GDP mechanisms: μ = sqrt(Σ μ_i²)."""
    return math.sqrt(sum(m * m for m in mus))


def poisson_gdp_clt(sampling_rate: float, noise_multiplier: float, steps: int) -> float:
    """CLT μ of T Poisson-subsampled Gaussian steps: q·sqrt(T(e^{1/σ²} − 1)) (Bu et al. 2020)."""
    return sampling_rate * math.sqrt(steps * math.expm1(1.0 / noise_multiplier**2))


# ---------------------------------------------------------------------------------------------
# Rényi differential privacy
# ---------------------------------------------------------------------------------------------
def gaussian_rdp(orders: Sequence[float], noise_multiplier: float, count: int = 1) -> np.ndarray:
    """RDP of `count` Gaussian mechanisms with std/sensitivity = σ: count·α/(2σ²)."""
    a = np.asarray(orders, dtype=float)
    if noise_multiplier <= 0:
        return np.full_like(a, np.inf)
    return count * a / (2.0 * noise_multiplier**2)


def subsampled_gaussian_rdp(
    orders: Sequence[float], sampling_rate: float, noise_multiplier: float, steps: int
) -> np.ndarray:
    """RDP of `steps` Poisson-subsampled Gaussian steps (add/remove relation), via dp_accounting.

    Memoised per (orders, q, σ, T): dp_accounting's fractional-order series costs about 0.5 s a call,
    and a target's claim is re-read for every batch of trials."""
    if steps == 0 or sampling_rate == 0:
        return np.zeros(len(orders))
    if noise_multiplier <= 0:
        return np.full(len(orders), np.inf)
    key = tuple(float(a) for a in np.asarray(orders, dtype=float).ravel())
    return np.array(_subsampled_gaussian_rdp(key, float(sampling_rate), float(noise_multiplier), int(steps)))


@functools.lru_cache(maxsize=1024)
def _subsampled_gaussian_rdp(orders: tuple[float, ...], sampling_rate: float, noise_multiplier: float,
                             steps: int) -> tuple[float, ...]:
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    acc = rdp_lib.RdpAccountant(list(orders))
    event = dp_event.PoissonSampledDpEvent(sampling_rate, dp_event.GaussianDpEvent(noise_multiplier))
    acc.compose(dp_event.SelfComposedDpEvent(event, steps))
    return tuple(float(r) for r in acc._rdp)  # the accountant keeps its curve in _rdp


def rdp_to_dp(
    orders: Sequence[float], rdp: Sequence[float], delta: float, *, conversion: str = "improved"
) -> tuple[float, float]:
    """(ε, best order) from an RDP curve.

    ``classic``: ε = min_α ε(α) + ln(1/δ)/(α − 1) (Mironov 2017, Prop. 3).
    ``improved``: ε = min_α ε(α) + ln((α − 1)/α) − (ln δ + ln α)/(α − 1) (Canonne et al. 2020, Prop. 12).
    """
    check_delta(delta)
    a = np.asarray(orders, dtype=float)
    r = np.asarray(rdp, dtype=float)
    if conversion == "classic":
        eps = r + math.log(1.0 / delta) / (a - 1.0)
    elif conversion == "improved":
        eps = r + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
    else:
        raise ValueError(f"conversion must be 'classic' or 'improved', got {conversion!r}")
    eps = np.where(np.isnan(eps), np.inf, eps)
    i = int(np.argmin(eps))
    return max(0.0, float(eps[i])), float(a[i])


# ---------------------------------------------------------------------------------------------
# Calibration
# ---------------------------------------------------------------------------------------------
def calibrate_decreasing(
    epsilon_of: Callable[[float], float],
    target_epsilon: float,
    *,
    lo: float = 1e-3,
    hi: float = 1.0,
    rtol: float = 1e-9,
    method: str = "bisect",
    grow: float = 2.0,
    slide: bool = False,
    limits: tuple[float, float] = (1e-12, 1e8),
    nudge: float | None = None,
    fallback: dict[str, Any] | None = None,
) -> float:
    """Smallest parameter x (e.g. a noise multiplier) with epsilon_of(x) ≤ target: the project's
    one noise calibrator.

    `epsilon_of` must be non-increasing in x; the calibrated mechanism never claims more than
    the target. Two methods:

    * ``bisect`` (default): the bracket [lo, hi] is widened by doubling/halving, then bisected on
      log x to relative width `rtol`; the upper end of the final bracket is returned.
    * ``brent``: Brent's root finder on log x (few accountant calls, for costly accountants),
      tolerance `rtol`, then nudged up by factors ``1 + nudge`` (default `rtol`) until
      ``epsilon_of(x) ≤ target``. The bracket is found by multiplying by `grow`: with ``slide``
      the whole bracket moves ([lo, hi] → [hi, grow·hi] while hi is too small, [lo/grow, lo]
      while lo already suffices, lo not below ``limits[0]``); without it each end is widened in
      log space on its own, and leaving ``limits`` raises ValueError. A ValueError (no bracket)
      is answered by ``calibrate_decreasing(epsilon_of, target, **fallback)`` when a `fallback`
      is given.
    """
    check_epsilon(target_epsilon, "target epsilon")
    if method == "brent":
        return _calibrate_brent(epsilon_of, target_epsilon, lo, hi, rtol, grow, slide, limits,
                                rtol if nudge is None else nudge, fallback)
    if method != "bisect":
        raise ValueError(f"unknown calibration method {method!r}; known: bisect, brent")
    while epsilon_of(hi) > target_epsilon:
        hi *= 2.0
        if hi > 1e8:
            raise ValueError(f"cannot reach epsilon {target_epsilon}: no parameter below 1e8 suffices")
    while lo > 1e-12 and epsilon_of(lo) <= target_epsilon:
        lo /= 2.0
    llo, lhi = math.log(lo), math.log(hi)
    while lhi - llo > rtol:
        mid = 0.5 * (llo + lhi)
        if epsilon_of(math.exp(mid)) > target_epsilon:
            llo = mid
        else:
            lhi = mid
    return math.exp(lhi)


def _calibrate_brent(epsilon_of: Callable[[float], float], target: float, lo: float, hi: float, rtol: float,
                     grow: float, slide: bool, limits: tuple[float, float], nudge: float,
                     fallback: dict[str, Any] | None) -> float:
    """:func:`calibrate_decreasing`'s ``brent`` method."""
    low, high = limits
    try:
        if slide:
            while epsilon_of(hi) > target:
                lo, hi = hi, hi * grow
                if hi > high:
                    raise ValueError(f"cannot reach epsilon {target}: no noise multiplier below {high:g} suffices")
            while lo > low and epsilon_of(lo) <= target:
                lo, hi = lo / grow, lo
            llo, lhi = math.log(lo), math.log(hi)
        else:
            llo, lhi = math.log(lo), math.log(hi)
            while epsilon_of(math.exp(lhi)) > target:
                lhi += math.log(grow)
                if lhi > math.log(high):
                    raise ValueError(f"cannot reach epsilon {target}: no bracket below {high:g}")
            while epsilon_of(math.exp(llo)) <= target:
                llo -= math.log(grow)
                if llo < math.log(low):
                    raise ValueError(f"epsilon {target} is met below {low:g}: no bracket")
        x = math.exp(brentq(lambda t: epsilon_of(math.exp(t)) - target, llo, lhi, xtol=rtol, rtol=rtol))
    except ValueError:
        if fallback is None:
            raise
        return calibrate_decreasing(epsilon_of, target, **fallback)
    while epsilon_of(x) > target:  # the safe side of the root
        x *= 1.0 + nudge
    return x


def gap_delta(count: int) -> float:
    """GAP's δ rule: 10^(−number of digits of `count`) (edges for edge-level, nodes for node-level)."""
    return 10.0 ** (-len(str(int(count))))
