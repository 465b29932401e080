"""Users' own targets for the sensitivity probe, loaded by file path (``path/aggregation.py:Class``).

Each releases one neighbour aggregation with Gaussian noise and protects one undirected edge. They
differ only in what they declare to the probe (``Target.declared_steps``) and in a planted mistake.
"""
from __future__ import annotations

import math

import torch

from targets.base import Claim, MechanismStep, Release, StepDeclaration, Target
from targets.common.accounting import gdp_epsilon, gdp_mu

SQRT2 = math.sqrt(2.0)


def aggregate(edge_index: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A·X: each node's row is the sum of its neighbours' rows."""
    out = torch.zeros_like(x)
    out.index_add_(0, edge_index[1], x[edge_index[0]])
    return out


def clip_rows(x: torch.Tensor) -> torch.Tensor:
    """Rows projected onto the unit ball."""
    return x / x.norm(dim=1, keepdim=True).clamp_min(1.0)


class Undeclared(Target):
    """A·clip(X) + N(0, s²) with Δ = √2, declaring nothing to the probe."""

    name = "undeclared-aggregation"
    levels = ("mechanism",)

    def mean(self, graph) -> torch.Tensor:
        return aggregate(graph.edge_index, clip_rows(graph.x))

    def claim(self, graph) -> Claim:
        delta = self.config.delta or 1e-5
        mu = gdp_mu(self.config.epsilon, delta)
        return Claim(epsilon=gdp_epsilon(mu, delta), delta=delta, accountant="gdp", unit="edge (undirected)",
                     gdp_mu=mu, details={"noise_std": SQRT2 / mu, "sensitivity": SQRT2})

    def fit(self, graph, rng: torch.Generator) -> Release:
        std = self.claim(graph).details["noise_std"]
        mean = self.mean(graph)
        out = mean + std * torch.randn(mean.shape, generator=rng, dtype=mean.dtype)
        return Release(mechanism=[MechanismStep(output=out, mean=self.mean, noise_std=std, name="A·X")])


class ClippedAggregation(Undeclared):
    """The same release, declared: the mean reads the graph and its features, which it clips to the
    unit ball itself (not linear in X: the probe searches the features by ascent)."""

    name = "clipped-aggregation"

    def declared_steps(self, graph) -> list[StepDeclaration]:
        return [StepDeclaration("A·clip(X)", self.mean, sensitivity=SQRT2, noise_std=self.claim(graph).details[
            "noise_std"], feature_bound=1.0)]


class LinearAggregation(Undeclared):
    """A·X on features the claim assumes in the unit ball, declared linear (the probe searches the
    features exactly)."""

    name = "linear-aggregation"

    def mean(self, graph) -> torch.Tensor:
        return aggregate(graph.edge_index, graph.x)

    def declared_steps(self, graph) -> list[StepDeclaration]:
        return [StepDeclaration("A·X", self.mean, sensitivity=SQRT2, feature_bound=1.0, linear=True)]


class DoubledEdges(LinearAggregation):
    """Planted: the edge list is symmetrised again although it already holds both directions, so
    every edge is counted twice and Δ is 2√2 against the claimed √2."""

    name = "doubled-edges"

    def mean(self, graph) -> torch.Tensor:
        both = torch.cat([graph.edge_index, graph.edge_index.flip(0)], dim=1)
        return aggregate(both, graph.x)


class SaturatedOverclaim(ClippedAggregation):
    """Planted: 2·tanh(A·clip(X)) claimed at √2: for small sums tanh is the identity, so an edge
    between isolated nodes moves it by up to 2√2 (a non-linear map the probe searches by ascent)."""

    name = "saturated-overclaim"

    def mean(self, graph) -> torch.Tensor:
        return 2.0 * torch.tanh(aggregate(graph.edge_index, clip_rows(graph.x)))
