"""The shuffled-batches bug's ε beside its Poisson claim (issue #45): the max-over-steps test, exactly.

The game dpsgd-gcn's shuffled sampler plays with a Dirac gradient canary: per epoch of L = round(1/q)
steps the canary is in exactly one uniformly drawn step, on a coordinate where the rest of the batch
is 0. Standardised by the noise, the epoch's projections are N(0, I_L) without it and N(μ e_τ, I_L)
with it, μ = 1/σ. The test reads M = max_t of them, whose densities are exact:

    f0(m) = L φ(m) Φ(m)^{L−1},   f1(m) = (L−1) φ(m) Φ(m)^{L−2} Φ(m−μ) + φ(m−μ) Φ(m)^{L−1}.

One epoch: δ(ε) = max over both directions of ∫ (f1 − e^ε f0)_+ (a fine grid). E epochs (one M per
epoch): the privacy loss of M discretised on a grid of 2e-3, rounded *down* (the lower, safe side for
a lower bound), composed E times by FFT. The claim is the target's own RDP accountant.

Run: python -m benchmarks.shuffle_vs_poisson   (about a minute)
"""
from __future__ import annotations

import logging
import math

import numpy as np
from scipy.stats import norm

from targets.dpsgd_gcn import dpsgd_epsilon

H = 2e-3


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


def max_test_epsilon(mu: float, L: int, epochs: int, delta: float) -> float:
    best = 0.0
    for direction in (0, 1):
        lo, pmf = compose(*loss_pmf(mu, L, direction), epochs)
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
    print("| q | epochs | T | σ | Poisson claim (RDP) | max-test ε (exact) | ratio |\n|---|---|---|---|---|---|---|")
    for q in (0.1, 0.05):
        L = round(1 / q)
        for epochs in (1, 3, 10):
            for sigma in (0.5, 0.7, 1.0, 1.5, 2.0):
                claim = dpsgd_epsilon(sigma, sampling_rate=q, steps=epochs * L, delta=delta)[0]
                eps = max_test_epsilon(1 / sigma, L, epochs, delta)
                print(f"| {q} | {epochs} | {epochs * L} | {sigma} | {claim:.3f} | {eps:.3f} | {eps / claim:.2f} |")


if __name__ == "__main__":
    main()
