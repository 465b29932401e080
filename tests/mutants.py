"""Mutants of the code under test, for the tests that must catch them (``tests/test_mutants.py``).

* :func:`inflate_bound`: every :class:`audit.stats.estimators.Estimate` that ``method`` builds reports
  ``factor`` × its ε lower bound (and interval), whatever path built it (``estimate``, the game,
  ``auto``, sequential looks): each estimator builds its result through ``core.Estimate``.
* :func:`shrink_noise`: the reference Gaussian mechanism releases ``factor`` × its calibrated noise
  while its claim (and what it declares to the auditor) stays the same.
"""
from __future__ import annotations

import numpy as np
import pytest

import audit.stats.estimators.core as core
from targets.gaussian import GaussianMechanism


def inflate_bound(monkeypatch: pytest.MonkeyPatch, method: str, factor: float) -> None:
    honest = core.Estimate

    class Inflated(honest):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if self.method == method:
                object.__setattr__(self, "eps_lb", self.eps_lb * factor)
                object.__setattr__(self, "interval", tuple(x * factor for x in self.interval))

    monkeypatch.setattr(core, "Estimate", Inflated)


def shrink_noise(monkeypatch: pytest.MonkeyPatch, factor: float) -> None:
    calibrated = GaussianMechanism.noise_std
    monkeypatch.setattr(GaussianMechanism, "noise_std", lambda self, graph: factor * calibrated(self, graph))


def box_on_the_wrong_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """The subsampled-Gaussian fit inverted from lower, not upper, confidence bounds on the error rates."""
    from audit.stats.estimators import subsampled_fit as fit

    def lower_box(out, inn, thresholds, beta):
        fp, fn = fit.rates_at(out, inn, thresholds)
        k = len(thresholds)
        lo = [[core.cp_lower(int(c), size, beta / (2 * k)) for c in counts] for counts, size in
              ((fp, out.size), (fn, inn.size))]
        return fit.Box(*(np.array(x) for x in lo))

    monkeypatch.setattr(fit, "_box", lower_box)


def pessimistic_report(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fit reports ε(σ̂) from the pessimistic PLD (an upper estimate) instead of the optimistic one.
    No size check sees it (``tests/test_subsampled_fit.py``'s docstring says why); the report's direction
    check does (``tests/test_family_fit.py``: the reported figure lies strictly below the pessimistic one)."""
    from audit.stats.estimators import subsampled_curve as curve

    honest = curve.epsilon
    monkeypatch.setattr(curve, "epsilon", lambda *a, pessimistic=False: honest(*a, pessimistic=True))


def trust_declared_q(monkeypatch: pytest.MonkeyPatch, declared: float) -> None:
    """The fit uses the declared sampling rate instead of the one measured from the inclusions."""
    from audit.stats.estimators import subsampled_fit as fit

    def trusting(out, inn, *, inclusions, delta, confidence=0.95, q_share=0.1, seed=0):
        return fit.fit(out, inn, delta=delta, steps=int(np.shape(inclusions)[1]), q=declared,
                       confidence=confidence, seed=seed)

    monkeypatch.setattr(fit, "fit_measured", trusting)
