"""A user's node-level release of two adaptive steps (issue #44, item 4), written from the README.

Step 1 releases o₁ = A·X̂ + N(0, s₁²) on unit feature rows X̂; step 2 re-normalises the *released*
rows and aggregates them again over the full edge set: o₂ = A·rownorm(o₁) + N(0, s₂²). Step 2's
mean reads step 1's noisy release, so its law given the past moves with step 1's noise.

On an inserted hub z of degree d, the rows other than z's own move, in step 1, by x̂_z on each
neighbour (‖d₁‖² = d) and, in step 2, by rownorm(o₁[z]) on each neighbour (‖d₂‖² = d whatever o₁):
on those rows the pair is μ-GDP with μ² = d/s₁² + d/s₂². The hub's own step-2 row, the sum of its
neighbours' re-normalised step-1 rows, moves with step 1's noise.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from targets.base import Claim, MechanismStep, Release, Target, TargetConfig
from targets.common.accounting import gdp_epsilon


@dataclass
class AdaptiveConfig(TargetConfig):
    """Args:
        unit (str): ``node``.
        std_1 (float): step 1's noise std.
        std_2 (float): step 2's noise std.
        degree_bound (int): the degree the claim charges a node for.
    """

    unit: str = "node"
    std_1: float = 20.0
    std_2: float = 15.44
    degree_bound: int = 10


def rownorm(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)


def aggregate(graph, x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    out.index_add_(0, graph.edge_index[1], x[graph.edge_index[0]])
    return out


class TwoStepRenormalised(Target):
    name = "user-two-step-renormalised"
    Config = AdaptiveConfig
    levels = ("mechanism",)
    bugs = {}

    def claim(self, graph) -> Claim:
        c = self.config
        delta = c.delta or 1e-5
        d = float(c.degree_bound)
        mu = (d / c.std_1 ** 2 + d / c.std_2 ** 2) ** 0.5
        return Claim(epsilon=gdp_epsilon(mu, delta), delta=delta, accountant="gdp", unit="node", gdp_mu=mu,
                     details={"noise_std": c.std_1, "steps": 2})

    def step_1(self, graph) -> torch.Tensor:
        return aggregate(graph, rownorm(graph.x.double()))

    def fit(self, graph, rng: torch.Generator) -> Release:
        c = self.config
        m1 = self.step_1(graph)
        o1 = m1 + c.std_1 * torch.randn(m1.shape, generator=rng, dtype=m1.dtype)
        m2 = aggregate(graph, rownorm(o1))
        o2 = m2 + c.std_2 * torch.randn(m2.shape, generator=rng, dtype=m2.dtype)
        return Release(mechanism=[
            MechanismStep(output=o1, mean=self.step_1, noise_std=c.std_1, name="step 1", mean_key="step 1"),
            MechanismStep(output=o2, mean=lambda g, o1=o1: aggregate(g, rownorm(o1)), noise_std=c.std_2,
                          name="step 2")])
