"""Users' own edge-DP releases whose noiseless step is not linear in the features, written from the
README (a ``Target`` subclass loaded by path, each step declared as a ``StepDeclaration`` with
``linear=False`` and the claim's feature bound).

Each releases one step ``f(A·clip(X)) + N(0, s²)`` with s = Δ/μ for a μ-GDP claim, where clip puts
every feature row in the unit ball (the claim's domain) and A·X sums a node's neighbours' rows.
Every class claims Δ = √2, the sensitivity of the plain sum A·X on unit rows, and differs only in f:

* ``NormalisedSum``: each row of the sum rescaled to unit norm. A flip of direction moves a row by 2,
  so the true Δ is 2√2 (u's other neighbour w with x_w = −x_v/2: the sum goes from −x_v/2 to x_v/2).
* ``AttentionSum``: a softmax-attention average over the neighbours (scores 4·⟨x_u, x_j⟩). A row
  moves by up to 2p, p = 1/(1 + e⁻⁸), when the new neighbour outweighs an opposite one: the true Δ
  lies in [2p√2, 2√2] = [2.82748, 2.82843].
* ``SharpenedTanh``: tanh(3·A·X), "tanh is 1-Lipschitz" without the gain. Per coordinate the change
  tanh(3(s + x)) − tanh(3s) is largest at s = −x/2; spread over h features a row moves by
  2√h·tanh(1.5/√h), so Δ = √2·2√h·tanh(1.5/√h) (4.1462 at h = 32, csbm's width).
* ``SaturatedSum``, the correct control: tanh(A·X), 1-Lipschitz, so Δ ≤ √2; the same argument gives
  Δ = √2·2√h·tanh(0.5/√h) (1.41055 at h = 32, 0.9974 of the claim).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from targets.base import Claim, MechanismStep, Release, StepDeclaration, Target, TargetConfig
from targets.common.accounting import gdp_epsilon, gdp_mu

SQRT2 = math.sqrt(2.0)


@dataclass
class NonlinearConfig(TargetConfig):
    """Args:
        unit (str): ``edge`` (one undirected edge).
    """

    unit: str = "edge"


def clip_rows(x: torch.Tensor) -> torch.Tensor:
    """Rows projected onto the unit ball."""
    return x / x.norm(dim=1, keepdim=True).clamp_min(1.0)


def neighbour_sum(graph, x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    out.index_add_(0, graph.edge_index[1], x[graph.edge_index[0]])
    return out


class SaturatedSum(Target):
    """tanh(A·clip(X)) + N(0, s²), Δ = √2 (the correct control)."""

    name = "user-saturated-sum"
    Config = NonlinearConfig
    levels = ("mechanism",)
    bugs = {}

    def transform(self, graph, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(neighbour_sum(graph, x))

    def mean(self, graph) -> torch.Tensor:
        return self.transform(graph, clip_rows(graph.x.double()))

    def claim(self, graph) -> Claim:
        delta = self.config.delta or 1e-5
        mu = gdp_mu(self.config.epsilon, delta)
        return Claim(epsilon=gdp_epsilon(mu, delta), delta=delta, accountant="gdp", unit="edge (undirected)",
                     gdp_mu=mu, details={"noise_std": SQRT2 / mu, "sensitivity": SQRT2})

    def declared_steps(self, graph) -> list[StepDeclaration]:
        return [StepDeclaration(self.name, self.mean, sensitivity=SQRT2, noise_std=self.claim(graph).details[
            "noise_std"], feature_bound=1.0, linear=False)]

    def fit(self, graph, rng: torch.Generator) -> Release:
        std = self.claim(graph).details["noise_std"]
        mean = self.mean(graph)
        out = mean + std * torch.randn(mean.shape, generator=rng, dtype=mean.dtype)
        return Release(mechanism=[MechanismStep(output=out, mean=self.mean, noise_std=std, name=self.name)])


class NormalisedSum(SaturatedSum):
    """Each row of A·clip(X) rescaled to unit norm (a zero row stays zero), claimed at √2."""

    name = "user-normalised-sum"

    def transform(self, graph, x: torch.Tensor) -> torch.Tensor:
        s = neighbour_sum(graph, x)
        return s / s.norm(dim=1, keepdim=True).clamp_min(1e-12)


class AttentionSum(SaturatedSum):
    """Softmax attention over the neighbours, scores 4·⟨x_u, x_j⟩, claimed at √2."""

    name = "user-attention-sum"

    def transform(self, graph, x: torch.Tensor) -> torch.Tensor:
        src, dst = graph.edge_index
        score = 4.0 * (x[src] * x[dst]).sum(1)
        top = torch.full((x.size(0),), -math.inf, dtype=x.dtype).scatter_reduce(0, dst, score, "amax")
        w = torch.exp(score - top[dst])
        norm = torch.zeros(x.size(0), dtype=x.dtype).index_add(0, dst, w)
        out = torch.zeros_like(x).index_add(0, dst, w[:, None] * x[src])
        return out / norm.clamp_min(1e-300)[:, None]


class SharpenedTanh(SaturatedSum):
    """tanh(3·A·clip(X)), claimed at √2 as if the gain were 1."""

    name = "user-sharpened-tanh"

    def transform(self, graph, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(3.0 * neighbour_sum(graph, x))
