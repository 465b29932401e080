"""Estimators: an empirical ε lower bound (with its confidence interval) from two score samples.

* :mod:`audit.stats.estimators.core`: the multi-run estimators (``cp``, ``gdp``, ``bayes``), Steinke et
  al.'s one-run bound, ``max_certifiable_eps`` and ``trial_budget``;
* :mod:`audit.stats.estimators.trade_off`: the assumption-free trade-off curve (``fdp``) and the f-DP
  one-run bound (``one-run-fdp``), registered into ``core``'s dispatch when imported here;
* :mod:`audit.stats.estimators.subsampled_fit`: the curve fit of the T-fold Poisson-subsampled Gaussian
  family (its curve in :mod:`audit.stats.estimators.subsampled_curve`), called with the family's q and T.

Everything is read through this package (``estimators.estimate(..., method=...)``). The sequential
audits live in :mod:`audit.stats.group_sequential` and the Gaussian shape check in :mod:`audit.stats.shape_check`,
both built on this package: import them from there (their old names here warn until 0.3.0).
"""
from __future__ import annotations

import importlib
import warnings
from typing import Any

from audit.stats.estimators import trade_off as _trade_off  # noqa: F401 -- registers fdp into core's dispatch
from audit.stats.estimators.core import *  # noqa: F401,F403
from audit.stats.estimators.core import (METHODS, Estimate, auc, cp_lower, cp_upper, eps_from_rates,  # noqa: F401
                                   estimate, max_certifiable_eps, one_run, one_run_epsilon, one_run_p_value,
                                   roc, select_threshold, split_indices, tpr_at_fpr, trial_budget)
from audit.stats.estimators.trade_off import (RocBand, fdp, fdp_band, gaussian_tradeoff, one_run_fdp,  # noqa: F401
                                        one_run_fdp_epsilon, one_run_fdp_mu)

#: names once handed out here lazily from the modules built on this package (a hidden import cycle):
#: deprecated, until 0.3.0
_MOVED = {**{n: "audit.stats.group_sequential" for n in ("Decision", "SequentialAudit", "look_schedule")},
          **{n: "audit.stats.shape_check" for n in ("ShapeCheck", "choose_method", "gaussian_shape_check", "auto_estimate")}}


def __getattr__(name: str) -> Any:
    """A deprecated old name (:data:`_MOVED`), with a DeprecationWarning naming its home."""
    if name in _MOVED:
        warnings.warn(f"audit.stats.estimators.{name} moved to {_MOVED[name]}.{name}; the old name goes in 0.3.0",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
