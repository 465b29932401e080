"""Deviant (an ℓ1 sensitivity miscounted): the Laplace neighbour counts of ``laplace_correct.py``
calibrated as if one edge moved one count (Δ₁ = 1) while it moves two: the scale is b = 1/ε, half
the correct 2/ε, and the claim still says ε.

True ε of the release (pure, δ = 0): Δ₁/b = 2/(1/ε) = 2ε, i.e. 2 at the default ε = 1. At δ > 0 it is
the ε of two independent unit-sensitivity Laplace coordinates of scale 1/ε (below 2ε, for the
δ this claim does not state).
"""
from dataclasses import replace
from pathlib import Path

from targets.common.registry import load_file

base = load_file(str(Path(__file__).with_name("laplace_correct.py")))


class LaplaceMiscalibrated(base.LaplaceCounts):
    name = "user-laplace-miscalibrated"

    def scale(self) -> float:
        return 1.0 / self.config.epsilon  # the slip: one count charged per edge

    def claim(self, graph):
        claim = super().claim(graph)  # the claim the user believes: ε, with Δ₁ = 1
        return replace(claim, epsilon=self.config.epsilon, details={**claim.details, "sensitivity": 1.0})
