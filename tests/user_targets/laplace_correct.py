"""A user's own pure ε-DP edge release, written from the README: every node's neighbour count (the
aggregation A·1, its degree) with Laplace noise, the textbook Laplace mechanism.

One undirected edge moves two counts by one each, so the ℓ1 sensitivity is Δ₁ = 2 and the Laplace
scale b = Δ₁/ε gives pure ε-DP (δ = 0). The release's log-density is exact: Σ −|out − deg(g)|/b.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from targets.base import Claim, MechanismStep, Release, Target, TargetConfig

#: ℓ1 sensitivity of the degree vector to one undirected edge (both endpoints' counts move by 1)
L1_SENSITIVITY = 2.0


@dataclass
class LaplaceCountsConfig(TargetConfig):
    """Args:
        unit (str): ``edge`` (one undirected edge).
    """

    unit: str = "edge"


def degrees(graph) -> torch.Tensor:
    out = torch.zeros(graph.num_nodes, dtype=torch.float64)
    out.index_add_(0, graph.edge_index[1], torch.ones(graph.edge_index.size(1), dtype=torch.float64))
    return out


def laplace_noise(shape, scale: float, rng: torch.Generator) -> torch.Tensor:
    """Laplace(0, scale) draws by the inverse CDF, from `rng` only."""
    u = torch.rand(shape, generator=rng, dtype=torch.float64) - 0.5
    return -scale * torch.sign(u) * torch.log1p(-2 * u.abs())


class LaplaceCounts(Target):
    name = "user-laplace-counts"
    Config = LaplaceCountsConfig
    levels = ("mechanism",)
    bugs = {}

    def scale(self) -> float:
        """The Laplace scale b = Δ₁/ε."""
        return L1_SENSITIVITY / self.config.epsilon

    def claim(self, graph) -> Claim:
        b = self.scale()
        return Claim(epsilon=L1_SENSITIVITY / b, delta=0.0, accountant="laplace (pure ε-DP)",
                     unit="edge (undirected)",
                     details={"noise": "laplace", "noise_scale": b, "sensitivity": L1_SENSITIVITY, "norm": "l1"})

    def noiseless(self, graph) -> torch.Tensor:
        return degrees(graph).unsqueeze(1)

    def fit(self, graph, rng: torch.Generator) -> Release:
        b = self.scale()
        mean = degrees(graph)
        out = mean + laplace_noise(mean.shape, b, rng)
        step = MechanismStep(output=out, mean=degrees, name="noisy neighbour counts",
                             log_density=lambda g: float(-(out - degrees(g)).abs().sum() / b))
        return Release(mechanism=[step])
