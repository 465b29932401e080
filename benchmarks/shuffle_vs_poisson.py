"""The shuffled-batches bug's ε beside its Poisson claim (issue #45): the max-over-steps test, exactly.

The game dpsgd-gcn's shuffled sampler plays with a Dirac gradient canary: per epoch of L = round(1/q)
steps the canary is in exactly one uniformly drawn step, on a coordinate where the rest of the batch
is 0. Standardised by the noise, the epoch's projections are N(0, I_L) without it and N(μ e_τ, I_L)
with it, μ = 1/σ. The test reads M = max_t of them, whose densities are exact:

    f0(m) = L φ(m) Φ(m)^{L−1},   f1(m) = (L−1) φ(m) Φ(m)^{L−2} Φ(m−μ) + φ(m−μ) Φ(m)^{L−1}.

One epoch: δ(ε) = max over both directions of ∫ (f1 − e^ε f0)_+ (a fine grid). E epochs (one M per
epoch): the privacy loss of M discretised on a grid of 2e-3, rounded *down* (the lower, safe side for
a lower bound), composed E times by FFT. The claim is the target's own RDP accountant.

Chua et al.'s pair (ICML 2024, "How Private are DP-SGD Implementations?"): fixed-size shuffled batches
of b, every other example's clipped gradient at −C on the canary's coordinate, the canary at +C. With
the canary (bL examples) every batch sums to −b except the canary's, uniformly placed, at −b + 2; without
it (bL − 1 examples, cut into consecutive batches) the short batch is the last one, at −b + 1. Centred on
the world without it and standardised, one epoch is Q = N(0, I_L) against
P = (1/L) Σ_t N(v_t, I_L), v_t = μ(2e_t − e_L) for t < L and v_L = μ e_L: the canary usually moves a
step by 2C and the short batch back by C, ‖v_t‖ = √5 μ. The privacy loss ℓ(y) = ln (1/L) Σ_t
exp(⟨v_t, y⟩ − ‖v_t‖²/2) is exact; its law under each world is a Monte Carlo of :data:`MC` draws,
binned at H rounded down and composed E times by FFT (the optimal test's ε, estimated).

Run: python -m benchmarks.shuffle_vs_poisson   (a few minutes)
"""
from __future__ import annotations

import logging
import math

import numpy as np
from scipy.stats import norm

from targets.dpsgd_gcn import dpsgd_epsilon

H = 2e-3
MC = 1_000_000
SIGMAS = (0.2, 0.3, 0.4, 0.5, 0.7, 1.0, 1.5, 2.0)


def loss_pmf(mu: float, L: int, direction: int) -> tuple[int, np.ndarray]:
    """The privacy loss of M (world 1 over 0, or 0 over 1) on a grid of H, rounded down; (offset, pmf)."""
    m = np.linspace(-12, 12 + mu, 200001)
    dm = m[1] - m[0]
    lf0 = math.log(L) + norm.logpdf(m) + (L - 1) * norm.logcdf(m)
    a = math.log(L - 1) + norm.logpdf(m) + (L - 2) * norm.logcdf(m) + norm.logcdf(m - mu)
    lf1 = np.logaddexp(a, norm.logpdf(m - mu) + (L - 1) * norm.logcdf(m))
    if direction == 0:
        lf0, lf1 = lf1, lf0
    w = np.exp(lf1) * dm
    idx = np.floor((lf1 - lf0) / H).astype(int)
    lo = idx.min()
    pmf = np.bincount(idx - lo, weights=w)
    return lo, pmf / pmf.sum() * min(1.0, w.sum())


def compose(lo: int, pmf: np.ndarray, epochs: int) -> tuple[int, np.ndarray]:
    out_lo, out = 0, np.array([1.0])
    for _ in range(epochs):
        n = len(out) + len(pmf) - 1
        size = 1 << (n - 1).bit_length()
        out = np.clip(np.fft.irfft(np.fft.rfft(out, size) * np.fft.rfft(pmf, size), size)[:n], 0, None)
        out_lo += lo
    return out_lo, out


def chua_loss_pmf(mu: float, L: int, direction: int, seed: int = 0) -> tuple[int, np.ndarray]:
    """Chua et al.'s pair, one epoch: the privacy loss (P over Q, or Q over P) of :data:`MC` Monte Carlo
    draws from the numerator's world, binned at H rounded down; (offset, pmf)."""
    v = 2 * mu * np.eye(L)
    v[:, L - 1] -= mu
    v[L - 1] = 0.0
    v[L - 1, L - 1] = mu
    rng = np.random.default_rng([seed, L, round(mu * 1e6), direction])
    y = rng.standard_normal((MC, L))
    if direction == 1:  # draws from P: a uniformly placed v_t
        y += v[rng.integers(L, size=MC)]
    logs = y @ v.T - 0.5 * (v * v).sum(1)
    m = logs.max(1, keepdims=True)
    loss = (m[:, 0] + np.log(np.exp(logs - m).sum(1))) - math.log(L)
    if direction == 0:
        loss = -loss
    idx = np.floor(loss / H).astype(np.int64)
    lo = idx.min()
    return int(lo), np.bincount(idx - lo) / MC


def max_test_epsilon(mu: float, L: int, epochs: int, delta: float, pmf_of=loss_pmf) -> float:
    best = 0.0
    for direction in (0, 1):
        lo, pmf = compose(*pmf_of(mu, L, direction), epochs)
        losses = (lo + np.arange(len(pmf))) * H

        def delta_at(e: float) -> float:
            return float((pmf * np.clip(1 - np.exp(e - losses), 0, None)).sum())

        if delta_at(0.0) <= delta:
            continue
        a, b = 0.0, float(losses.max())
        for _ in range(50):
            c = (a + b) / 2
            a, b = (c, b) if delta_at(c) > delta else (a, c)
        best = max(best, a)
    return best


def main() -> None:
    logging.disable(logging.WARNING)
    delta = 1 / 180 ** 1.1  # dpsgd-gcn's δ on csbm
    print("| q | epochs | T | σ | Poisson claim (RDP) | Dirac canary, max test (exact) | ratio "
          "| Chua et al.'s pair, optimal test (Monte Carlo) | ratio |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    for q in (0.1, 0.05):
        L = round(1 / q)
        for epochs in (1, 3, 10):
            for sigma in SIGMAS:
                claim = dpsgd_epsilon(sigma, sampling_rate=q, steps=epochs * L, delta=delta)[0]
                eps = max_test_epsilon(1 / sigma, L, epochs, delta)
                chua = max_test_epsilon(1 / sigma, L, epochs, delta, pmf_of=chua_loss_pmf)
                print(f"| {q} | {epochs} | {epochs * L} | {sigma} | {claim:.3f} | {eps:.3f} | {eps / claim:.2f} "
                      f"| {chua:.3f} | {chua / claim:.2f} |", flush=True)


if __name__ == "__main__":
    main()
