"""The exact ε of a whole-node gradient canary's pair on a Gaussian DP-SGD trace (HeterPoisson's unit).

The pair (``canaries.gradient.DiracNode``): at each step the canary adds k_t·g to the clipped sum, g a
fixed vector of norm C (the clip norm), with k_t = 1 where z is central (probability q; overlap removal
then drops every copy of z) and else 2·K_t, K_t ~ Bin(t, q·p) the other stars that keep z (t its
out-neighbours among the training nodes, p = min(1, M / outdeg(z)) the keep probability). k_t has one
law in both worlds and the trace records it, so given k_t the step is a Gaussian mechanism of
sensitivity k_t·C: the step's privacy loss is Gaussian with μ_t = k_t·C/s (s the noise std), and the
loss of T steps given (k_1..k_T) is Gaussian with μ² = Σ μ_t². Hence, exactly,

    δ(ε) = Σ_{multisets of k} P(multiset) · δ_G(ε; μ(multiset)),
    δ_G(ε; μ) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2),

the same in either direction (a Gaussian loss is symmetric). This is HeterPoisson's Theorem 2 pair with
ρ = q·δ_{1/2} + (1−q)·Bin(t, q·p) (in units of 2C): the Gaussian accountant charges the same law at its
D, so the claim bounds this δ(ε). The k's law is truncated where its tail mass falls below ``tail``; the
truncated mass is added to δ for the upper figure (a δ is at most 1 on any event), left out of the
lower one: the two bracket the exact ε.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import gammaln
from scipy.stats import binom, norm

from audit.stats.pair_epsilon_value import CLOSED_FORM, PairEpsilon
from targets.common.noise import NoiseLaw
from targets.common.pair_law import PairLaw

#: the most multisets of per-step scales enumerated (beyond it the exact figure is not computed)
MAX_MULTISETS = 200_000


def scale_law(q: float, t: int, p: float, tail: float = 1e-12) -> tuple[np.ndarray, np.ndarray, float]:
    """(k values in units of C, their probabilities, the truncated mass) of one step's k_t."""
    if not (0.0 < q <= 1.0) or not (0.0 <= p <= 1.0) or t < 0:
        raise ValueError(f"need 0 < q <= 1, 0 <= p <= 1 and t >= 0, got q={q}, p={p}, t={t}")
    ks = np.arange(t + 1)
    w = (1.0 - q) * binom.pmf(ks, t, q * p)
    beyond = (1.0 - q) * binom.sf(ks, t, q * p)  # the mass of K > k
    last = int(np.argmax(beyond < tail)) if (beyond < tail).any() else t
    keep = (ks <= last) & (w > 0)
    values = np.concatenate([[1.0], 2.0 * ks[keep]])
    probs = np.concatenate([[q], w[keep]])
    return values, probs, float(max(0.0, 1.0 - probs.sum()))


def _gaussian_delta(eps: float | np.ndarray, mu: np.ndarray) -> np.ndarray:
    mu = np.maximum(mu, 1e-300)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # e^ε·Φ(·) in logs: no ∞·0 at large ε
        d = norm.cdf(-eps / mu + mu / 2) - np.exp(eps + norm.logcdf(-eps / mu - mu / 2))
    return np.where(mu > 1e-200, np.maximum(d, 0.0), 0.0)


def _composed(values: np.ndarray, probs: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(Σ_t k_t², probability) over the multisets of `steps` draws."""
    n = len(values)
    if math.comb(n + steps - 1, steps) > MAX_MULTISETS:
        raise ValueError(f"{steps} steps over {n} scales: more than {MAX_MULTISETS} multisets")
    logp = np.log(np.maximum(probs, 1e-320))
    sq, pr = [], []
    for combo in itertools.combinations_with_replacement(range(n), steps):
        counts = Counter(combo)
        log_multi = gammaln(steps + 1) - sum(gammaln(c + 1) for c in counts.values())
        sq.append(sum(values[i] ** 2 for i in combo))
        pr.append(math.exp(log_multi + sum(logp[i] for i in combo)))
    return np.asarray(sq), np.asarray(pr)


@functools.lru_cache(maxsize=256)
def composed_law(q: float, t: int, p: float, steps: int, tail: float = 1e-12) -> tuple[np.ndarray, np.ndarray, float]:
    """(Σ_t k_t², probability, the truncated mass over all steps) of the pair's `steps` steps (cached)."""
    values, probs, cut = scale_law(q, t, p, tail)
    sq, pr = _composed(values, probs, steps)
    return sq, pr, min(1.0, steps * cut)


def profile(sigma: float, q: float, t: int, p: float, steps: int, eps: np.ndarray) -> np.ndarray:
    """δ(ε) at noise scale σ = std / canary norm, with the truncated mass added (an over-estimate: the
    safe side for a trade-off curve)."""
    sq, pr, cut = composed_law(q, t, p, steps)
    e = np.asarray(eps, float)
    terms = _gaussian_delta(e.reshape(-1, 1), (np.sqrt(sq) / sigma)[None, :])  # ε × multisets
    return np.minimum(1.0, terms @ pr + cut).reshape(e.shape)


@functools.lru_cache(maxsize=4096)
def _lines(sigma: float, q: float, t: int, p: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    from audit.stats.estimators import subsampled_curve

    return subsampled_curve.duality_lines(lambda eps: profile(sigma, q, t, p, steps, eps))


def tradeoff(sigma: float, q: float, t: int, p: float, steps: int) -> Callable[[np.ndarray], np.ndarray]:
    """A lower bound on the pair's trade-off curve at noise scale σ (the ε–δ duality on :func:`profile`);
    it rises with σ (each Gaussian term's δ falls as its μ = √(Σk²)/σ does)."""
    from audit.stats.estimators import subsampled_curve

    return subsampled_curve.curve_from_lines(*_lines(float(sigma), float(q), int(t), float(p), int(steps)))


def delta_of(eps: float, *, noise_std: float, magnitude: float, q: float, t: int, p: float, steps: int,
             tail: float = 1e-12) -> tuple[float, float]:
    """(δ(ε) without the truncated mass, with it) of the pair over `steps` steps."""
    values, probs, cut = scale_law(q, t, p, tail)
    sq, pr = _composed(values, probs, steps)
    d = float((pr * _gaussian_delta(eps, np.sqrt(sq) * magnitude / noise_std)).sum())
    return d, min(1.0, d + steps * cut)


def epsilon(*, noise_std: float, magnitude: float, q: float, t: int, p: float, steps: int, delta: float,
            tail: float = 1e-12) -> tuple[float, float]:
    """(lower, upper) of the pair's exact ε at `delta` (module docstring); equal up to the truncated tail."""
    if not (noise_std > 0 and magnitude > 0 and 0.0 < delta < 1.0 and steps >= 1):
        raise ValueError("need noise_std > 0, magnitude > 0, 0 < delta < 1 and steps >= 1")
    values, probs, cut = scale_law(q, t, p, tail)
    sq, pr = _composed(values, probs, steps)
    mu = np.sqrt(sq) * magnitude / noise_std

    def solve(extra: float) -> float:
        f = lambda e: float((pr * _gaussian_delta(e, mu)).sum()) + extra - delta  # noqa: E731
        if f(0.0) <= 0:
            return 0.0
        hi = 1.0
        while f(hi) > 0:
            hi *= 2.0
            if hi > 1e4:
                return math.inf
        return float(brentq(f, 0.0, hi, xtol=1e-10))

    return solve(0.0), solve(min(1.0, steps * cut))


def of_pair(pair: Any, law: PairLaw, delta: float, steps: Callable[[], int]) -> PairEpsilon | None:
    """The exact ε of a ``dirac-node`` pair on a Poisson(q)-sampled Gaussian trace, q < 1, from its record
    (z's training out-degree t and keep probability p, the claimed std, the canary's norm); `steps` gives
    the steps one release holds. None where the record lacks that law or the pair is another."""
    recorded = getattr(pair, "recorded", None)
    gc = getattr(pair.g1, "canary_gradient", None)
    t_z = recorded("node_training_out_degree") if recorded is not None else None
    p_z, q = recorded("node_keep_probability") if recorded is not None else None, law.sampling_rate
    if gc is None or t_z is None or p_z is None or law.noise != NoiseLaw.GAUSSIAN or law.noise_std is None \
            or not (q is not None and 0.0 < q < 1.0) or delta <= 0:
        return None
    gc = np.asarray(gc, dtype=float)
    norm_c = float(np.linalg.norm(gc))
    if gc.ndim != 1 or norm_c <= 0:
        return None
    t_steps = steps()
    try:
        lo, hi = epsilon(noise_std=law.noise_std, magnitude=norm_c, q=q, t=int(t_z), p=float(p_z), steps=t_steps,
                         delta=delta)
    except ValueError:
        return None
    return PairEpsilon(value=lo, method=CLOSED_FORM, delta=delta, interval=(lo, hi), covers=("trace",),
                       caveats=("k_t's law is the declared sampler's, from public structure (not measured)",),
                       note=(f"whole node z = {law.node}: {t_steps} Gaussian steps given k_t, k_t = 1 w.p. q = {q:g} "
                             f"else 2·Bin({int(t_z)}, q·{float(p_z):.4g}), std / canary norm "
                             f"{law.noise_std / norm_c:.4g}: exact {lo:.4g} (tail-truncated upper {hi:.4g})"))
