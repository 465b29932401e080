"""Correct control (noise shared across rows on top of independent noise): each row gets its own
draw, as declared, plus one draw per feature common to all rows. The extra draw is independent of
the data, so the release is a post-processing of a correct one: ε ≤ the claim."""
from pathlib import Path

import torch

from targets.common.registry import load_file

base = load_file(str(Path(__file__).parents[1] / "aggregation.py"))


class ExtraSharedNoise(base.Aggregation):
    def noise(self, means, std, rng):
        own = super().noise(means, std, rng)
        return [z + std * torch.randn(z.shape[1], generator=rng, dtype=z.dtype) for z in own]
