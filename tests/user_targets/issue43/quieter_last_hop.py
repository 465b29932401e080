"""Leak (one step under-noised): two hops, the last one "fine-tuned" with half the std while the
claim composes two equal steps. True μ = √(μ²/2 + 2μ²) = √2.5·μ for the claimed μ: finite."""
from pathlib import Path

from targets.common.registry import load_file

base = load_file(str(Path(__file__).parents[1] / "aggregation.py"))


class QuieterLastHop(base.Aggregation):
    def __init__(self, config=None, **overrides):
        super().__init__(config, **{"hops": 2, **overrides})

    def noise(self, means, std, rng):
        first, last = super().noise(means, std, rng)
        return [first, last / 2]
