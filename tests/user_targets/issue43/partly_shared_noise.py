"""Leak (noise partly reused across steps): releases the neighbourhood sum and its complement (the
column sum minus it); the second step's noise keeps a share ρ = 0.9 of the first's ("momentum" on
the noise), z₂ = ρ·z₁ + √(1 − ρ²)·z′, so each entry has the declared std. The means move in opposite
directions, where the noise has variance 2s²(1 − ρ): true μ = μ/√(1 − ρ) = √10·μ: finite."""
import math
from pathlib import Path

import torch

from targets.common.registry import load_file

base = load_file(str(Path(__file__).parents[1] / "aggregation.py"))

RHO = 0.9


class PartlySharedNoise(base.Aggregation):
    def __init__(self, config=None, **overrides):
        super().__init__(config, **{"hops": 2, **overrides})

    def means(self, graph):
        inside = base.aggregate(graph, self.features(graph))
        return [inside, self.features(graph).sum(0, keepdim=True) - inside]

    def noise(self, means, std, rng):
        z, fresh = (std * torch.randn(means[0].shape, generator=rng, dtype=means[0].dtype) for _ in range(2))
        return [z, RHO * z + math.sqrt(1 - RHO**2) * fresh]
