"""Leak (noise added, then partly subtracted): the noise is centred per column ("zero-mean noise"),
so it no longer reaches the column sums. Every entry keeps nearly the declared std, but the column
sums of the release equal those of A·X̂, which an edge moves by x̂_u + x̂_v: ε = ∞."""
from pathlib import Path

import torch

from targets.common.registry import load_file

base = load_file(str(Path(__file__).parents[1] / "aggregation.py"))


class CentredNoise(base.Aggregation):
    def noise(self, means, std, rng):
        out = []
        for m in means:
            z = std * torch.randn(m.shape, generator=rng, dtype=m.dtype)
            out.append(z - z.mean(0, keepdim=True))
        return out
