"""Estimators: an empirical ε lower bound (with its confidence interval) from two score samples.

* :mod:`audit.estimators.core`: the multi-run estimators (``cp``, ``gdp``, ``bayes``), Steinke et
  al.'s one-run bound, ``max_certifiable_eps`` and ``trial_budget``;
* :mod:`audit.estimators.trade_off`: the assumption-free trade-off curve (``fdp``) and the f-DP
  one-run bound (``one-run-fdp``), registered into ``core``'s dispatch when imported here;
* :mod:`audit.estimators.subsampled_fit`: the curve fit of the T-fold Poisson-subsampled Gaussian
  family (its curve in :mod:`audit.estimators.subsampled_curve`), called with the family's q and T.

Everything is read through this package (``estimators.estimate(..., method=...)``); the sequential
audits (:mod:`audit.group_sequential`) and the Gaussian shape check (:mod:`audit.shape_check`) are re-exported
lazily, since they are built on it.
"""
from __future__ import annotations

import importlib
from typing import Any

from audit.estimators import core as _core
from audit.estimators import trade_off as _trade_off
from audit.estimators.core import *  # noqa: F401,F403
from audit.estimators.core import (METHODS, Estimate, auc, cp_lower, cp_upper, eps_from_rates,  # noqa: F401
                                   estimate, max_certifiable_eps, one_run, one_run_epsilon, one_run_p_value,
                                   roc, select_threshold, split_indices, tpr_at_fpr, trial_budget)
from audit.estimators.trade_off import (RocBand, fdp, fdp_band, gaussian_tradeoff, one_run_fdp,  # noqa: F401
                                        one_run_fdp_epsilon, one_run_fdp_mu)

_LAZY = {**{n: "audit.group_sequential" for n in ("Decision", "SequentialAudit", "look_schedule")},
         **{n: "audit.shape_check" for n in ("ShapeCheck", "choose_method", "gaussian_shape_check", "auto_estimate")}}


def __getattr__(name: str) -> Any:
    """The modules built on this package, and ``core``'s private helpers (``estimators.cp_bound``)."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    for module in (_core, _trade_off):
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
