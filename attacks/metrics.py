"""Score metrics shared by attacks and estimators: ROC, AUC, TPR at a fixed FPR.

Pure functions of two score samples (higher score = "the canary was in"); ``audit.stats.estimators``
re-exports them.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MAX_THRESHOLDS = 512


def candidate_thresholds(out: np.ndarray, inn: np.ndarray) -> np.ndarray:
    pooled = np.unique(np.concatenate([out, inn]))
    if pooled.size > MAX_THRESHOLDS:
        pooled = np.unique(np.quantile(pooled, np.linspace(0, 1, MAX_THRESHOLDS)))
    # "IN iff s ≥ t": t just above every observed value, plus −∞ (always IN)
    return np.concatenate([[-np.inf], pooled, [np.inf]])


def rates_at(out: np.ndarray, inn: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(false positives, false negatives) counts for "IN iff s ≥ t" at each threshold."""
    so, si = np.sort(out), np.sort(inn)
    fp = out.size - np.searchsorted(so, thresholds, side="left")
    fn = np.searchsorted(si, thresholds, side="left")
    return fp, fn


def auc(scores_out: Sequence[float], scores_in: Sequence[float]) -> float:
    """P[s_in > s_out] + ½ P[tie] (the ROC AUC)."""
    out = np.sort(np.asarray(scores_out, float))
    inn = np.asarray(scores_in, float)
    less = np.searchsorted(out, inn, side="left")
    leq = np.searchsorted(out, inn, side="right")
    return float((less + 0.5 * (leq - less)).sum() / (out.size * inn.size))


def auc_lower(scores_out: Sequence[float], scores_in: Sequence[float], confidence: float = 0.95) -> float:
    """A one-sided lower confidence bound on the AUC: the estimate less z_confidence standard errors,
    the standard error by DeLong, DeLong & Clarke-Pearson (Biometrics 44, 1988): the variance of a
    two-sample U-statistic from its structural components, ties counted ½. Asymptotic; its size at
    AUC ½ and its power are tested in ``tests/test_pilot_plan.py``."""
    from scipy.stats import norm

    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence!r}")
    out, inn = np.asarray(scores_out, float), np.asarray(scores_in, float)
    if out.size < 2 or inn.size < 2:
        raise ValueError(f"auc_lower needs at least 2 scores per world, got {out.size} and {inn.size}")
    psi = (inn[:, None] > out[None, :]) + 0.5 * (inn[:, None] == out[None, :])
    var = psi.mean(1).var(ddof=1) / inn.size + psi.mean(0).var(ddof=1) / out.size
    return float(psi.mean() - norm.ppf(confidence) * np.sqrt(var))


def roc(scores_out: Sequence[float], scores_in: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, TPR) over all thresholds, from (1, 1) down to (0, 0)."""
    out, inn = np.asarray(scores_out, float), np.asarray(scores_in, float)
    t = candidate_thresholds(out, inn)
    fp, fn = rates_at(out, inn, t)
    return fp / out.size, 1.0 - fn / inn.size


def tpr_at_fpr(scores_out: Sequence[float], scores_in: Sequence[float], fpr: float) -> float:
    f, t = roc(scores_out, scores_in)
    ok = f <= fpr
    return float(t[ok].max()) if ok.any() else 0.0
