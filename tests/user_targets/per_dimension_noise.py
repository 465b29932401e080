"""Deviant (a calibration slip): divides the noise std by √(feature dimension), calibrating per
coordinate what the claim charges per row; it declares the std it uses, so its model is consistent."""
import math
from pathlib import Path

from targets.common.registry import load_file

base = load_file(str(Path(__file__).with_name("aggregation.py")))


class PerDimensionNoise(base.Aggregation):
    def claim(self, graph):
        claim = super().claim(graph)
        claim.details["noise_std"] = claim.details["noise_std"] / math.sqrt(graph.x.size(1))
        return claim
