"""Deviant (a setting the accountant does not read): rows are scaled to norm `row_norm` = 4 for
utility, while the claim's Δ = √2 still assumes unit rows."""
from dataclasses import dataclass
from pathlib import Path

from targets.common.registry import load_file

base = load_file(str(Path(__file__).with_name("aggregation.py")))


@dataclass
class ScaledRowsConfig(base.AggregationConfig):
    """Args:
        row_norm (float): the norm feature rows are scaled to.
    """

    row_norm: float = 4.0


class ScaledRows(base.Aggregation):
    Config = ScaledRowsConfig

    def features(self, graph):
        return self.config.row_norm * super().features(graph)
