"""Leak (noise of lower rank than the release): the noise is drawn in an 8-dimensional latent and
mapped to the f feature columns by a fixed projection, scaled to the declared std per entry. Each
row's component orthogonal to the projection's row space is noise-free, and an edge moves it
(by x̂_v at row u): ε = ∞."""
from pathlib import Path

import torch

from targets.common.registry import load_file

base = load_file(str(Path(__file__).parents[1] / "aggregation.py"))

LATENT = 8


class LowRankNoise(base.Aggregation):
    def projection(self, cols, dtype):
        w = torch.randn(LATENT, cols, generator=torch.Generator().manual_seed(0), dtype=dtype)
        return w / w.norm(dim=0, keepdim=True)  # unit columns: each entry's noise has variance std²

    def noise(self, means, std, rng):
        out = []
        for m in means:
            w = self.projection(m.shape[1], m.dtype)
            out.append(std * torch.randn(m.shape[0], LATENT, generator=rng, dtype=m.dtype) @ w)
        return out
