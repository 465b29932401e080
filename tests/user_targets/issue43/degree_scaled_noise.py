"""Leak (noise scaled by a data-dependent factor that can be 0): each row's noise is multiplied by
(d − 1)/d, a small-sample correction copied from a variance estimator. A leaf (d = 1) is released
without noise, and an edge at a leaf makes it noisy: ε = ∞ (every other row is under-noised too)."""
from pathlib import Path

from targets.common.registry import load_file

base = load_file(str(Path(__file__).parents[1] / "aggregation.py"))


class DegreeScaledNoise(base.Aggregation):
    def release(self, graph, means, noise):
        deg = base.aggregate(graph, graph.x.new_ones(graph.num_nodes, 1).double())
        factor = (deg - 1).clamp_min(0) / deg.clamp_min(1)
        return [m + z * factor for m, z in zip(means, noise)]
