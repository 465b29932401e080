"""Deviant (the sensitivity probe cannot see it: no adapter, nothing declared for it): standardises
each feature column (mean 0, std 1) where the claimed Δ = √2 needs unit rows; rows then have norm
about √(feature dimension)."""
from pathlib import Path

from targets.common.registry import load_file

base = load_file(str(Path(__file__).with_name("aggregation.py")))


class RawFeatures(base.Aggregation):
    def features(self, graph):
        x = graph.x.double()
        return (x - x.mean(0)) / x.std(0).clamp_min(1e-12)
