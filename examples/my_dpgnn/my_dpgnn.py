"""A user's own DP-GNN trainer, audited with dpgnn-audit from its own test suite.

A one-hop mean-aggregation release with Gaussian noise, protecting one undirected edge:
``R = A·X̂ + N(0, s²)`` for unit-row features X̂ (sensitivity √2). The `leaky` switch stands for the
kind of mistake a regression test should catch: it calibrates the noise to sensitivity 1 (one
directed edge) while the claim says one undirected edge.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from targets.api import Claim, MechanismStep, Release, Target, TargetConfig, gdp_epsilon, gdp_mu


@dataclass
class MyConfig(TargetConfig):
    leaky: bool = False
    unit: str = "edge"


class MyDPGNN(Target):
    name = "my-dpgnn"
    Config = MyConfig
    levels = ("mechanism",)
    bugs = {"no-noise": "adds no noise"}

    def claim(self, graph) -> Claim:
        delta = self.config.delta or 1e-5
        mu = gdp_mu(self.config.epsilon, delta)
        return Claim(epsilon=gdp_epsilon(mu, delta), delta=delta, accountant="gdp", unit="edge (undirected)",
                     gdp_mu=mu, details={"noise_std": math.sqrt(2) / mu, "noise_multiplier": 1 / mu})

    def noiseless(self, graph) -> torch.Tensor:
        x = graph.x / graph.x.norm(dim=1, keepdim=True).clamp_min(1e-12)
        out = torch.zeros_like(x)
        out.index_add_(0, graph.edge_index[1], x[graph.edge_index[0]])
        return out

    def fit(self, graph, rng: torch.Generator) -> Release:
        std = self.claim(graph).details["noise_std"]
        applied = 0.0 if self.bug("no-noise") else (std / math.sqrt(2) if self.config.leaky else std)
        mean = self.noiseless(graph)
        out = mean + applied * torch.randn(mean.shape, generator=rng)
        return Release(mechanism=[MechanismStep(output=out, mean=self.noiseless, noise_std=std)])
