"""A user's target written from the README of an earlier release: it imports the accounting helpers from
their old path, ``targets.accounting`` (moved to ``targets.common.accounting``), and the contract from
``targets.base``. It must keep working (with a DeprecationWarning) for a release after the move."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from targets.accounting import gdp_epsilon, gdp_mu
from targets.base import Claim, MechanismStep, Release, Target, TargetConfig


@dataclass
class ReadmeConfig(TargetConfig):
    unit: str = "edge"


class ReadmeTarget(Target):
    """One hop of sum aggregation over unit-row features, Gaussian noise calibrated to one undirected edge."""

    name = "readme-target"
    Config = ReadmeConfig
    levels = ("mechanism",)

    def claim(self, graph) -> Claim:
        delta = self.config.delta or 1e-5
        mu = gdp_mu(self.config.epsilon, delta)
        return Claim(epsilon=gdp_epsilon(mu, delta), delta=delta, accountant="gdp", unit="edge (undirected)",
                     gdp_mu=mu, details={"noise_std": math.sqrt(2) / mu})

    def noiseless(self, graph) -> torch.Tensor:
        x = graph.x / graph.x.norm(dim=1, keepdim=True).clamp_min(1e-12)
        return torch.zeros_like(x).index_add_(0, graph.edge_index[1], x[graph.edge_index[0]])

    def fit(self, graph, rng: torch.Generator) -> Release:
        std = self.claim(graph).details["noise_std"]
        mean = self.noiseless(graph)
        return Release(mechanism=[MechanismStep(output=mean + std * torch.randn(mean.shape, generator=rng),
                                                mean=self.noiseless, noise_std=std)])
