"""A curve fit for a whole node's gradient canary on a Gaussian DP-SGD trace that records its per-step scale
k_t (HeterPoisson's unit; :mod:`audit.stats.node_curve`): Nasr et al. 2023's fit, as
:mod:`audit.stats.estimators.subsampled_fit` runs it, with the family's curve the k_t mixture's.

Assumption (the family): given k_t each step is a Gaussian mechanism of sensitivity k_t·C, k_t drawn
from the declared sampler's law (q, and z's training out-degree t and keep probability p, from public
structure) in both worlds and revealed; only the noise scale σ = std / C is unknown. The law is checked
against the k_t the trace records (:func:`audit.stats.sampler_check.check_node_scales`) before the fit
may run, not estimated: that check failing refuses the fit. cp stays the assumption-free floor beside it.

Two ways to read the trials:

* :func:`fit_at_share` (the default's, where the pair's declared law fixes the score's law before any trial:
  :func:`audit.stats.pair_prior.prior_fraction`): one threshold at an OUT false-positive share fixed a priori,
  the attack's own order, and one exact joint test per σ, cp_at_rank's with the family's curve in place of
  the (ε, δ) line. On every trial, with the whole β; at the same share it never reports less than cp.
* :func:`fit`: thresholds and orientation chosen on a seeded share of the trials, as
  :mod:`~audit.stats.estimators.subsampled_fit` does (for a score whose law nothing fixes).

:func:`fit`'s steps are those of :mod:`~audit.stats.estimators.subsampled_fit`: thresholds and orientation on a
seeded pilot share; Clopper–Pearson upper bounds on both error rates at the k thresholds (jointly at
1 − β); σ̂ the smallest grid σ whose curve lies above a bounded error pair (the curve rises with σ, so
with confidence 1 − β the true σ < σ̂); ε_lb = the exact ε at σ̂ with the law's truncated tail left out
(the lower of :func:`audit.stats.node_curve.epsilon`'s two figures, the safe side). The curve is the ε–δ
duality's lower bound on a finite ε grid, its δ with the truncated tail added (both only lower it).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np

import audit.stats.estimators.core as _e
from audit.stats.estimators import cp_every_trial as _cp
from audit.stats import node_curve
from audit.stats.estimators import subsampled_fit as _fit
from targets.common.accounting import check_delta

METHOD = "node-gaussian-fit"
METHOD_AT_SHARE = "node-gaussian-fit-at-share"
_REFINE = 12  # bisections of σ̂ between the grid's neighbours (ratio 1.005 → about 1e-6)
ASSUMPTION = ("T Gaussian steps given the whole node's recorded k_t, k_t of the declared sampler's law (checked "
              "against the recorded k_t), only the noise scale unknown")


def fit(scores_out: Sequence[float], scores_in: Sequence[float], *, delta: float, steps: int, q: float, t: int,
        p: float, confidence: float = 0.95, select_fraction: float = _fit._SELECT_FRACTION,
        seed: int = 0) -> "_e.Estimate":
    """ε lower bound of the module docstring for the pair of :func:`audit.stats.node_curve.epsilon`'s
    (q, t, p) over `steps` released steps."""
    out = _e.check_scores(scores_out, "scores_out")
    inn = _e.check_scores(scores_in, "scores_in")
    check_delta(delta)
    beta = 1.0 - _e.check_confidence(confidence)
    _check_law(q, t, p, steps)
    so, eo, si, ei = _fit.split_trials(out.size, inn.size, select_fraction, seed, "the whole-node fit")
    curve_of = curve_family(q, int(t), p, int(steps))
    sign, thresholds = _fit.pilot_choice(curve_of, out[so], inn[si], eo.size, ei.size, beta)
    box = _fit._box(sign * out[eo], sign * inn[ei], thresholds, beta)  # the family fit's box (its mutants too)
    sig = _fit.sigma_hat_of(curve_of, box)
    eps = 0.0 if sig is None else epsilon_at(sig, q, int(t), p, int(steps), delta)
    counts = {"n_out": int(eo.size), "n_in": int(ei.size), "pilot_out": int(so.size), "pilot_in": int(si.size),
              "steps": int(steps), "thresholds": _fit._THRESHOLDS, "sigma_hat": sig, "q": [q, q],
              "node_law": {"t": int(t), "p": float(p)}}
    ceiling = max_certifiable(eo.size, ei.size, q=q, t=int(t), p=p, steps=int(steps), delta=delta, beta=beta)
    return _e.Estimate(eps, (eps, math.inf), METHOD, float(sign * thresholds[0]), ceiling, confidence, delta,
                       counts=counts, assumption=ASSUMPTION, direction=_e.HIGHER if sign > 0 else _e.REVERSED)


def fit_at_share(scores_out: Sequence[float], scores_in: Sequence[float], *, delta: float, steps: int, q: float,
                 t: int, p: float, fraction: float, confidence: float = 0.95, seed: int = 0) -> "_e.Estimate":
    """The family fit at one OUT false-positive share fixed before any trial (`fraction`: it must not depend on
    these scores), "s ≥ t says IN", every trial, the whole β on one joint test per σ.

    As in :func:`audit.stats.estimators.cp_every_trial.cp_grid`: the threshold is the OUT order statistic
    leaving k = ⌊fraction·n_out⌋ above it, so FPR ≤ V ~ Beta(k + 1, n_out − k); given it, TP ~ Bin(n_in, TPR),
    and at noise scale σ the family's curve f_σ gives TPR ≤ 1 − f_σ(FPR) ≤ 1 − f_σ(V). So
    P(Bin(n_in, 1 − f_σ(V)) ≥ TP), V mixed over its Beta law, is a valid p-value for σ. It falls as σ grows
    (f_σ rises), so the rejected σ are upward closed: σ̂ = the smallest rejected grid σ, and with confidence
    1 − β the true σ < σ̂; ε_lb = the exact ε at σ̂ (its lower figure). A (ε, δ) mechanism's curve lies above
    the line 1 − δ − e^ε·α, so wherever cp_at_rank at this share rejects ε, this test rejects the σ of that
    ε: at the same share the fit reports at least cp's figure (σ̂ is bisected to ~1e-6 between grid points)."""
    out = _e.check_scores(scores_out, "scores_out")
    inn = _e.check_scores(scores_in, "scores_in")
    check_delta(delta)
    beta = 1.0 - _e.check_confidence(confidence)
    _check_law(q, t, p, steps)
    r = _cp.at_rank(out, inn, fraction, seed)
    curve_of = curve_family(q, int(t), p, int(steps))

    def rejects(tp: int) -> Callable[[float], bool]:
        return _joint_test(curve_of, r.k, r.n_out, tp, r.n_in, beta)

    sig = _fit.smallest_rejected(rejects(r.n_in - r.fn), refine=_REFINE)
    eps = 0.0 if sig is None else epsilon_at(sig, q, int(t), p, int(steps), delta)
    counts = {"n_out": r.n_out, "n_in": r.n_in, "fp": r.fp, "fn": r.fn, "fp_fraction": float(fraction),
              "steps": int(steps), "sigma_hat": sig, "q": [q, q], "node_law": {"t": int(t), "p": float(p)}}
    perfect = _fit.smallest_rejected(rejects(r.n_in), refine=_REFINE)  # no error at the threshold: the ceiling
    ceiling = 0.0 if perfect is None else epsilon_at(perfect, q, int(t), p, int(steps), delta)
    return _e.Estimate(eps, (eps, math.inf), METHOD_AT_SHARE, float(r.threshold), ceiling, confidence, delta,
                       counts=counts, assumption=ASSUMPTION, direction=_e.HIGHER)


#: the OUT false-positive shares :func:`prior_share` chooses among
SHARES = np.geomspace(0.01, 0.8, 24)


def prior_share(*, sigma: float, q: float, t: int, p: float, steps: int, n_out: int, n_in: int, delta: float,
                confidence: float = 0.95) -> tuple[float, float]:
    """(share, the bound expected there): the OUT false-positive share of :data:`SHARES` at which
    :func:`fit_at_share`'s test gives the largest ε_lb when its counts are their expectations under the declared
    law at noise scale `sigma` (k = ⌊share·n_out⌋, TP = n_in·(1 − f_σ(share)), f_σ the family's curve: the exact
    LLR's trade-off). Read off the declared law and the trial counts alone: no trial is seen, so the share is
    a-priori and :func:`fit_at_share`'s test at it stays exact. It is the fit's own optimum, not cp's
    (:func:`audit.stats.pair_prior.prior_fraction`): at 197,660 trials a world on a HeterPoisson pair the fit's median
    bound is 0.79 of the exact ε at cp's share (0.09) and 0.85 at 0.35 (benchmarks/heterpoisson_power.md §10)."""
    _check_law(q, t, p, steps)
    beta = 1.0 - _e.check_confidence(confidence)
    curve = functools.lru_cache(maxsize=None)(curve_family(q, int(t), p, int(steps)))  # one curve per σ, all shares
    tpr = 1.0 - curve(float(sigma))(SHARES)
    best = (float(SHARES[0]), -1.0)
    for share, rate in zip(SHARES, tpr):
        k = min(int(math.floor(share * n_out)), n_out - 1)
        tp = int(round(float(rate) * n_in))
        sig = _fit.smallest_rejected(_joint_test(curve, k, n_out, tp, n_in, beta))  # grid σ only: a choice, not a bound
        eps = 0.0 if sig is None else epsilon_at(sig, q, int(t), p, int(steps), delta)
        if eps > best[1]:
            best = (float(share), eps)
    return best


def _joint_test(curve_of: _fit.CurveOf, k: int, n_out: int, tp: int, n_in: int, beta: float
                ) -> Callable[[float], bool]:
    """σ ↦ whether :func:`fit_at_share`'s exact joint test rejects σ at k OUT false positives (the FPR below
    V ~ Beta(k + 1, n_out − k)) and `tp` of `n_in` true positives, at level β."""
    w, v = _cp.mix_nodes(n_out, (k,))
    return lambda sigma: float(_cp.binomial_tail_mix(
        1.0 - curve_of(sigma)(v[0])[None, :], np.array([tp]), n_in, w)[0]) <= beta


def _check_law(q: float, t: int, p: float, steps: int) -> None:
    if not (0.0 < q <= 1.0) or not (0.0 <= p <= 1.0) or int(t) != t or t < 0 or int(steps) != steps or steps < 1:
        raise ValueError(f"need 0 < q <= 1, 0 <= p <= 1, t >= 0 and steps >= 1, got q={q}, p={p}, t={t}, "
                         f"steps={steps}")


def curve_family(q: float, t: int, p: float, steps: int) -> _fit.CurveOf:
    """σ ↦ the lower bound on the pair's trade-off curve at noise scale σ."""
    return lambda sigma: node_curve.tradeoff(sigma, q, t, p, steps)


def epsilon_at(sigma: float, q: float, t: int, p: float, steps: int, delta: float) -> float:
    """The pair's exact ε at δ and noise scale σ, its truncated tail left out (a lower figure)."""
    return max(0.0, node_curve.epsilon(noise_std=sigma, magnitude=1.0, q=q, t=t, p=p, steps=steps, delta=delta)[0])


def max_certifiable(n_out: int, n_in: int, *, q: float, t: int, p: float, steps: int, delta: float,
                    beta: float) -> float:
    """The ε_lb a perfect attack's box (no error at any threshold) would give with these trial counts."""
    s = _fit.sigma_hat_of(curve_family(q, t, p, steps), _fit.perfect_box(n_out, n_in, beta))
    return 0.0 if s is None else epsilon_at(s, q, t, p, steps, delta)
