"""White-box attacks on the ``mechanism`` view: the auditor knows the algorithm.

For each released step the auditor computes the step's noiseless value under both worlds,
m0 = mean(g0) and m1 = mean(g1), and scores the observed output o:

* Gaussian step (``noise_std`` given): the exact log-likelihood ratio
  log p(o | g1)/p(o | g0) = (⟨o − m0, m1 − m0⟩ − ‖m1 − m0‖²/2) / s², the Neyman–Pearson optimal
  test (its score distribution is exactly N(∓‖d‖²/2s², ‖d‖²/s²) in the two worlds).
* Row-projected Gaussian step (``row_projected``: o_u = Π(m_u + z_u)): each row that differs
  between the worlds is first scaled back by its expected pre-projection norm
  r̂_u = max(1, sqrt(‖(m0_u + m1_u)/2‖² + h·s²)) (the norm concentrates for h ≫ 1), then the
  Gaussian log-likelihood ratio above is applied to those rows.
* Otherwise (e.g. the end of several hidden noisy steps): the projection
  ⟨o − (m0 + m1)/2, m1 − m0⟩, a valid (not necessarily optimal) statistic.

The score of a run sums over steps. Higher = world 1 (canary in).

When every step is an exact Gaussian LLR, the score's symmetric threshold is 0 whatever the noise
scale, fixed before any trial is seen: :meth:`natural_threshold_for` says so, and an estimator
may then use it and keep every trial for evaluation. The other scores are only approximately
centred, so their threshold is chosen on held-out trials.
"""
from __future__ import annotations

import torch

from targets.base import Release


class MechanismLRT:
    name = "mechanism-lrt"
    levels = ("mechanism",)

    def natural_threshold_for(self, release: Release) -> float | None:
        """0 when the score is an exact Gaussian log-likelihood ratio, else None."""
        steps = release.view("mechanism")
        return 0.0 if all(s.noise_std and not s.row_projected for s in steps) else None

    def score(self, release: Release, pair, graph=None) -> float:
        total = 0.0
        for step in release.view("mechanism"):
            m0, m1 = step.mean(pair.g0), step.mean(pair.g1)
            d = (m1 - m0).double()
            o = step.output.double()
            if step.noise_std and step.row_projected:
                rows = d.abs().sum(1) > 0
                mid = 0.5 * (m0.double() + m1.double())[rows]
                o_r, d_r, m0_r = o[rows], d[rows], m0.double()[rows]
                width = o.shape[1]
                scale = torch.sqrt((mid * mid).sum(1, keepdim=True) + width * step.noise_std**2).clamp_min(1.0)
                inside = o_r.norm(dim=1, keepdim=True) < 1 - 1e-9  # the ball projection left it alone
                o_r = torch.where(inside, o_r, o_r * scale)
                total += float(((o_r - m0_r) * d_r).sum() - 0.5 * (d_r * d_r).sum()) / step.noise_std**2
            elif step.noise_std:
                total += float(((o - m0.double()) * d).sum() - 0.5 * (d * d).sum()) / step.noise_std**2
            else:
                total += float(((o - 0.5 * (m0.double() + m1.double())) * d).sum())
        return total
