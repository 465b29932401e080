"""HeterPoisson's accountant (Theorem 2 and variants) and the SML noise law."""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy.special import logsumexp
from scipy.stats import binom

from targets.common.accounting import check_delta, rdp_to_dp
from targets.heterpoisson.config import NOISES

#: α grid: the authors' linspace(1.0001, 10, 100), plus the integers 11..256 (spec §4.2).
ORDERS: tuple[float, ...] = tuple(float(a) for a in np.linspace(1.0001, 10.0, 100)) + tuple(
    float(a) for a in range(11, 257)
)


# ---------------------------------------------------------------------------------------------
# accounting (Theorem 2 and variants)
# ---------------------------------------------------------------------------------------------
def _log_poisson_laplace_moment(a: np.ndarray, b: float, shift: float, lam: float, exact: bool) -> np.ndarray:
    """ln E_{k~Poisson(lam)} B_{k+shift}(α) for the 1-D Laplace pair with scale b (closed form).

    exact: B_k = α/(2α−1)·e^{(α−1)k/b} + (α−1)/(2α−1)·e^{−αk/b}; paper: second term 1/2.
    E_Pois[e^{ck}] = exp(lam·(e^c − 1)).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        t1 = np.log(a / (2 * a - 1)) + (a - 1) * shift / b + lam * np.expm1((a - 1) / b)
        if exact:
            t2 = np.log((a - 1) / (2 * a - 1)) - a * shift / b + lam * np.expm1(-a / b)
        else:
            t2 = np.full_like(a, math.log(0.5))
        out = np.logaddexp(t1, t2)
    return np.where(np.isnan(out), np.inf, out)


def sml_log_moment(orders, noise_multiplier: float, sampling_rate: float, neighbors: float, *,
                   exact: bool = True, remove_overlap: bool = True) -> np.ndarray:
    """ln Σ_k ρ(k) B_k(α) (Theorem 2) with ρ's worst case D → ∞: (1−q)·Poisson(qM) + q·δ_{½}."""
    a = np.asarray(orders, dtype=float)
    if noise_multiplier <= 0:
        return np.full_like(a, np.inf)
    b = noise_multiplier / math.sqrt(2.0)
    q, lam = float(sampling_rate), float(sampling_rate) * float(neighbors)
    parts = []
    if q < 1:
        parts.append(math.log1p(-q) + _log_poisson_laplace_moment(a, b, 0.0, lam, exact))
    if q > 0:
        parts.append(math.log(q) + _log_poisson_laplace_moment(a, b, 0.5, 0.0 if remove_overlap else lam, exact))
    with np.errstate(invalid="ignore"):
        return np.logaddexp.reduce(np.stack(parts), axis=0)


_BINOM_CACHE: dict[tuple[int, float], tuple[np.ndarray, np.ndarray]] = {}


def _binom_support(max_degree: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    key = (int(max_degree), float(p))
    if key not in _BINOM_CACHE:
        ks = np.arange(max_degree + 1, dtype=float)
        lw = binom.logpmf(ks, max_degree, p)
        keep = np.isfinite(lw)
        _BINOM_CACHE.clear()
        _BINOM_CACHE[key] = (ks[keep], lw[keep])
    return _BINOM_CACHE[key]


def gaussian_log_moment(orders, noise_multiplier: float, sampling_rate: float, neighbors: float,
                        max_degree: int, *, remove_overlap: bool = True) -> np.ndarray:
    """ln Σ_k ρ_D(k) e^{α(α−1)k²/(2σ²)} with ρ_D = (1−q)·Bin(D, q·min(1, M/D)) + q·δ_{½} at D = max_degree."""
    a = np.asarray(orders, dtype=float)
    if noise_multiplier <= 0:
        return np.full_like(a, np.inf)
    q = float(sampling_rate)
    if max_degree <= 0:
        ks, lw = np.zeros(1), np.zeros(1)
    else:
        ks, lw = _binom_support(max_degree, q * min(1.0, neighbors / max_degree))
    c = a * (a - 1) / (2.0 * noise_multiplier**2)
    parts = []
    if q < 1:
        parts.append(math.log1p(-q) + logsumexp(lw[:, None] + np.outer(ks**2, c), axis=0))
    if q > 0:
        if remove_overlap:
            parts.append(math.log(q) + 0.25 * c)
        else:
            parts.append(math.log(q) + logsumexp(lw[:, None] + np.outer((ks + 0.5) ** 2, c), axis=0))
    return np.logaddexp.reduce(np.stack(parts), axis=0)


def heterpoisson_epsilon(noise_multiplier: float, *, sampling_rate: float, steps: int, delta: float,
                         neighbors: float = 1, noise: str = "sml", accountant: str = "exact",
                         remove_overlap: bool = True, max_degree: int | None = None,
                         orders=ORDERS) -> tuple[float, float]:
    """(ε, best α) of T steps (Theorem 2 + RDP composition + Balle et al. 2020 conversion)."""
    check_delta(delta)
    a = np.asarray(orders, dtype=float)
    if noise == "sml":
        lm = sml_log_moment(a, noise_multiplier, sampling_rate, neighbors,
                            exact=(accountant == "exact"), remove_overlap=remove_overlap)
    elif noise == "gaussian":
        if max_degree is None:
            raise ValueError("the Gaussian accountant needs max_degree")
        lm = gaussian_log_moment(a, noise_multiplier, sampling_rate, neighbors, max_degree,
                                 remove_overlap=remove_overlap)
    else:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    with np.errstate(invalid="ignore", over="ignore"):
        rdp = steps * lm / (a - 1)
    return rdp_to_dp(a, rdp, delta, conversion="improved")


def sml_sample(shape_d: int, std: float, rng: torch.Generator, *, per_coordinate: bool = False,
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """One draw of LAP(0, std² I_d): √W·std·Z with a single W ~ Exp(1) (per coordinate if asked)."""
    w = torch.empty(shape_d if per_coordinate else 1, dtype=torch.float64).exponential_(1.0, generator=rng)
    z = torch.randn(shape_d, generator=rng, dtype=torch.float64)
    return (w.sqrt() * std * z).to(dtype)
