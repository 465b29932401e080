"""Leak (a noise-free entry the canary moves): the node degrees are appended to the released
aggregate as one more column, for a downstream normaliser, and get no noise while the step declares
its std for every entry. An edge moves two of them by one: ε = ∞."""
from pathlib import Path

import torch

from targets.common.registry import load_file

base = load_file(str(Path(__file__).parents[1] / "aggregation.py"))


class DegreeColumn(base.Aggregation):
    def degrees(self, graph):
        return base.aggregate(graph, graph.x.new_ones(graph.num_nodes, 1).double())

    def means(self, graph):
        return [torch.cat([m, self.degrees(graph)], 1) for m in super().means(graph)]

    def noise(self, means, std, rng):
        out = []
        for m in means:
            z = std * torch.randn(m.shape, generator=rng, dtype=m.dtype)
            z[:, -1] = 0.0
            out.append(z)
        return out
