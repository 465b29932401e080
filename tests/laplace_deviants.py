"""Targets whose steps declare a Laplace law (``MechanismStep.laplace_scale``), for the declared check's
Laplace battery (tests/test_declared_laplace.py, benchmarks/laplace_battery.py).

:class:`HonestLaplace` is the reference aggregation A·X̂ of ``tests/deviants.py`` with Laplace noise of
scale b = s/√2 (the reference's std s), declared with its exact log-density; each deviant departs from
its declaration in ONE way (a scale, a law, a draw shared across rows, entries or steps)."""
from __future__ import annotations

import math
from typing import Any

import torch

from deviants import Honest
from targets.base import MechanismStep, Release


def laplace(shape: Any, b: float, rng: torch.Generator) -> torch.Tensor:
    """Laplace(0, b) draws by the inverse CDF, float64."""
    u = torch.rand(shape, generator=rng, dtype=torch.float64).clamp(1e-15, 1 - 1e-15) - 0.5
    return -b * torch.sign(u) * torch.log1p(-2 * u.abs())


class HonestLaplace(Honest):
    """``steps`` releases of A·X̂ + Laplace(0, b), independent draws, each declaring b and its log-density."""

    name = "laplace-honest"
    steps = 1

    def scale(self, graph: Any) -> float:
        return self.declared_std(graph) / math.sqrt(2)

    def draws(self, shape: torch.Size, b: float, rng: torch.Generator) -> list[torch.Tensor]:
        return [laplace(shape, b, rng) for _ in range(self.steps)]

    def mean64(self, graph: Any) -> torch.Tensor:
        """The declared mean in float64, computed once per graph object (a world is fitted many times)."""
        cache = self.__dict__.setdefault("_means", {})
        if id(graph) not in cache:
            cache[id(graph)] = (graph, self.declared_mean(graph).double())
        return cache[id(graph)][1]

    def fit(self, graph: Any, rng: torch.Generator) -> Release:
        b = self.scale(graph)
        mean = self.mean64(graph)
        steps = []
        for k, z in enumerate(self.draws(mean.shape, b, rng)):
            out = mean + z
            steps.append(MechanismStep(output=out, mean=self.mean64, name=f"A·X + Lap {k}", laplace_scale=b,
                                       mean_key="A·X", log_density=lambda g, out=out: -float((out - self.mean64(g)).abs().sum()) / b))
        return Release(mechanism=steps)


class SmallScale(HonestLaplace):
    """Laplace noise of scale 0.9·b while declaring b."""

    name = "laplace-small-scale"
    factor = 0.9

    def draws(self, shape, b, rng):
        return [laplace(shape, self.factor * b, rng)]


class GaussianNoise(HonestLaplace):
    """Gaussian noise of the declared Laplace law's std (b√2), declared Laplace."""

    name = "laplace-gaussian"

    def draws(self, shape, b, rng):
        return [math.sqrt(2) * b * torch.randn(shape, generator=rng, dtype=torch.float64)]


class RowBroadcast(HonestLaplace):
    """One Laplace row of width f broadcast to every node."""

    name = "laplace-row-broadcast"

    def draws(self, shape, b, rng):
        return [laplace(shape[-1], b, rng).expand(shape).clone()]


class EntryBroadcast(HonestLaplace):
    """One Laplace draw per node, shared by all its entries."""

    name = "laplace-entry-broadcast"

    def draws(self, shape, b, rng):
        return [laplace((shape[0], 1), b, rng).expand(shape).clone()]


class TwoSteps(HonestLaplace):
    """The honest mechanism released twice, with independent draws."""

    name = "laplace-two-steps"
    steps = 2


class SharedSteps(TwoSteps):
    """Two steps sharing one draw (each step alone is a correct Laplace release)."""

    name = "laplace-shared-steps"

    def draws(self, shape, b, rng):
        z = laplace(shape, b, rng)
        return [z, z.clone()]
