"""A user's own edge-DP release, written from the README, and the correct control of the suite.

``hops`` noisy aggregations of unit-row features, each ``A·X̂ + N(0, s²)`` (one undirected edge moves
A·X̂ by √2), composed as μ-GDP: s = √(2·hops)/μ. The deviants of this folder each change one thing
a real implementation could get wrong, by overriding one method.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from targets.base import Claim, MechanismStep, Release, Target, TargetConfig
from targets.common.accounting import gdp_epsilon, gdp_mu


@dataclass
class AggregationConfig(TargetConfig):
    """Args:
        unit (str): ``edge`` (one undirected edge).
        hops (int): noisy aggregations released.
    """

    unit: str = "edge"
    hops: int = 1


def aggregate(graph, x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    out.index_add_(0, graph.edge_index[1], x[graph.edge_index[0]])
    return out


class Aggregation(Target):
    name = "user-aggregation"
    Config = AggregationConfig
    levels = ("mechanism",)
    bugs = {}

    def claim(self, graph) -> Claim:
        delta = self.config.delta or 1e-5
        mu = gdp_mu(self.config.epsilon, delta)
        std = math.sqrt(2 * self.config.hops) / mu
        return Claim(epsilon=gdp_epsilon(mu, delta), delta=delta, accountant="gdp", unit="edge (undirected)",
                     gdp_mu=mu, details={"noise_std": std, "sensitivity": math.sqrt(2), "steps": self.config.hops})

    def features(self, graph) -> torch.Tensor:
        x = graph.x.double()
        return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)

    def means(self, graph) -> list[torch.Tensor]:
        """The noiseless value of each released step."""
        return [aggregate(graph, self.features(graph))] * self.config.hops

    def noiseless(self, graph) -> torch.Tensor:
        return torch.cat(self.means(graph), 1)

    def noise(self, means: list[torch.Tensor], std: float, rng: torch.Generator) -> list[torch.Tensor]:
        """One independent draw per step."""
        return [std * torch.randn(m.shape, generator=rng, dtype=m.dtype) for m in means]

    def release(self, graph, means: list[torch.Tensor], noise: list[torch.Tensor]) -> list[torch.Tensor]:
        return [m + z for m, z in zip(means, noise)]

    def extra_views(self, graph) -> dict:
        return {}

    def fit(self, graph, rng: torch.Generator) -> Release:
        std = self.claim(graph).details["noise_std"]
        means = self.means(graph)
        outputs = self.release(graph, means, self.noise(means, std, rng))
        steps = [MechanismStep(output=o, mean=lambda g, k=k: self.means(g)[k], noise_std=std, name=f"hop {k + 1}")
                 for k, o in enumerate(outputs)]
        return Release(mechanism=steps, **self.extra_views(graph))


class TwoHops(Aggregation):
    """The correct control with two independent noisy hops."""

    def __init__(self, config=None, **overrides):
        super().__init__(config, **{"hops": 2, **overrides})
