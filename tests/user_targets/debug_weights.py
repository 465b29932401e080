"""Deviant (a view left in the release): the noisy release is right, but the noiseless aggregate is
also returned as a model weight, for debugging."""
from pathlib import Path

from targets.common.registry import load_file

base = load_file(str(Path(__file__).with_name("aggregation.py")))


class DebugWeights(base.Aggregation):
    levels = ("mechanism", "weights")

    def extra_views(self, graph):
        return {"weights": {"aggregate": self.means(graph)[0].float()}}
