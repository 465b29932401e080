"""Mutants of the code under test, for the tests that must catch them (``tests/test_mutants.py``).

* :func:`inflate_bound`: every :class:`audit.estimators.Estimate` that ``method`` builds reports
  ``factor`` × its ε lower bound (and interval), whatever path built it (``estimate``, the game,
  ``auto``, sequential looks): each estimator builds its result through ``core.Estimate``.
* :func:`shrink_noise`: the reference Gaussian mechanism releases ``factor`` × its calibrated noise
  while its claim (and what it declares to the auditor) stays the same.
"""
from __future__ import annotations

import pytest

import audit.estimators.core as core
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
