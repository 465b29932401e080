"""DPDGC's accountant: sampling-without-replacement Gaussian RDP, Lemma F.1, calibration."""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from scipy.special import gammaln, logsumexp

from targets.common.accounting import calibrate_decreasing, gaussian_rdp, rdp_to_dp

#: RDP orders for Lemma F.1 (spec §3.5: fine steps up to 10, coarse beyond).
ORDERS: tuple[float, ...] = tuple(
    [1.0 + x / 10.0 for x in range(1, 100)] + list(range(11, 65)) + [80, 96, 112, 128]
)


# ---------------------------------------------------------------------------------------------
# accounting
# ---------------------------------------------------------------------------------------------
def wor_gaussian_rdp(orders: tuple[float, ...], sampling_rate: float, noise_multiplier: float,
                     steps: int) -> np.ndarray:
    """RDP of `steps` Gaussian steps on fixed-size batches sampled without replacement.

    Wang, Balle & Kasiviswanathan (AISTATS 2019), Thm 27 (replace-one relation), the bound autodp's
    ``AmplificationBySampling(PoissonSampling=False)`` uses in the reference code. Same terms as
    ``dp_accounting``'s implementation (orders ≤ 256), vectorised over the orders: the forward
    differences of exp(cgf) are computed once per σ. Non-integer orders interpolate the cumulant
    (WBK19 Cor. 10).
    """
    from dp_accounting.rdp.rdp_privacy_accountant import _get_forward_diffs

    a = np.asarray(orders, dtype=float)
    if np.any(a <= 1) or np.any(a > 256):
        raise ValueError("orders must lie in (1, 256]")
    if steps == 0 or sampling_rate == 0:
        return np.zeros_like(a)
    if noise_multiplier <= 0:
        return np.full_like(a, np.inf)
    if sampling_rate >= 1.0:
        return steps * a / (2.0 * noise_multiplier**2)
    s2 = 2.0 * noise_multiplier**2
    top = int(math.ceil(a.max()))
    deltas, _ = _get_forward_diffs(lambda x: x * (x + 1.0) / s2, top)
    i = np.arange(2, top + 1)
    lo = deltas[2 * (i // 2) - 1]
    hi = deltas[2 * ((i + 1) // 2) - 1]
    term = np.minimum(math.log(4.0) + 0.5 * (lo + hi), math.log(2.0) + (i - 1) * i / s2)
    f2 = 2.0 / s2
    term[0] = min(math.log(4.0) + f2 + math.log1p(-math.exp(-f2)), f2 + math.log(2.0))
    term = term + i * math.log(sampling_rate)
    log_a = np.zeros(top + 1)  # log A_α for integer α (A_1 = 1)
    for alpha in range(2, top + 1):
        k = i[: alpha - 1]
        log_comb = gammaln(alpha + 1) - gammaln(k + 1) - gammaln(alpha - k + 1)
        log_a[alpha] = logsumexp(np.concatenate([[0.0], log_comb + term[: alpha - 1]]))
    fl = np.floor(a).astype(int)
    ce = np.ceil(a).astype(int)
    t = a - fl
    return steps * ((1 - t) * log_a[fl] + t * log_a[ce]) / (a - 1.0)


def lemma_f1_epsilon(orders: tuple[float, ...], rdp: np.ndarray, delta: float) -> tuple[float, float]:
    """Paper Lemma F.1: ε = min_α RDP(α) + log(1/(αδ))/(α−1) + log(1 − 1/α); returns (ε, α*)."""
    return rdp_to_dp(orders, rdp, delta, conversion="improved")


#: DPDGC's calibration: Brent on log σ (far fewer accountant calls than bisection; each costs
#: ~0.2 s here), σ to within 1e-7 relative, on the safe side
CALIBRATION: dict[str, Any] = {"method": "brent", "lo": 0.25, "hi": 2.0, "grow": 2.0, "slide": True,
                               "limits": (1e-6, 1e8), "rtol": 1e-7 / 4, "nudge": 1e-7}


def dpdgc_rdp(sigma: float, q: float, t_enc: int, t_clf: int, z_noise: bool, level: str) -> np.ndarray:
    """RDP curve (on :data:`ORDERS`) of one DPDGC run: T_enc DP-Emb steps, the noisy Z release
    (when it has noise: ``z_noise``), and T_clf classifier steps unless the level is ``edge``."""
    sgd = wor_gaussian_rdp(ORDERS, q, sigma, 1)
    rdp = t_enc * sgd
    if z_noise:
        rdp = rdp + gaussian_rdp(ORDERS, sigma)
    if level != "edge":
        rdp = rdp + t_clf * sgd
    return rdp


@functools.lru_cache(maxsize=256)
def dpdgc_epsilon(sigma: float, q: float, t_enc: int, t_clf: int, z_noise: bool, level: str,
                  delta: float) -> tuple[float, float]:
    """(ε, α*) of one DPDGC run by Lemma F.1 (cached: every worker's target claims once per chunk)."""
    return lemma_f1_epsilon(ORDERS, dpdgc_rdp(sigma, q, t_enc, t_clf, z_noise, level), delta)


@functools.lru_cache(maxsize=256)
def calibrated_sigma(epsilon: float, delta: float, q: float, t_enc: int, t_clf: int, level: str,
                     z_noise: bool) -> float:
    """The noise multiplier σ calibrated to `epsilon` (a pure function of the schedule: cached,
    since targets are rebuilt for every trial and each accountant call costs ~0.2 s)."""

    def eps_of(sigma: float) -> float:
        return lemma_f1_epsilon(ORDERS, dpdgc_rdp(sigma, q, t_enc, t_clf, z_noise, level), delta)[0]

    return calibrate_decreasing(eps_of, epsilon, **CALIBRATION)
