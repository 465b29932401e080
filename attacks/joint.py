"""The joint score of a composed release (issue #32): the mechanism's log-likelihood ratio plus the
DP-SGD trace's, one statistic for the whole composition.

Given the public state, the aggregation's noise and the trace's noise are independent, so the sum of
the two log-likelihood ratios is the composition's. Each mechanism step is scored as a Gaussian with
its declared std, or where it declares none (a mean taken under a public seed, e.g. a degree bound's
sampling) with the release's claimed ``info["noise_std"]``: exact where the seed changes nothing (no
edge dropped), otherwise still a score. Its threshold is held out (no natural threshold).

Where world 0 carries a gradient canary too (a replace-one pair, c0 against c1, full batch), the trace's
part is the exact Gaussian LLR of the two means: with x_t the step's noisy sum less the rest of the batch
(its clean sum less the canary it carried), ℓ_t = (⟨x_t, c1 − c0⟩ − (‖c1‖² − ‖c0‖²)/2) / std².
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

from attacks.base import Attack
from attacks.gradient import FullVectorGradientCanary, canary_and_law, step_canary
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
        std = release.noise_std
        steps = [s if s.noise_std or std is None else dataclasses.replace(s, noise_std=float(std))
                 for s in release.view(Level.MECHANISM)]
        return self.mechanism.score(dataclasses.replace(release, mechanism=steps), pair, graph)

    @staticmethod
    def replace_llr(release: Release, pair: Any) -> float:
        """The trace's LLR of a replace-one pair (module docstring)."""
        c1, _, std, q, trace = canary_and_law(release, pair)
        if q < 1.0:
            raise ValueError("a replace-one gradient pair needs full-batch DP-SGD (q = 1)")
        c0 = torch.as_tensor(pair.g0.canary_gradient, dtype=torch.float64)
        total = 0.0
        for t, step in enumerate(trace):
            if step.clean is None or step.canary is None:
                raise ValueError("a replace-one gradient pair needs the trace's clean sums and carried canaries")
            a, b = step_canary(c0, t), step_canary(c1, t)
            x = step.noisy.double() - (step.clean.double() - step.canary.double())
            total += float((x * (b - a)).sum() - 0.5 * ((b * b).sum() - (a * a).sum())) / std**2
        return total

    def score(self, release: Release, pair: Any, graph: Any = None) -> float:
        replace = getattr(pair.g0, "canary_gradient", None) is not None
        trace = self.replace_llr(release, pair) if replace else self.trace.score(release, pair, graph)
        return self.mechanism_llr(release, pair, graph) + trace
