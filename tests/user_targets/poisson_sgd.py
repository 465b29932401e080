"""A user's Poisson-subsampled DP-SGD trainer, written from README.md and docs/your-target.md.

Softmax regression on the node features, trained on the training rows only (no edges): T = 5 steps,
each training node joins a step's batch with probability q = 0.3 on its own coin, every example's
gradient is clipped to norm C = 1, the clipped sum gets N(0, (σC)² I) and the update divides it by the
expected batch q·N. The claim is the RDP of T Poisson-subsampled Gaussian steps
(``subsampled_gaussian_rdp``, add/remove one training node) converted by ``rdp_to_dp``; σ is calibrated
to the configured ε by ``calibrate_decreasing``.

Views: ``trace`` (every step's noisy clipped sum, a ``targets.api.DPSGDTrace``) and ``weights`` (the final
parameters).

``HalfNoise`` is the planted bug: the same trainer adds noise of std σC/2 while its claim is unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from targets.api import (Claim, Composed, DPSGDTrace, GaussianStep, Level, Release, Sampled, Target, TargetConfig,
                         TraceLaw, TraceStep, Unit, calibrate_decreasing, child_generator, rdp_to_dp,
                         subsampled_gaussian_rdp)

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

    def _canary_plan(self, graph, rng: torch.Generator):
        """Per step, (the canary's coin, the vector added): this trainer never reads a gradient canary."""
        return None

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
        plan = self._canary_plan(graph, rng)
        for t in range(c.steps):
            coins = torch.rand(train.numel(), generator=rng) < c.sampling_rate
            batch = train[coins]
            xb, yb = x[batch], graph.y[batch]
            err = torch.softmax(xb @ w, dim=1)
            err[torch.arange(batch.numel()), yb] -= 1.0
            grads = (xb[:, :, None] * err[:, None, :]).reshape(batch.numel(), -1)
            norms = grads.norm(dim=1, keepdim=True).clamp_min(1e-12)
            clipped = grads * torch.clamp(c.clip_norm / norms, max=1.0)
            clean = clipped.sum(0)
            canary_in, g = plan(t) if plan is not None else (None, None)
            if g is not None:
                clean = clean + g
            noisy = clean + self.noise_factor * std * torch.randn(clean.shape, generator=rng)
            trace.steps.append(TraceStep(noisy=noisy, central=batch, clean=clean, canary_in=canary_in))
            w = w - c.lr * noisy.reshape(w.shape) / expected
        return Release(trace=trace, weights={"w": w})


class HalfNoise(PoissonSGD):
    """The planted bug: noise of std σC/2, the claim still that of σC."""

    name = "user-poisson-sgd-half-noise"
    noise_factor = 0.5



class InformedPoissonSGD(PoissonSGD):
    """The same trainer reading the gradient canary as docs/your-target.md says: ``graph.canary_gradient``
    (world 1 only) is added unclipped to each step's clipped sum where its own Poisson(q) coin says so, the
    coins drawn from a generator split off the run's generator first, in both worlds; ``canary_in`` says
    whether the step's clean sum holds the canary."""

    name = "user-poisson-sgd-informed"

    def _canary_plan(self, graph, rng: torch.Generator):
        c = self.config
        coins = torch.rand(c.steps, generator=child_generator(rng)) < c.sampling_rate
        canary = getattr(graph, "canary_gradient", None)

        def at(t: int):  # canary_in: whether this step's clean sum holds the canary (never in world 0)
            if canary is None or not coins[t]:
                return False, None
            g = torch.as_tensor(canary, dtype=torch.float32)
            return True, (g[t] if g.dim() == 2 else g)

        return at


class InformedHalfNoise(InformedPoissonSGD):
    """The planted bug on the canary-reading trainer: noise of std σC/2, the claim still that of σC."""

    name = "user-poisson-sgd-informed-half-noise"
    noise_factor = 0.5


class UnrecordedPoissonSGD(InformedPoissonSGD):
    """Reads the gradient canary but records no ``canary_in`` (the docs allow it: the sampler is then unmeasured)."""

    name = "user-poisson-sgd-unrecorded"

    def _canary_plan(self, graph, rng: torch.Generator):
        informed = super()._canary_plan(graph, rng)
        return lambda t: (None, informed(t)[1])
