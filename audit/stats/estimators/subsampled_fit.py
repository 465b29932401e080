"""A curve fit for the subsampled-Gaussian family (Nasr et al. 2023, "Tight auditing of differentially
private machine learning", §5, with the Gaussian curve replaced by the T-fold Poisson(q)-subsampled
Gaussian's curve of :mod:`audit.stats.estimators.subsampled_curve`).

Assumption: the audited pair is T steps of a Poisson(q)-subsampled Gaussian mechanism, only its
noise multiplier σ unknown (the family). cp stays the assumption-free floor beside it.

1. **Thresholds on a pilot.** A seeded share (``select_fraction``) of each world's trials picks k
   thresholds and the score's orientation; the rest certifies. Nothing the certifying trials show
   chooses anything.
2. **Error bounds.** At each threshold, FPR_u and FNR_u are Clopper–Pearson upper bounds at
   β_box/(2k) on the certifying trials; jointly they hold with probability ≥ 1 − β_box.
3. **Inversion.** The curve f_σ rises with σ (more noise, harder tests). On that event the true σ is
   never rejected: f_σ(FPR_u) ≤ f_σ(FPR) ≤ FNR ≤ FNR_u at every threshold (f decreasing, f a lower
   bound of the curve). So any σ the data rejects (some threshold with f_σ(FPR_u) > FNR_u) lies above
   the true one; σ̂ is the smallest rejected σ of a fixed geometric grid (binary search).
4. **Report.** ε_lb = ε(σ̂) at δ from the optimistic PLD (a lower estimate of ε(σ̂) ≤ ε(σ_true)).
5. **Unknown q.** Given an interval [q_lo, q_hi] for q (its own level β_q, paid from β: the box gets
   β − β_q), the fit runs per cell [q_i, q_{i+1}] of a grid covering it: for q in the cell the curve
   at q_{i+1} lies below (more sampling, more leakage), so σ̂(q_{i+1}) bounds σ from above, and ε is
   increasing in q, so ε(σ̂(q_{i+1}), q_i) is a lower bound; ε_lb is the minimum over the cells.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

import audit.stats.estimators.core as _e
from attacks.metrics import rates_at
from audit.stats.estimators import subsampled_curve as curve
from targets.common.accounting import check_delta

METHOD = "subsampled-gaussian"
ASSUMPTION = "T Poisson(q)-subsampled Gaussian steps, only the noise scale unknown"
_SIGMAS = np.geomspace(0.25, 400.0, 1440)  # the σ grid of the inversion (ratio ≈ 1.005; to ε ≈ 0)
_THRESHOLDS = 2                            # k
_SELECT_FRACTION = 0.2
_PILOT_RATES = np.geomspace(0.5, 1e-4, 27)  # candidate thresholds: pilot quantiles at these rates
_Q_STEP = 1 / 400                          # an interval for q is widened onto multiples of this


@dataclass(frozen=True)
class Box:
    """Upper bounds on the error rates at the fixed thresholds, jointly at 1 − β."""

    fpr_ub: np.ndarray
    fnr_ub: np.ndarray


#: σ ↦ a lower bound on the family's trade-off curve at noise scale σ (the family's other parameters fixed)
CurveOf = Callable[[float], Callable[[np.ndarray], np.ndarray]]


def _subsampled(q: float, steps: int) -> CurveOf:
    return lambda sigma: curve.tradeoff(sigma, q, steps)


def rejects_of(curve_of: CurveOf, sigma: float, box: Box) -> bool:
    """Whether σ is rejected: some threshold's bounds fall below the family's curve at σ."""
    return bool(np.any(curve_of(sigma)(box.fpr_ub) > box.fnr_ub + 1e-12))


def rejects(sigma: float, q: float, steps: int, box: Box) -> bool:
    """:func:`rejects_of` for T Poisson(q)-subsampled Gaussian steps."""
    return rejects_of(_subsampled(q, steps), sigma, box)


def sigma_hat_of(curve_of: CurveOf, box: Box) -> float | None:
    """The smallest grid σ that `box` rejects (binary search; None when it rejects none). Valid for any
    family whose curve rises with σ."""
    return smallest_rejected(lambda sigma: rejects_of(curve_of, sigma, box))


def smallest_rejected(rejected: Callable[[float], bool], refine: int = 0) -> float | None:
    """The smallest σ of the fit's grid that `rejected` rejects, for a test whose rejections are upward closed in σ
    (every σ above a rejected one is rejected: binary search); None when it rejects none. `refine` > 0 bisects
    that many more times between the grid neighbours (still a rejected σ, closer to the boundary)."""
    lo, hi = 0, len(_SIGMAS) - 1   # invariant: hi rejected; lo not rejected, or the first
    if not rejected(float(_SIGMAS[hi])):
        return None
    if rejected(float(_SIGMAS[lo])):
        return float(_SIGMAS[lo])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if rejected(float(_SIGMAS[mid])) else (mid, hi)
    below, above = float(_SIGMAS[lo]), float(_SIGMAS[hi])
    for _ in range(refine):
        mid = math.sqrt(below * above)
        below, above = (below, mid) if rejected(mid) else (mid, above)
    return above


def sigma_hat(q: float, steps: int, box: Box) -> float | None:
    """:func:`sigma_hat_of` for T Poisson(q)-subsampled Gaussian steps."""
    return sigma_hat_of(_subsampled(q, steps), box)


def _box(out: np.ndarray, inn: np.ndarray, thresholds: np.ndarray, beta: float) -> Box:
    """Clopper–Pearson upper bounds at β/(2k) on both error rates at the k thresholds (jointly at 1 − β)."""
    fp, fn = rates_at(out, inn, thresholds)
    k = len(thresholds)
    return Box(_e.cp_upper_vec(np.asarray(fp), out.size, beta / (2 * k)),
               _e.cp_upper_vec(np.asarray(fn), inn.size, beta / (2 * k)))



def perfect_box(n_out: int, n_in: int, beta_box: float) -> Box:
    """The box of a perfect attack (no error at any of the k thresholds) on these certifying trial counts."""
    b = beta_box / (2 * _THRESHOLDS)
    return Box(np.full(_THRESHOLDS, _e.cp_upper(0, n_out, b)), np.full(_THRESHOLDS, _e.cp_upper(0, n_in, b)))


def split_trials(n_out: int, n_in: int, select_fraction: float, seed: int, what: str
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(selection OUT, certifying OUT, selection IN, certifying IN) indices: a seeded `select_fraction` of each
    world picks the thresholds, the rest certifies; an error where either part has fewer than 10 trials."""
    if not (0.0 < select_fraction < 1.0):
        raise ValueError(f"select_fraction must be in (0, 1), got {select_fraction!r}")
    so, eo = _e.split_indices(n_out, select_fraction, seed)
    si, ei = _e.split_indices(n_in, select_fraction, seed + 1)
    if min(so.size, si.size, eo.size, ei.size) < 10:
        raise ValueError(f"{what} needs at least 13 trials per world")
    return so, eo, si, ei


def _model_sigma(curve_of: CurveOf, auc: float) -> float:
    """The smallest grid σ whose curve's area 1 − ∫f is ≤ the pilot's AUC (binary search; the area
    falls as σ grows): a plug-in for the threshold choice only."""
    alphas = np.linspace(0.0, 1.0, 201)

    def below(i: int) -> bool:
        return 1.0 - float(np.trapezoid(curve_of(_SIGMAS[i])(alphas), alphas)) <= auc

    lo, hi = 0, len(_SIGMAS) - 1
    if below(lo) or not below(hi):
        return float(_SIGMAS[lo] if below(lo) else _SIGMAS[hi])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if below(mid) else (mid, hi)
    return float(_SIGMAS[hi])


def pilot_choice(curve_of: CurveOf, out: np.ndarray, inn: np.ndarray, n_out: int, n_in: int,
                 beta: float) -> tuple[float, np.ndarray]:
    """(orientation, k thresholds) from the pilot alone: the orientation of the larger AUC; a σ whose
    curve has the pilot's AUC; the k false-positive rates at which that curve's error pair, bounded
    as the certifying trials would bound it, rejects the smallest σ; the thresholds are the pilot's
    OUT quantiles at those rates (model-based, so the pilot's noise does not pick its luckiest tail)."""
    auc = _e.auc(out, inn)
    sign = 1.0 if auc >= 0.5 else -1.0
    f = curve_of(_model_sigma(curve_of, max(auc, 1.0 - auc)))
    b = beta / (2 * _THRESHOLDS)
    scored = []
    for a in _PILOT_RATES[_PILOT_RATES * min(n_out, n_in) >= 1]:
        fpr_ub = _e.cp_upper(int(round(a * n_out)), n_out, b)
        fnr_ub = _e.cp_upper(int(round(float(f(np.array([a]))[0]) * n_in)), n_in, b)
        s = sigma_hat_of(curve_of, Box(np.array([fpr_ub]), np.array([fnr_ub])))
        scored.append((s if s is not None else math.inf, float(a)))
    rates = [a for _, a in sorted(scored)[:_THRESHOLDS]]
    return sign, np.unique(np.quantile(sign * out, 1.0 - np.array(rates)))


def _q_cells(q_lo: float, q_hi: float) -> np.ndarray:
    """Cell ends covering [q_lo, q_hi]: the interval widened outward onto the lattice of ``_Q_STEP``
    (so curves are shared between audits); a single declared q is one cell [q, q]."""
    if q_hi == q_lo:
        return np.array([q_lo, q_lo])
    lo = max(math.floor(q_lo / _Q_STEP), 1)
    hi = min(math.ceil(q_hi / _Q_STEP), round(1 / _Q_STEP))
    return np.arange(lo, hi + 1) * _Q_STEP if hi > lo else np.array([lo, lo]) * _Q_STEP


def fit(scores_out: Sequence[float], scores_in: Sequence[float], *, delta: float, steps: int,
        q: float | tuple[float, float], confidence: float = 0.95, q_level: float = 0.0,
        select_fraction: float = _SELECT_FRACTION, seed: int = 0) -> "_e.Estimate":
    """ε lower bound of the module docstring. `q` is the sampling rate, or an interval for it that
    holds at level `q_level` (β_q, paid from β = 1 − confidence; the box gets β − β_q); `steps` is the
    number of steps the trace releases."""
    out = _e.check_scores(scores_out, "scores_out")
    inn = _e.check_scores(scores_in, "scores_in")
    check_delta(delta)
    beta = 1.0 - _e.check_confidence(confidence)
    q_lo, q_hi = (float(q), float(q)) if np.isscalar(q) else (float(q[0]), float(q[1]))
    if not (0.0 < q_lo <= q_hi <= 1.0):
        raise ValueError(f"the sampling rate (interval) must lie in (0, 1], got {q!r}")
    if not (0.0 <= q_level < beta):
        raise ValueError(f"q_level must be in [0, β = {beta:g}), got {q_level!r}")
    b = beta - q_level
    so, eo, si, ei = split_trials(out.size, inn.size, select_fraction, seed, "the subsampled-Gaussian fit")
    grid = _q_cells(q_lo, q_hi)
    q_pilot = float(grid[len(grid) // 2])  # any q serves the choice; a lattice one shares curves
    sign, thresholds = pilot_choice(_subsampled(q_pilot, steps), out[so], inn[si], eo.size, ei.size, b)
    box = _box(sign * out[eo], sign * inn[ei], thresholds, b)
    eps, sig, pess = math.inf, None, math.inf
    for lo, hi in zip(grid[:-1], grid[1:]):
        s = sigma_hat(float(hi), steps, box)
        if s is None:
            eps, sig, pess = 0.0, None, 0.0
            break
        e = max(0.0, curve.epsilon(s, float(lo), steps, delta, pessimistic=False))
        if e < eps:
            eps, sig = e, s
            pess = curve.epsilon(s, float(lo), steps, delta, pessimistic=True)
    counts = {"n_out": int(eo.size), "n_in": int(ei.size), "pilot_out": int(so.size), "pilot_in": int(si.size),
              "steps": int(steps), "thresholds": _THRESHOLDS}
    details = {"sigma_hat": sig, "q": [q_lo, q_hi], "pessimistic_eps": pess,
               "discretisation_gap": bool(pess - eps > 2 * steps * curve.DISCRETISATION)}
    ceiling = max_certifiable(eo.size, ei.size, q=(float(grid[-2]), float(grid[-1])), steps=steps, delta=delta,
                              beta_box=b)
    return _e.Estimate(eps, (eps, math.inf), METHOD, float(sign * thresholds[0]),
                       ceiling, confidence, delta, counts={**counts, **details},
                       assumption=ASSUMPTION, direction=_e.HIGHER if sign > 0 else _e.REVERSED)


def max_certifiable(n_out: int, n_in: int, *, q: tuple[float, float], steps: int, delta: float,
                    beta_box: float) -> float:
    """An upper bound on the ε_lb the fit can report with `n_out` + `n_in` certifying trials: a perfect
    attack's box (no error at any of the k thresholds) inverted in one cell [q_lo, q_hi] of the q grid
    (the fit reports the minimum over its cells, so one cell's figure bounds it from above)."""
    s = sigma_hat(q[1], steps, perfect_box(n_out, n_in, beta_box))
    return 0.0 if s is None else max(0.0, curve.epsilon(s, q[0], steps, delta, pessimistic=False))


def inclusion_interval(inclusions: np.ndarray, level: float) -> tuple[float, float]:
    """A two-sided Clopper–Pearson interval (β_q/2 per side) for the rate at which the canary was
    included, from the recorded inclusions (trials × steps, the IN world's)."""
    x = np.asarray(inclusions, bool)
    k, n = int(x.sum()), int(x.size)
    if n == 0:
        raise ValueError("no recorded inclusions to measure the sampling rate from")
    return max(_e.cp_lower(k, n, level / 2), 1e-6), max(_e.cp_upper(k, n, level / 2), 1e-6)


def fit_measured(scores_out: Sequence[float], scores_in: Sequence[float], *, inclusions: np.ndarray,
                 delta: float, confidence: float = 0.95, q_share: float = 0.1, seed: int = 0) -> "_e.Estimate":
    """:func:`fit` with q measured, not declared: the inclusions' interval at β_q = q_share·β, the box
    at β − β_q; T is the number of recorded steps."""
    beta = 1.0 - _e.check_confidence(confidence)
    level = q_share * beta
    x = np.asarray(inclusions, bool)
    return fit(scores_out, scores_in, delta=delta, steps=int(x.shape[1]), q=inclusion_interval(x, level),
               confidence=confidence, q_level=level, seed=seed)
