"""Deviant (a leak only an edge removal shows): a node with no neighbour releases its own feature row
without noise ("nothing to protect"). No graph of the suite has an isolated node, so no inserted
edge reaches the fallback; removing a leaf's only edge does."""
from pathlib import Path

from targets.common.registry import load_file

base = load_file(str(Path(__file__).with_name("aggregation.py")))


class IsolatedFallback(base.Aggregation):
    def isolated(self, graph):
        deg = base.aggregate(graph, graph.x.new_ones(graph.num_nodes, 1).double())[:, 0]
        return deg == 0

    def means(self, graph):
        means = super().means(graph)
        lonely = self.isolated(graph)
        return [m.masked_scatter(lonely[:, None].expand_as(m), self.features(graph)[lonely]) for m in means]

    def release(self, graph, means, noise):
        lonely = self.isolated(graph)[:, None]
        return [m + z * ~lonely for m, z in zip(means, noise)]
