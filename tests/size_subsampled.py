"""Size checks of the subsampled-Gaussian curve fit (``audit/stats/estimators/subsampled_fit.py``) on
simulated exact traces: T Poisson(q)-subsampled Gaussian steps at a σ whose ε at δ is ``eps``, scored
by the exact mixture log-ratio, with the canary's inclusions recorded (``known.subsampled_gaussian``).

The truth is ``eps``: σ is calibrated so that the pessimistic PLD (discretisation 1e-3) reads ε = eps,
which is ≥ the exact ε, so the check is lenient by at most that discretisation (≈ 0.002 at T = 3).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from audit.stats.estimators import subsampled_curve as curve
from audit.stats.estimators import subsampled_fit
from audit.stats.estimators.known import subsampled_gaussian
from size import DELTA, SizeLimits, count_exceedances, stable_seed


@functools.lru_cache(maxsize=None)
def calibrated_sigma(eps: float, q: float, steps: int) -> float:
    return curve.sigma_for_epsilon(eps, q, steps, DELTA)


@dataclass(frozen=True)
class FitCheck(SizeLimits):
    """``reps`` audits of the fit with q measured from the inclusions (``fit_measured``), on ``n``
    simulated traces per world at sampling rate ``q``, ``steps`` steps, ε = ``eps``."""

    q: float
    steps: int
    n: int = 50_000
    reps: int = 80
    eps: float = 2.0
    confidence: float = 0.8

    def sigma(self) -> float:
        return calibrated_sigma(self.eps, self.q, self.steps)

    def run(self, name: str) -> int:
        sigma = self.sigma()
        rng = np.random.default_rng(stable_seed("size-fit", name))

        def draw(r: int) -> tuple[float, float]:
            out, inn, included = subsampled_gaussian(rng, self.n, self.q, self.steps, sigma)
            e = subsampled_fit.fit_measured(out, inn, inclusions=included, delta=DELTA,
                                            confidence=self.confidence, seed=r)
            return e.eps_lb, self.eps

        return count_exceedances(draw, self.reps, self.beta, f"{name} (subsampled-gaussian)")


FIT_CHECKS = {f"q={q},T={t}": FitCheck(q, t) for q in (0.1, 0.5) for t in (3, 20)}
