"""The T-fold Poisson(q)-subsampled Gaussian: its privacy profile, trade-off curve and ε, from
dp_accounting's privacy loss distribution (PLD; Doroshenko et al. 2022, "Connect the dots").

The mechanism releases, at each of T steps, x + N(0, σ²) where x = 1 with probability q (the canary
is in the step's batch) and x = 0 otherwise (sensitivity 1, σ the noise multiplier). Its privacy
profile δ(ε) is the larger of the add and the remove adjacency's hockey-stick divergences
(``PrivacyLossDistribution.get_delta_for_epsilon`` takes that maximum).

* :func:`tradeoff` — a lower bound on the trade-off curve, by the ε–δ duality (Dong, Roth & Su
  2022, Prop. 2.12): every test's error pair satisfies β ≥ 1 − δ(ε) − e^ε α and
  β ≥ e^{−ε}(1 − δ(ε) − α) for every ε, so f(α) = max over a finite ε grid of those lines. A
  pessimistic PLD (δ(ε) over-estimated) and a finite grid both only lower the curve: the safe side
  for a fit that rejects σ where the curve lies above a measured error pair.
* :func:`epsilon` — ε at δ; ``pessimistic=False`` is the optimistic PLD (Privacy Buckets), which
  under-estimates ε up to its discretisation: the safe side for a reported lower bound.

Each PLD is cached by (σ, q, T, pessimism): the fit evaluates a fixed geometric grid of σ.
"""
from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable

import numpy as np

#: the PLD's privacy-loss discretisation; ε errs by about T times this at most
DISCRETISATION = 1e-3
_EPS_GRID = 800          # points of the ε grid of the duality
_DELTA_FLOOR = 1e-14     # the grid stops where δ(ε) falls below this


@functools.lru_cache(maxsize=4096)
def _pld(sigma: float, q: float, steps: int, pessimistic: bool):
    from dp_accounting.pld import privacy_loss_distribution as pld

    logger = logging.getLogger()
    level = logger.level
    logger.setLevel(logging.ERROR)  # the optimistic PLD warns that it falls back to Privacy Buckets
    try:
        one = pld.from_gaussian_mechanism(sigma, sampling_prob=q, pessimistic_estimate=pessimistic,
                                          value_discretization_interval=DISCRETISATION,
                                          use_connect_dots=pessimistic)
    finally:
        logger.setLevel(level)
    return one.self_compose(steps) if steps > 1 else one


def _check(sigma: float, q: float, steps: int) -> None:
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"the noise multiplier must be positive and finite, got {sigma!r}")
    if not (0.0 < q <= 1.0):
        raise ValueError(f"the sampling rate must be in (0, 1], got {q!r}")
    if int(steps) != steps or steps < 1:
        raise ValueError(f"the number of steps must be a positive integer, got {steps!r}")


def epsilon(sigma: float, q: float, steps: int, delta: float, *, pessimistic: bool = False) -> float:
    """ε at δ of T Poisson(q)-subsampled Gaussian steps of noise multiplier σ (max over add/remove)."""
    _check(sigma, q, steps)
    return float(_pld(float(sigma), float(q), int(steps), pessimistic).get_epsilon_for_delta(delta))


def profile(sigma: float, q: float, steps: int, eps: np.ndarray) -> np.ndarray:
    """The pessimistic δ(ε) (max over add/remove) at the given ε values."""
    _check(sigma, q, steps)
    return np.asarray(_pld(float(sigma), float(q), int(steps), True).get_delta_for_epsilon(eps), float)


def duality_lines(profile_at: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(e^ε, 1 − δ(ε)) on a grid of ε ≥ 0 up to where δ(ε) < ``_DELTA_FLOOR``, for any privacy profile δ(ε)
    (an over-estimate of δ only lowers the curve :func:`curve_from_lines` draws: the safe side)."""
    hi = 1.0
    while profile_at(np.array([hi]))[0] > _DELTA_FLOOR and hi < 200:
        hi *= 2
    eps = np.linspace(0.0, hi, _EPS_GRID)
    return np.exp(eps), 1.0 - profile_at(eps)


def curve_from_lines(growth: np.ndarray, mass: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """The ε–δ duality's lower bound on a symmetric trade-off curve from :func:`duality_lines`."""
    def f(alpha: np.ndarray) -> np.ndarray:
        a = np.clip(np.asarray(alpha, float), 0.0, 1.0)[..., None]
        lines = np.maximum(mass - growth * a, (mass - a) / growth)
        return np.clip(lines.max(axis=-1), 0.0, 1.0)

    return f


@functools.lru_cache(maxsize=4096)
def _duality_lines(sigma: float, q: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    return duality_lines(lambda eps: profile(sigma, q, steps, eps))


def tradeoff(sigma: float, q: float, steps: int) -> Callable[[np.ndarray], np.ndarray]:
    """A lower bound f on the mechanism's trade-off curve (module docstring): f(α) ≤ the smallest
    type-II error of any test at type-I error α, in either order of the two worlds."""
    return curve_from_lines(*_duality_lines(float(sigma), float(q), int(steps)))


def sigma_for_epsilon(eps: float, q: float, steps: int, delta: float) -> float:
    """The noise multiplier at which the mechanism's (pessimistic) ε at δ is `eps` (bisection)."""
    lo, hi = 1e-2, 1.0
    while epsilon(hi, q, steps, delta, pessimistic=True) > eps:
        lo, hi = hi, hi * 2
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if epsilon(mid, q, steps, delta, pessimistic=True) > eps else (lo, mid)
    return hi
