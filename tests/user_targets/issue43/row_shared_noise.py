"""Leak (noise shared across rows): one noise vector per feature, broadcast over every node
(``torch.randn(f)`` where ``torch.randn(n, f)`` was meant). Each entry has the declared std, but the
difference of two rows is noise-free: ε = ∞."""
from pathlib import Path

import torch

from targets.common.registry import load_file

base = load_file(str(Path(__file__).parents[1] / "aggregation.py"))


class RowSharedNoise(base.Aggregation):
    def noise(self, means, std, rng):
        return [std * torch.randn(m.shape[1], generator=rng, dtype=m.dtype).expand_as(m) for m in means]
