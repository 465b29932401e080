"""A user's target written on the contract's core alone (``targets.core.TargetCore``): no protocol
mixed in, so the harness runs it with every protocol's default.

One noisy aggregation of unit-row features, ``A·X̂ + N(0, s²)`` (one undirected edge moves A·X̂ by √2),
calibrated as μ-GDP: s = √2/μ. The mechanism is correct, so an audit must read CONSISTENT.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from targets.common.accounting import gdp_epsilon, gdp_mu
from targets.common.claim import Claim, Composed, GaussianStep
from targets.config import TargetConfig
from targets.core import TargetCore
from targets.release import MechanismStep, Release


@dataclass
class CoreOnlyConfig(TargetConfig):
    """Args:
        unit (str): ``edge`` (one undirected edge).
    """

    unit: str = "edge"


class CoreOnlyAggregation(TargetCore):
    name = "user-core-only"
    Config = CoreOnlyConfig
    levels = ("mechanism",)

    def _mu(self) -> tuple[float, float]:
        delta = self.config.delta or 1e-5
        return gdp_mu(self.config.epsilon, delta), delta

    def claim(self, graph) -> Claim:
        mu, delta = self._mu()
        step = GaussianStep(noise_multiplier=1.0 / mu, sensitivity=math.sqrt(2))
        return Claim(epsilon=gdp_epsilon(mu, delta), delta=delta, accountant="gdp", unit="edge (undirected)",
                     gdp_mu=mu, step=step, composition=Composed(step, 1))

    def aggregate(self, graph) -> torch.Tensor:
        x = graph.x.double()
        x = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
        out = torch.zeros_like(x)
        out.index_add_(0, graph.edge_index[1], x[graph.edge_index[0]])
        return out

    def fit(self, graph, rng: torch.Generator) -> Release:
        mean = self.aggregate(graph)
        std = math.sqrt(2) / self._mu()[0]
        noisy = mean + std * torch.randn(mean.shape, generator=rng, dtype=mean.dtype)
        return Release(mechanism=[MechanismStep(output=noisy, mean=self.aggregate, noise_std=std)])
