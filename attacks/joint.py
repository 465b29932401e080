"""The joint score of a composed release (issue #32): the mechanism's log-likelihood ratio plus the
DP-SGD trace's, one statistic for the whole composition.

Given the public state, the aggregation's noise and the trace's noise are independent, so the sum of
the two log-likelihood ratios is the composition's. Each mechanism step is scored as a Gaussian with
its declared std, or where it declares none (a mean taken under a public seed, e.g. a degree bound's
sampling) with the release's claimed ``info["noise_std"]``: exact where the seed changes nothing (no
edge dropped), otherwise still a score. Its threshold is held out (no natural threshold).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from attacks.base import Attack
from attacks.gradient import FullVectorGradientCanary
from attacks.mechanism import MechanismLRT
from targets.base import Level, Release


class JointLRT(Attack):
    name = "joint-lrt"
    levels = (Level.TRACE,)
    canary_kind = "gradient"

    def __init__(self) -> None:
        self.mechanism = MechanismLRT()
        self.trace = FullVectorGradientCanary()

    def mechanism_llr(self, release: Release, pair: Any, graph: Any = None) -> float:
        std = release.info.get("noise_std")
        steps = [s if s.noise_std or std is None else dataclasses.replace(s, noise_std=float(std))
                 for s in release.view(Level.MECHANISM)]
        return self.mechanism.score(dataclasses.replace(release, mechanism=steps), pair, graph)

    def score(self, release: Release, pair: Any, graph: Any = None) -> float:
        return self.mechanism_llr(release, pair, graph) + self.trace.score(release, pair, graph)
