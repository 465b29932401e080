"""Deviant (a composition forgotten): releases eight hops, each calibrated to the whole budget as if
it were the only one."""
import math
from pathlib import Path

from targets.common.registry import load_file

base = load_file(str(Path(__file__).with_name("aggregation.py")))


class Uncomposed(base.Aggregation):
    def __init__(self, config=None, **overrides):
        super().__init__(config, **{"hops": 8, **overrides})

    def claim(self, graph):
        claim = super().claim(graph)
        claim.details["noise_std"] = claim.details["noise_std"] / math.sqrt(self.config.hops)
        return claim
