"""A user's Poisson-subsampled DP-SGD trainer, written from README.md and docs/your-target.md.

Softmax regression on the node features, trained on the training rows only (no edges): T = 5 steps,
each training node joins a step's batch with probability q = 0.3 on its own coin, every example's
gradient is clipped to norm C = 1, the clipped sum gets N(0, (σC)² I) and the update divides it by the
expected batch q·N. The claim is the RDP of T Poisson-subsampled Gaussian steps
(``subsampled_gaussian_rdp``, add/remove one training node) converted by ``rdp_to_dp``; σ is calibrated
to the configured ε by ``calibrate_decreasing``.

Views: ``trace`` (every step's noisy clipped sum; the trace type is ``targets.common.trace.DPSGDTrace``,
which docs/extending.md names: ``targets.api`` does not export it) and ``weights`` (the final parameters).

``HalfNoise`` is the planted bug: the same trainer adds noise of std σC/2 while its claim is unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from targets.api import (Claim, Composed, GaussianStep, Level, Release, Sampled, Target, TargetConfig, TraceLaw,
                         Unit, calibrate_decreasing, rdp_to_dp, subsampled_gaussian_rdp)
from targets.common.trace import DPSGDTrace, TraceStep

#: integer orders (dp_accounting's fractional-order series does not converge at q = 0.3 and small α)
ORDERS = [2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 32, 48, 64, 128, 256]


@dataclass
class PoissonSGDConfig(TargetConfig):
    sampling_rate: float = 0.3
    steps: int = 5
    clip_norm: float = 1.0
    lr: float = 0.5


class PoissonSGD(Target):
    name = "user-poisson-sgd"
    Config = PoissonSGDConfig
    levels = (Level.TRACE, Level.WEIGHTS)
    unit = Unit.NODE
    bugs: dict[str, str] = {}
    #: the std actually added, as a multiple of the claimed σC (the planted bug changes it)
    noise_factor = 1.0

    def _delta(self) -> float:
        return 1e-5 if self.config.delta is None else self.config.delta

    def _epsilon(self, sigma: float) -> float:
        c = self.config
        rdp = subsampled_gaussian_rdp(ORDERS, c.sampling_rate, sigma, c.steps)
        return rdp_to_dp(ORDERS, rdp, self._delta())[0]

    def noise_multiplier(self) -> float:
        key = (self.config.epsilon, self._delta(), self.config.sampling_rate, self.config.steps)
        if getattr(self, "_sigma", (None, None))[0] != key:
            self._sigma = (key, calibrate_decreasing(self._epsilon, self.config.epsilon, lo=0.3, hi=3.0))
        return self._sigma[1]

    def claim(self, graph) -> Claim:
        c = self.config
        sigma = self.noise_multiplier()
        step = GaussianStep(sigma, c.clip_norm)
        return Claim(epsilon=self._epsilon(sigma), delta=self._delta(),
                     accountant="RDP of Poisson-subsampled Gaussian steps (dp_accounting), improved conversion",
                     unit=Unit.NODE, step=step,
                     composition=Composed(Sampled(c.sampling_rate, step), c.steps),
                     trace=TraceLaw(noise="gaussian", noise_std=sigma * c.clip_norm, clip_norm=c.clip_norm,
                                    canary_norm=c.clip_norm, sampling_rate=c.sampling_rate))

    def dimension(self, graph) -> int:
        return (graph.x.shape[1] + 1) * (int(graph.y.max()) + 1)

    def fit(self, graph, rng: torch.Generator) -> Release:
        c = self.config
        x = graph.x.float()
        x = torch.cat([x, torch.ones(x.shape[0], 1)], dim=1)  # a bias column
        train = torch.nonzero(graph.train_mask).flatten()
        classes = int(graph.y.max()) + 1
        w = torch.zeros(x.shape[1], classes)
        std = self.noise_multiplier() * c.clip_norm
        expected = c.sampling_rate * train.numel()
        trace = DPSGDTrace(noise="gaussian", noise_std=std, clip_norm=c.clip_norm, sampling_rate=c.sampling_rate,
                           expected_batch=expected, accounted_steps=c.steps)
        for _ in range(c.steps):
            coins = torch.rand(train.numel(), generator=rng) < c.sampling_rate
            batch = train[coins]
            xb, yb = x[batch], graph.y[batch]
            err = torch.softmax(xb @ w, dim=1)
            err[torch.arange(batch.numel()), yb] -= 1.0
            grads = (xb[:, :, None] * err[:, None, :]).reshape(batch.numel(), -1)
            norms = grads.norm(dim=1, keepdim=True).clamp_min(1e-12)
            clipped = grads * torch.clamp(c.clip_norm / norms, max=1.0)
            clean = clipped.sum(0)
            noisy = clean + self.noise_factor * std * torch.randn(clean.shape, generator=rng)
            trace.steps.append(TraceStep(noisy=noisy, central=batch, clean=clean))
            w = w - c.lr * noisy.reshape(w.shape) / expected
        return Release(trace=trace, weights={"w": w})


class HalfNoise(PoissonSGD):
    """The planted bug: noise of std σC/2, the claim still that of σC."""

    name = "user-poisson-sgd-half-noise"
    noise_factor = 0.5
