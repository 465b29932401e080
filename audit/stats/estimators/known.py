"""Score samples from mechanisms whose exact ε is known: the ground truth of estimator tests.

Each function draws ``n`` OUT and ``n`` IN scores and returns ``(out, in, ε at δ)``:

* ``gaussian``: OUT ~ N(0, 1), IN ~ N(μ, 1) with μ the μ-GDP parameter of ε at δ (so the true ε
  at δ is ε exactly).
* ``laplace``: the Laplace mechanism, sensitivity 1, scale 1/ε: δ(ε') = 1 − e^{(ε'−ε)/2}, so
  ε(δ) = ε + 2 ln(1 − δ).
* ``randomized_response``: a bit kept with probability p = e^ε/(1 + e^ε): ε(δ) = ln((p − δ)/(1 − p)).
"""
from __future__ import annotations

import math

import numpy as np

from targets.common.accounting import gdp_mu
from targets.common.noise import NoiseLaw

DELTA = 1e-5


def gaussian(rng: np.random.Generator, n: int, eps: float, delta: float = DELTA):
    mu = gdp_mu(eps, delta)
    return rng.standard_normal(n), rng.standard_normal(n) + mu, eps


def laplace(rng: np.random.Generator, n: int, eps: float, delta: float = DELTA):
    return rng.laplace(0, 1 / eps, n), rng.laplace(1, 1 / eps, n), eps + 2 * math.log1p(-delta)


def randomized_response(rng: np.random.Generator, n: int, eps: float, delta: float = DELTA):
    p = math.exp(eps) / (1 + math.exp(eps))
    return (rng.random(n) > p).astype(float), (rng.random(n) < p).astype(float), math.log((p - delta) / (1 - p))


MECHANISMS = {NoiseLaw.GAUSSIAN.value: gaussian, NoiseLaw.LAPLACE.value: laplace, "rr": randomized_response}


def subsampled_gaussian(rng: np.random.Generator, n: int, q: float, steps: int, sigma: float,
                        true_q: float | None = None):
    """T Poisson-subsampled Gaussian steps, scored by the exact mixture log-ratio
    Σ_t ln((1 − q) + q·e^{(x_t − ½)/σ²}): (out, in, the canary's inclusions in the IN world (n × T)).
    The score uses `q`; the canary is included at rate `true_q` (default `q`)."""
    p = q if true_q is None else true_q
    included = rng.random((n, steps)) < p
    x_out = sigma * rng.standard_normal((n, steps))
    x_in = included + sigma * rng.standard_normal((n, steps))

    def score(x: np.ndarray) -> np.ndarray:
        return np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, math.log(q) + (x - 0.5) / sigma**2).sum(axis=1)

    return score(x_out), score(x_in), included
