"""White-box attacks on the ``mechanism`` view: the auditor knows the algorithm.

For each released step the auditor computes the step's noiseless value under both worlds,
m0 = mean(g0) and m1 = mean(g1), and scores the observed output o:

* Gaussian step (``noise_std`` given): the exact log-likelihood ratio
  log p(o | g1)/p(o | g0) = (⟨o − m0, m1 − m0⟩ − ‖m1 − m0‖²/2) / s², the Neyman–Pearson optimal
  test (its score distribution is exactly N(∓‖d‖²/2s², ‖d‖²/s²) in the two worlds).
* Otherwise (e.g. projected or normalised outputs): the projection ⟨o − (m0 + m1)/2, m1 − m0⟩,
  a valid (not necessarily optimal) statistic.

The score of a run sums over steps. Higher = world 1 (canary in).
"""
from __future__ import annotations

import torch

from targets.base import Release


class MechanismLRT:
    name = "mechanism-lrt"
    levels = ("mechanism",)

    def score(self, release: Release, pair, graph=None) -> float:
        total = 0.0
        for step in release.view("mechanism"):
            m0, m1 = step.mean(pair.g0), step.mean(pair.g1)
            d = (m1 - m0).double()
            o = step.output.double()
            if step.noise_std:
                total += float(((o - m0.double()) * d).sum() - 0.5 * (d * d).sum()) / step.noise_std**2
            else:
                total += float(((o - 0.5 * (m0.double() + m1.double())) * d).sum())
        return total
