"""The exact ε of the played pair: what the best test of this run's view could certify.

An audit's ε_lb sits below two numbers: the claim (what the accountant charges for *every*
neighbouring pair) and the exact ε of the pair the run played, on the view its attack observes.
The gap claim → exact is the accounting's slack on this pair; exact → ε_lb is the attack's and
the estimator's. This module computes the middle number where the released steps' law is known
(the maths: :mod:`audit.stats.privacy_loss`).

* **Closed form.** Every released step is Gaussian given what was released before it:
  o_k = m_k(g) + N(0, s_k²). The privacy loss of step k given the past is then
  N(μ_k²/2, μ_k²) with μ_k² = Σ_i (d_ki / s_ki)², d_k = m_k(g1) − m_k(g0) (Dong, Roth & Su 2019,
  Gaussian mechanism). Where every μ_k is fixed given public state (it does not move with earlier
  noise), the losses add to N(μ²/2, μ²): the pair is exactly μ-GDP with μ = sqrt(Σ_k μ_k²)
  (the composition bound of DRS 2019 Cor. 3.3, attained: each step's loss given the past is
  exactly N(μ_k²/2, μ_k²)), and
  ε(δ) solves δ = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (DRS 2019, Cor. 2.13).
* **Monte Carlo.** Where a step's law is not Gaussian but its log-density is known (Laplace
  steps, randomized response), or where μ_k moves with earlier noise (then the loss is a mixture),
  the exact privacy loss L = log p_P(o)/p_Q(o) is sampled on releases o ~ P, and
  δ(ε) = E_P[(1 − e^{ε−L})₊] (the hockey-stick divergence of P from Q, written over the loss), for
  both orderings (P, Q) = (world 0, world 1) and (world 1, world 0); ε(δ) is the larger of the two.
  Its error is a confidence interval on ε, read from the normal-approximation interval of δ(ε) at
  each ε (two sides × two orderings, Bonferroni); n samples see no
  loss beyond their largest, so a tail of mass below ~1/n is invisible to them (the result says
  how many samples lay beyond ε).
* **A declared Gaussian law** (``MechanismStep.gaussian_law``: the end of hidden linear hops, whose
  columns are Gaussian with a full covariance): closed form μ² = Σ_c d_cᵀ C⁻¹ d_c where the two
  worlds' covariances agree, else the Monte Carlo above, drawn from the two laws.
* **Not computable**, with the reason: a row-projected step (its output's law is not the
  Gaussian's; the pre-projection μ-GDP is an upper bound, by post-processing), a step that declares
  no noise law, the api and weights views (a trained model's law is not tractable; the mechanism
  view's exact ε bounds them where the DP proof makes them its post-processing), a trace scored by
  an attack whose score is not the exact loss, a declared noise model that failed its check
  against the real releases.
* **A DP-SGD trace** (the ``trace`` view, a gradient canary): each step is the declared noise law
  around the auditor-known rest of the batch, a mixture where the canary is Poisson-sampled; an
  attack whose score is that exact loss (``Attack.exact_loss``: gradient-lrt) makes the run's own
  trials the Monte Carlo's samples.

What the number rests on but could not be proven is a *caveat* of the result, never silent.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from attacks.mechanism import MechanismLRT, shift_norm2
from audit.stats.pair_epsilon_slack import exact_cell, slack, slack_line  # noqa: F401 -- read from here too
from audit.stats.pair_epsilon_value import (CLOSED_FORM, MONTE_CARLO, NOT_COMPUTABLE, PairEpsilon,  # noqa: F401
                                           not_computable)
from audit.stats.privacy_loss import gdp_pair_epsilon, law_losses, monte_carlo_epsilon
from targets.base import Level, MechanismStep
from targets.common.noise import NoiseLaw
from targets.common.pair_law import PairLaw

#: releases per world on which each step's μ_k is compared (a μ_k that moves with earlier noise
#: shows on a few releases; one that does not is then assumed fixed, and the result says so)
CHECK_RELEASES = 3
#: releases per world for a Monte-Carlo ε (a run passes its own trial count: the cost stays the trials')
MC_RELEASES = 4000
#: draws per world from a step's declared Gaussian laws (no target runs: ~1 s for a 72-node output)
LAW_SAMPLES = 1_000_000
#: relative agreement of μ_k² across releases read as "fixed" (float64 sums of float32 releases)
MU_RTOL = 1e-6


# ---------------------------------------------------------------------------------------------
# a run's pair
# ---------------------------------------------------------------------------------------------
def _step_name(step: MechanismStep, k: int) -> str:
    return step.name or f"step {k + 1}"


def _why_not(step: MechanismStep) -> str | None:
    """Why this step's privacy loss cannot be computed, or None."""
    if step.log_density is not None:
        return None
    if step.noise_std and step.row_projected:
        return "row-projected output (its law is not the Gaussian's): not computable"
    if step.laplace_scale:
        return "a Laplace law declared without its log_density (the exact loss the Monte Carlo reads): not computable"
    if not step.noise_std:
        return "no noise law declared (noise_std None, no log_density): not computable"
    return None


def _is_gaussian(step: MechanismStep) -> bool:
    return step.log_density is None and bool(step.noise_std) and not step.row_projected


Losses = tuple[np.ndarray, np.ndarray]


def of_releases(views_0: list[list[MechanismStep]], views_1: list[list[MechanismStep]], pair: Any, *,
                delta: float, confidence: float, losses: Callable[[], Losses] | None = None,
                monte_carlo: bool = False, seed: int = 0, closed_only: bool = False) -> PairEpsilon:
    """The exact ε of `pair` on the mechanism view, from a few releases of each world (`views_b`:
    their step lists). Gaussian steps whose μ_k agree across these releases: closed form (unless
    `monte_carlo` asks for the Monte Carlo, e.g. to check one against the other). Otherwise, where
    every step's loss is exact: Monte Carlo on `losses()` (samples of log p0/p1 on world-0
    releases and of log p1/p0 on world-1 releases), or on the given releases' losses. A single
    step that declares its full Gaussian law: :func:`of_gaussian_laws` (`seed`: its samples).
    `closed_only`: never a Monte Carlo over releases (not computable instead)."""
    views = views_0 + views_1
    steps = views[0]
    names = [_step_name(s, k) for k, s in enumerate(steps)]
    if any(len(v) != len(steps) for v in views):
        return not_computable(delta, "mechanism view: releases differ in their number of steps (data-dependent "
                                     "release structure): not computable")
    if len(steps) == 1 and steps[0].gaussian_law is not None:
        law = steps[0].gaussian_law
        return of_gaussian_laws(law(pair.g0), law(pair.g1), names[0], delta=delta, confidence=confidence, seed=seed)
    blocked = [f"{n}: {why}" for n, s in zip(names, steps) if (why := _why_not(s))]
    if blocked:
        return replace(not_computable(delta, *blocked, covers=[n for n, s in zip(names, steps) if not _why_not(s)]),
                       **_projection_bound(views, names, pair, delta))
    why = "a step's law is not Gaussian; its log-density is exact"
    sup = _laplace_sup(views, pair)
    if sup is not None and delta == 0:
        return PairEpsilon(value=sup, method=CLOSED_FORM, delta=delta, interval=(sup, sup), covers=tuple(names),
                           note="Laplace steps at δ = 0: ε = Σ_k ‖m_k(g1) − m_k(g0)‖₁ / b_k, the privacy loss's "
                                "supremum (attained where every entry lies beyond its shift)", rows=compared_rows(pair))
    if all(_is_gaussian(s) for v in views for s in v):
        mu2, moving = _step_mu2(views, names, pair)
        adaptive = _adaptive(names, steps)
        why = (f"μ_k of {', '.join(moving)} moves with earlier noise (the loss is a mixture)" if moving
               else f"{', '.join(adaptive)} read(s) an earlier noisy release: μ_k is not proven fixed (no closed "
                    f"form)" if adaptive else "asked for the Monte Carlo")
        if not moving and not adaptive and not monte_carlo:
            return replace(_closed_form(names, mu2[0], delta), rows=compared_rows(pair))
    if closed_only:
        return not_computable(delta, f"mechanism view: {why}: a Monte Carlo, not run here", covers=names)
    loss_0, loss_1 = losses() if losses is not None else exact_losses(views_0, views_1, pair)
    return replace(from_losses(loss_0, loss_1, names, delta=delta, confidence=confidence, why=why, sup=sup),
                   rows=compared_rows(pair))


def _laplace_sup(views: list[list[MechanismStep]], pair: Any) -> float | None:
    """Where every step declares a Laplace law and its exact log-density, with means that read no
    earlier release (one step, or a ``mean_key`` on every later one): the supremum of the privacy
    loss, Σ_k ‖m_k(g1) − m_k(g0)‖₁ / b_k (each entry's loss |x − m0| − |x − m1| is at most |m1 − m0|,
    attained beyond the shift), the same in both orderings. Else None."""
    steps = views[0]
    if not all(s.laplace_scale and s.log_density is not None for v in views for s in v):
        return None
    if any(k and s.mean_key is None for k, s in enumerate(steps)):
        return None
    total = 0.0
    for s in steps:
        d = s.mean(pair.g1).detach().double().cpu() - s.mean(pair.g0).detach().double().cpu()
        total += float(d.abs().sum()) / float(s.laplace_scale)
    return total


def _adaptive(names: list[str], steps: list[MechanismStep]) -> list[str]:
    """Steps after the first whose mean may read an earlier noisy release (no ``mean_key``)."""
    return [n for k, (n, s) in enumerate(zip(names, steps)) if k and s.mean_key is None]


def compared_rows(pair: Any) -> str:
    """Which output rows the exact loss compares (the mechanism LLR's, :mod:`attacks.mechanism`)."""
    node = getattr(pair, "node", None)
    if node is None:
        return "every output row of every step"
    return (f"every output row of every step but the canary node's own (row {int(node)}), which the node-level "
            f"relation leaves out of the compared release")


def of_gaussian_laws(law_0: tuple[torch.Tensor, torch.Tensor], law_1: tuple[torch.Tensor, torch.Tensor], name: str, *,
                     delta: float, confidence: float, seed: int, samples: int = LAW_SAMPLES) -> PairEpsilon:
    """The exact ε between two Gaussian laws of an n × h output whose columns are independent,
    column c ~ N(m_b[:, c], C_b) in world b. Equal covariances (C0 = C1 = C): μ-GDP with
    μ² = Σ_c d_cᵀ C⁻¹ d_c, d = m1 − m0 (closed form). Otherwise the pair is not μ-GDP, and its exact
    privacy loss is sampled from the laws themselves (`samples` per world, cheap: no target runs)."""
    (m0, c0), (m1, c1) = ((m.double().cpu(), c.double().cpu()) for m, c in (law_0, law_1))
    chol_0, chol_1 = torch.linalg.cholesky(c0), torch.linalg.cholesky(c1)
    gap = float(torch.linalg.matrix_norm(c1 - c0, ord=2) / torch.linalg.matrix_norm(c0, ord=2))
    if gap <= 1e-12:
        r = torch.linalg.solve_triangular(chol_0, m1 - m0, upper=False)
        mu = float(r.norm())
        value = gdp_pair_epsilon(mu, delta)
        return PairEpsilon(value=value, method=CLOSED_FORM, delta=delta, interval=(value, value), mu=mu,
                           covers=(name,), note="the step's declared Gaussian law: equal covariances in the two "
                                                "worlds, μ² = Σ_c d_cᵀ C⁻¹ d_c")
    rng = np.random.default_rng([seed, 0x1A3])
    loss_0 = law_losses((m0, chol_0), (m1, chol_1), samples, rng)
    loss_1 = law_losses((m1, chol_1), (m0, chol_0), samples, rng)
    return from_losses(loss_0, loss_1, (name,), delta=delta, confidence=confidence,
                       why=f"the step's declared Gaussian law, with covariances that differ between the worlds "
                           f"(‖C1 − C0‖/‖C0‖ = {gap:.3g}: not μ-GDP), sampled from the laws")


def _step_mu2(views: list[list[MechanismStep]], names: list[str], pair: Any) -> tuple[np.ndarray, list[str]]:
    """μ_k² = ‖d_k‖²/s_k² of each step on each release (rows: releases), and the steps whose μ_k
    differs between releases (it moves with earlier noise)."""
    mu2 = np.array([[shift_norm2(s, pair) / float(s.noise_std) ** 2 for s in v] for v in views])
    return mu2, [n for n, col in zip(names, mu2.T) if not np.allclose(col, col[0], rtol=MU_RTOL, atol=1e-12)]


def _projection_bound(views: list[list[MechanismStep]], names: list[str], pair: Any, delta: float) -> dict[str, Any]:
    """Where every blocked step is a row-projected Gaussian one and every other step Gaussian: an
    upper bound on the pair's ε. The projection is post-processing of mean + N(0, s²), so the
    pre-projection steps' μ-GDP bounds the release (data processing) where each μ_k is fixed."""
    if not all(s.log_density is None and s.noise_std for v in views for s in v):
        return {}
    mu2, moving = _step_mu2(views, names, pair)
    if moving:
        return {"note": f"no upper bound either: μ_k of {', '.join(moving)} moves with earlier noise"}
    mu = math.sqrt(float(mu2[0].sum()))
    return {"upper": gdp_pair_epsilon(mu, delta), "mu": mu, "upper_why": f"μ {mu:.3g} before the projection",
            "note": f"upper bound ε ≤ {gdp_pair_epsilon(mu, delta):.4g}: the steps before their row projection are "
                    f"μ-GDP with μ = {mu:.4g}, and the projection is post-processing"}


def _closed_form(names: list[str], mu2: np.ndarray, delta: float) -> PairEpsilon:
    """Only where no step after the first reads an earlier noisy release (each μ_k is then fixed)."""
    mu = math.sqrt(float(mu2.sum()))
    value = gdp_pair_epsilon(mu, delta)
    return PairEpsilon(value=value, method=CLOSED_FORM, delta=delta, interval=(value, value), mu=mu,
                       covers=tuple(names), note="no step's mean reads an earlier noisy release")


def exact_losses(views_0: list[list[MechanismStep]], views_1: list[list[MechanismStep]], pair: Any) -> Losses:
    """The exact privacy loss of each release: log p0/p1 on world-0 releases, log p1/p0 on world-1
    releases. The mechanism LLR is log p1/p0 exactly for Gaussian and log-density steps
    (:mod:`attacks.mechanism`)."""
    from targets.base import Release

    llr = MechanismLRT()
    score = lambda views: np.array(llr.score_batch([Release(mechanism=v) for v in views], pair))  # noqa: E731
    return -score(views_0), score(views_1)


def from_losses(loss_0: np.ndarray, loss_1: np.ndarray, names: Sequence[str], *, delta: float, confidence: float,
                why: str, sup: float | None = None) -> PairEpsilon:
    """The Monte-Carlo ε of privacy-loss samples (:func:`monte_carlo_epsilon`), with its record; `sup`
    a known supremum of the loss (caps the interval's upper end, which is ∞ where the samples cannot
    bound the tail at δ)."""
    value, interval, beyond = monte_carlo_epsilon(loss_0, loss_1, delta, confidence, sup=sup)
    note = f"{why}: Monte Carlo of the exact privacy loss on {len(loss_0)} + {len(loss_1)} samples, {beyond} beyond ε"
    if math.isinf(interval[1]):
        note += "; the samples cannot bound its tail at this δ, so the upper end is ∞"
    elif sup is not None and interval[1] == sup:
        note += f"; the upper end is the loss's supremum {sup:.4g}"
    caveats = (f"{beyond} Monte-Carlo samples beyond ε (< 30): the interval is unreliable",) if beyond < 30 else ()
    return PairEpsilon(value=value, method=MONTE_CARLO, delta=delta, interval=interval, covers=tuple(names),
                       caveats=caveats, note=note, samples=min(len(loss_0), len(loss_1)), confidence=confidence)


def draw_releases(target: Any, pair: Any, indices: range, seed: int) -> tuple[list[Any], list[Any]]:
    """Releases `indices` of each world, each from a seed of its own (apart from every trial's)."""
    out = []
    for b in (0, 1):
        states = [np.random.SeedSequence([seed, 0x9A12E, b, i]).generate_state(1, dtype=np.uint64)[0] for i in indices]
        out.append(target.fit_batch(pair.world(b), [torch.Generator().manual_seed(int(s) >> 1) for s in states]))
    return out[0], out[1]


def draw_views(target: Any, pair: Any, indices: range, seed: int
               ) -> tuple[list[list[MechanismStep]], list[list[MechanismStep]]]:
    """The mechanism views of :func:`draw_releases`."""
    return tuple([r.view(Level.MECHANISM) for r in releases] for releases in draw_releases(target, pair, indices, seed))


def check_releases(target: Any, pair: Any, seed: int) -> tuple[list[Any], list[Any]]:
    """One release of each world, and :data:`CHECK_RELEASES` where the steps' μ_k are compared
    (every step Gaussian or row-projected Gaussian, short of a single step with its full law)."""
    first = draw_releases(target, pair, range(1), seed)
    steps = first[0][0].view(Level.MECHANISM)
    if len(steps) == 1 and steps[0].gaussian_law is not None:
        return first
    if not all(s.log_density is None and s.noise_std for s in steps):
        return first
    more = draw_releases(target, pair, range(1, CHECK_RELEASES), seed)
    return first[0] + more[0], first[1] + more[1]


def declared_state(check: Any) -> bool | None:
    """The declared-model check as this module reads it: False where it failed, True where it
    verified every step, None where it was not run or left a step unverified."""
    if check is None:
        return None
    if not check.ok:
        return False
    return True if check.allows(True) else None


def of_run(target: Any, pair: Any, *, level: str, delta: float, confidence: float, seed: int,
           declared_ok: bool | None, trial_losses: Losses | None = None, mc_releases: int = MC_RELEASES
           ) -> PairEpsilon:
    """The exact ε of a run's pair on the view `level` its attack observes. `declared_ok`: the
    declared-model check (:func:`declared_state`). `trial_losses`: the run's own trials where its
    score is the exact LLR (then the Monte Carlo draws no release of its own)."""
    others = tuple(f"{v} view: not observed by this run (the exact ε is of the {level} view)"
                   for v in target.levels if v != level)
    if level not in (Level.MECHANISM, Level.TRACE):
        why = f"{level} view: not computable (only the mechanism and trace views declare their law)"
        return replace(not_computable(delta, why, *others), **_mechanism_bound(target, pair, level, delta, confidence, seed))
    if declared_ok is False:
        return not_computable(delta, f"{level} view: the declared noise model failed its check against the real "
                                     "releases, so the releases' law is unknown: not computable", *others)
    unverified = () if declared_ok else ("the declared noise model is not verified on every step",)

    def stated(found: PairEpsilon) -> PairEpsilon:  # the views not observed, and the check's caveat
        return replace(found, not_covered=found.not_covered + others,
                       caveats=found.caveats + (unverified if found.computable else ()))

    if level == Level.TRACE:
        pld = _trace_pld(target, pair, delta, seed)
        return stated(pld if pld is not None else
                      _trace_exact(delta=delta, confidence=confidence, trial_losses=trial_losses))
    views_0, views_1 = ([r.view(Level.MECHANISM) for r in rs] for rs in check_releases(target, pair, seed))

    source = []

    def losses() -> Losses:
        if trial_losses is not None:
            source.append(" (the run's own trials: its score is that loss)")
            return trial_losses
        return exact_losses(*draw_views(target, pair, range(CHECK_RELEASES, CHECK_RELEASES + mc_releases), seed),
                            pair)

    found = of_releases(views_0, views_1, pair, delta=delta, confidence=confidence, losses=losses, seed=seed)
    return stated(replace(found, note=found.note + "".join(source)))


def _trace_exact(*, delta: float, confidence: float, trial_losses: Losses | None) -> PairEpsilon:
    """A DP-SGD trace: every step's release is the declared noise law around the auditor-known rest
    of the batch, with the canary in with probability q (a mixture). Its exact privacy loss given
    the batches is what an exact-loss attack scores (gradient-lrt, :mod:`attacks.gradient`): read
    on the run's own trials. Another attack may read more than the trace (or less), so its run
    says "not computable" rather than give the trace's number for a view it did not observe."""
    if trial_losses is None:
        return not_computable(delta, "trace view: not computable here: its exact loss is read on the trials of an "
                                     "attack whose score is that loss (gradient-lrt), and this run's is not one")
    found = from_losses(*trial_losses, ("trace",), delta=delta, confidence=confidence,
                        why="the trace's steps: the declared noise law, a mixture where the canary is sampled")
    return replace(found, note=found.note + " (the run's own trials: its score is that loss)")


def _trace_pld(target: Any, pair: Any, delta: float, seed: int) -> PairEpsilon | None:
    """A fixed gradient canary on a Poisson(q)-subsampled trace under Gaussian noise of std s: the pair is
    T subsampled Gaussian steps of noise multiplier s/‖c‖ (T the steps one release holds), whose ε at δ
    the PLD gives (:mod:`audit.stats.estimators.subsampled_curve`): the optimistic figure, the pessimistic one
    beside it; a whole node's pair by :func:`audit.stats.node_curve.of_pair`. None where neither fits."""
    from audit.stats.estimators import subsampled_curve as curve

    law = PairLaw.of(pair)
    gc = getattr(pair.g1, "canary_gradient", None)
    q = law.sampling_rate
    if law.node_scales:  # a whole node, its k_t's law from public structure; a planted bug moves that law
        from audit.stats import node_curve
        planted = getattr(getattr(target, "config", None), "bug", None) is not None
        return None if planted else node_curve.of_pair(
            pair, law, delta, lambda: len(draw_releases(target, pair, range(1), seed)[1][0].view(Level.TRACE)))
    if gc is None or law.noise != NoiseLaw.GAUSSIAN or not (q is not None and 0.0 < q < 1.0) \
            or delta <= 0:
        return None
    gc = torch.as_tensor(gc, dtype=torch.float64)
    norms = gc.norm(dim=-1) if gc.dim() == 2 else gc.norm().reshape(1)
    if float(norms.min()) <= 0 or float(norms.max() - norms.min()) > 1e-9 * float(norms.max()):
        return None
    steps = len(draw_releases(target, pair, range(1), seed)[1][0].view(Level.TRACE))
    if law.noise_std is None:
        return None
    sigma = law.noise_std / float(norms[0])
    if not sigma > 0:
        return None
    lo = curve.epsilon(sigma, q, steps, delta, pessimistic=False)
    hi = curve.epsilon(sigma, q, steps, delta, pessimistic=True)
    checked = law.poisson_checked
    return PairEpsilon(value=lo, method=CLOSED_FORM, delta=delta, interval=(lo, hi), covers=("trace",),
                       caveats=() if checked else ("the declared Poisson(q) sampler is not checked in this run",),
                       note=(f"PLD of {steps} Poisson({q:g})-subsampled Gaussian steps, noise multiplier "
                             f"{sigma:.4g} (std / canary norm): optimistic {lo:.4g}, pessimistic {hi:.4g}"))


def _mechanism_bound(target: Any, pair: Any, level: str, delta: float, confidence: float, seed: int
                     ) -> dict[str, Any]:
    """For a run on another view: the mechanism view's exact ε in closed form, where the target
    offers one. The mechanism view is the noisy intermediate the target's DP proof is about, which
    makes every other view its post-processing: its ε bounds theirs (if the proof is right)."""
    if Level.MECHANISM not in target.levels:
        return {}
    releases = check_releases(target, pair, seed)
    if level == Level.API and any(r.fresh_noise_per_query for rs in releases for r in rs):
        return {"note": "no bound from the mechanism view: each api query is a fresh noisy release"}
    views = tuple([r.view(Level.MECHANISM) for r in rs] for rs in releases)
    found = of_releases(*views, pair, delta=delta, confidence=confidence, seed=seed, closed_only=True)
    if not found.computable:
        return {"note": "no bound from the mechanism view: " + "; ".join(found.not_covered)}
    return {"upper": found.value, "mu": found.mu,
            "upper_why": f"the mechanism view's exact ε; the DP proof makes the {level} view its post-processing",
            "note": f"upper bound ε ≤ {found.value:.4g}: the mechanism view's exact ε ({found.method}, "
                    f"{found.note}), of which the target's DP proof makes this view a post-processing"
                    + (f"; its caveats: {'; '.join(found.caveats)}" if found.caveats else "")}
