"""Deviant (noise shared across steps while the claim composes them as independent): releases the
neighbourhood sum and its complement (the column sum minus it), reusing one noise draw for both.
Their difference is noise-free; each step alone passes its own check."""
from pathlib import Path

import torch

from targets.common.registry import load_file

base = load_file(str(Path(__file__).with_name("aggregation.py")))


class SharedNoise(base.Aggregation):
    def __init__(self, config=None, **overrides):
        super().__init__(config, **{"hops": 2, **overrides})

    def means(self, graph):
        inside = base.aggregate(graph, self.features(graph))
        return [inside, self.features(graph).sum(0, keepdim=True) - inside]

    def noise(self, means, std, rng):
        z = std * torch.randn(means[0].shape, generator=rng, dtype=means[0].dtype)
        return [z, z]
