"""Trust nothing the target declares: test its declared noise model on held-out releases.

A :class:`~targets.base.MechanismStep`'s ``mean``, ``noise_std``, ``row_projected`` and
``log_density`` (and a DP-SGD trace's ``noise``/``noise_std`` with its ``clean`` sums) are the
target's *claims about itself*. An exact likelihood ratio, a threshold fixed at 0 before any trial
and the ``gdp`` estimator's Gaussian trade-off all rest on them, so before any score uses them this
module checks them against what the real ``fit()`` releases.

How. ``n`` releases per world from generators derived from ``(seed, 0xDEC1A4ED)`` through a
:class:`numpy.random.SeedSequence` of its own (the game's trial seeds are
``SeedSequence([seed, i, 0x5EED])``, its probe ``trial_seed(seed, 2**40)``: no trial sees these
draws). Per released step and world, with residual ``R_i = output_i − mean_i(world)`` (n × rows ×
cols, a 1-D output is one row), ``C = R − mean over releases`` and ``v̂`` the pooled within-entry
variance of ``C`` (free of any bias of the declared mean):

* ``identical`` (exact): two releases from different generators with the same output, or the same
  residual in both worlds: the noise ignores the generator (reused noise).
* ``declared-world`` (exact): the declared ``noise_std`` differs between the worlds (the exact LLR
  of ``attacks/mechanism.py`` and its threshold 0 assume one std; the std itself then leaks).
* ``scale``: ``Σ C²/s²`` against χ²((n−1)·E), two-sided (E = rows·cols entries): the noise std is
  the declared one.
* ``world-scale``: ``v̂₁/v̂₀`` (over the declared ratio) against F, two-sided: the noise std does
  not depend on the world.
* ``entry-mean``: ``n·Σ_e R̄_e²/(E·v̂)`` against F(E, (n−1)E), two-sided: every entry's residual has
  mean 0 (a declared mean missing a term, a different normalisation, noise correlated across
  generators); ``mean-direction``: z-tests of R̄'s component along terms a declared mean typically
  misses or mis-scales (the declared mean itself, it over or times the degree, the features raw and
  unit-row): far more power than ``entry-mean`` on a small structured term such as a self-loop;
  ``global-mean``: the z-test of the residual's grand mean.
* ``rows-shared`` / ``cols-shared``: per release, the column sums (rows summed) of C: their share of
  ``Σ C²`` against Beta((n−1)·cols/2, (n−1)·(E−cols)/2) (the row sums likewise): one draw
  broadcast over rows (or columns) inflates it by the number of rows.
* ``shape-ks`` / ``kurtosis``: C standardised by v̂ is N(0, 1) (KS on a fixed subsample of at most
  20 000 entries; the excess kurtosis on all entries): Laplace or uniform noise declared Gaussian.
* A step declaring ``laplace_scale`` takes the same tests under the Laplace law's nulls (with or
  without a ``log_density``): :mod:`audit.declared_model.declared_laplace`.

Row-projected steps: output rows must have norm ≤ 1 (exact); the noise law under the projection is
not recoverable from the output, so the step is *unverified*. Steps with a ``log_density`` are
*unverified* (freshness checked only); steps that declare no law (``noise_std=None``) are
*undeclared* (freshness only: nothing declared to test). Trace steps with ``clean`` sums: the
residual ``noisy − clean`` (n × steps × d) takes the Gaussian battery when the law the attack reads
(``pair.info`` first, then the trace) is ``gaussian``; for ``sml`` (√W·s·N(0, I), one W ~ Exp(1)
per step) the per-step ``q = ‖r‖²/s²`` is tested against W·χ²_d (two-sample KS against a fixed
Monte-Carlo sample, and ``Σ q/d`` against its Gamma approximation: the scale's sufficient
statistic), the directions ``r·√d/‖r‖`` take the shape and mean tests, and the identity test runs.
A trace whose steps have several sizes (modules) is tested per size. A target with neither a
``mechanism`` nor a ``trace`` view declares no noise model: no fit is spent, nothing is verified.

The one-line reason names the failing test of the most specific kind: exact findings (identical
noise, norms), shared draws, a non-Gaussian shape (the scale tests' nulls assume the shape), the
SML law, a per-entry mean shared across generators, a world-dependent std, the std, then the
mean's grand and directional tests.

All p-values of one check are combined by Bonferroni at ``alpha`` (default 1e-3 overall), so a
correct target passes with probability ≥ 1 − alpha.

Views: :func:`unread_views` names the views a release offers that the attack does not read; a
tensor in an unread ``weights`` view or in ``info`` equal to a step's noiseless mean is reported as
a *leak*. Neither changes ``ok`` (they are findings about the release, not about the model the
score uses), both are in the record.

Integration API (for ``audit/play/game.py``'s ``run_audit``, once per run after the pair is made; its
2·n fits are held out, so it may run before or after the trials)::

    from audit.declared_model import declared
    check = declared.check_declared(target, pair, seed=spec.seed, attack=attack, graph=graph)
    ...  # method and prior as today (natural_threshold_for / threshold_for on the probe)
    method, prior, note = declared.apply_policy(check, method, prior)
    est = estimators.estimate(..., method=method, threshold=prior)
    result["declared_check"] = check.to_dict(); result["declared_policy"] = note

``n`` (default 16 per world) may be lowered for targets whose ``fit`` is expensive (≥ 4; the
residuals have many entries, so 8 already catches the deviants of ``tests/deviants.py``).

:attr:`DeclaredCheck.allows_declared_model` is True only when no test failed and every released
step's declared law was verified (``strict``; with ``apply_policy(..., strict=False)`` steps that
declare no law do not block). When it is False the game uses no a-priori threshold and no ``gdp``:
``apply_policy`` returns ``cp`` (``bayes``/``one-run`` are kept) with ``prior_threshold=None``.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from audit.declared_model import declared_joint
from audit.declared_model.declared_battery import Test
from audit.declared_model.declared_steps import WorldSteps as _WorldSteps, step_check as _step_check
from audit.declared_model.declared_trace import check_trace as _check_trace, trace_rows as _trace_rows
from audit.declared_model.declared_verdict import (DEFAULT_ALPHA, DEFAULT_N, PRIORITY as _PRIORITY,  # noqa: F401
                                                   SEED_TAG, TEXT as _TEXT, DeclaredCheck, StepCheck, apply_policy)
from audit.declared_model.declared_views import attack_levels, leaks as _leaks, unread_views  # noqa: F401
from audit.declared_model.declared_verdict import StepStatus
from targets.base import LEVELS, Level, Release, Target, resolve


# ---------------------------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------------------------
def check_generators(seed: int, n: int) -> list[list[torch.Generator]]:
    """The check's generators: ``n`` per world from ``SeedSequence([seed, SEED_TAG])``."""
    children = np.random.SeedSequence([int(seed), SEED_TAG]).spawn(2 * n)
    gens = []
    for ss in children:
        a, b = ss.generate_state(2)
        gens.append(torch.Generator().manual_seed((int(a) << 31 ^ int(b)) & ((1 << 63) - 1)))
    return [gens[:n], gens[n:]]


def _fit(target: Target, world: Any, rngs: list[torch.Generator]) -> list[Release]:
    releases = target.fit_batch(world, rngs)
    if len(releases) != len(rngs):
        raise RuntimeError(f"{type(target).__name__}.fit_batch returned {len(releases)} releases for {len(rngs)}")
    return releases


def check_declared(target: Target, pair: Any, *, seed: int, n: int = DEFAULT_N, alpha: float = DEFAULT_ALPHA,
                   attack: Any = None, graph: Any = None, prepare: bool = True, stream: bool = True,
                   chunk: int = 4) -> DeclaredCheck:
    """Test `target`'s declared noise model on ``n`` held-out releases per world of `pair`.

    Args:
        target: the target as the game will run it (public parameters pinned).
        pair: the canary pair (``g0``, ``g1``, ``info``).
        seed: the run seed (the check's generators come from ``(seed, SEED_TAG)``).
        n: releases per world (≥ 4; 8–32 is plenty: each residual has many entries).
        alpha: overall false-alarm level (Bonferroni over every test run).
        attack: the attack (object, registry name, or levels) whose unread views are reported.
        graph: the base graph given to ``target.prepare`` (default ``pair.g0``).
        prepare: call ``target.prepare`` first (as every game worker does).
        stream: fit ``chunk`` releases at a time and keep running moments of their residuals
            (memory independent of ``n``); False: fit all ``n`` of a world at once and hold
            their residuals (the exact two-pass reference: the same verdicts and statistics).
    """
    if n < 4:
        raise ValueError(f"check_declared needs n >= 4 releases per world, got {n}")
    t0 = time.time()
    levels = attack_levels(attack)
    if not {Level.MECHANISM, Level.TRACE} & set(target.levels):
        # nothing declared to test: no fit is spent (the unread views come from the target's levels)
        unread = [lvl for lvl in target.levels if levels is not None and lvl not in levels]
        reason = "no mechanism or trace view: no declared noise model to test"
        if unread:
            reason += f" | unread views: {', '.join(unread)}"
        return DeclaredCheck(ok=True, reason=reason, steps=[], alpha=alpha, n=0, tests=0, unread_views=unread,
                             attack_levels=levels, wall_s=time.time() - t0)
    if prepare:
        target.prepare(graph if graph is not None else pair.g0)
    worlds = (pair.g0, pair.g1)
    gens = check_generators(seed, n)
    rng = np.random.default_rng([int(seed), SEED_TAG, 1])
    # one world at a time, `chunk` releases at a time (all n at once unless streamed): a release is
    # dropped once its steps have been read, so the check's memory does not grow with n
    chunk = max(1, chunk) if stream else n
    mech: dict[int, _WorldSteps] = {}
    trace_rows: dict[int, list[dict[int, tuple[list, list]]]] = {0: [], 1: []}
    trace_law: tuple[Any, Any] | None = None
    unread: list[str] = []
    leaks: list[str] = []
    for b in (0, 1):
        mech[b] = _WorldSteps(b, worlds[b], n, stream, int(seed))
        for lo in range(0, n, chunk):
            releases = _fit(target, worlds[b], gens[b][lo:lo + chunk])
            for i, rel in enumerate(releases, lo):
                mech[b].add(rel.view(Level.MECHANISM) if rel.mechanism is not None else None)
                tr = resolve(rel.trace)
                if tr is not None:
                    trace_law = trace_law or (getattr(tr, "noise", None), getattr(tr, "noise_std", None))
                    trace_rows[b].append(_trace_rows(tr))
                if b == 0 and i == 0 and levels is not None:
                    unread = unread_views(rel, levels)
                if i < 2:
                    leaks += [f"world {b}: {x}" for x in _leaks(rel, mech[b].noiseless_means(), levels or ())]
            del releases
        mech[b].finish()
    leaks = sorted(set(leaks))
    steps: list[StepCheck] = []
    structure: list[str] = []

    # mechanism steps
    counts = mech[0].counts | mech[1].counts
    if counts != {-1}:
        if len(counts) != 1:
            structure.append(f"mechanism views with different step counts {sorted(counts)}")
        else:
            gaussian = set()  # the steps whose residuals took a battery (Gaussian or Laplace)
            for k in range(counts.pop()):
                check, battery = _step_check(k, {b: mech[b].steps[k] for b in (0, 1)})
                steps.append(check)
                if battery:
                    gaussian.add(k)
            pairs = [(k, l, b, *mech[b].cross[(k, l)]) for b in (0, 1) for (k, l) in sorted(mech[b].cross)
                     if k in gaussian and l in gaussian]
            for k, tests in declared_joint.shared_step_tests(pairs, Test).items():
                steps[k].tests += tests

    # trace steps
    if trace_law is not None:
        steps += _check_trace(trace_rows, trace_law, pair.info, rng)

    # Bonferroni
    total = sum(1 for s in steps for t in s.tests if t.p is not None)
    each = alpha / max(total, 1)
    for s in steps:
        for t in s.tests:
            if t.p is not None:
                t.passed = t.p >= each
        fails = s.failures()
        if fails:
            s.status = StepStatus.FAIL
            worst = min(fails, key=lambda t: (_PRIORITY.get(t.name, 99), t.p if t.p is not None else -1.0))
            s.reason = f"{_TEXT.get(worst.name, worst.name)} ({worst.name}" + \
                (f", world {worst.world}" if worst.world is not None else "") + \
                (f", p={worst.p:.2g}" if worst.p is not None else "") + (f": {worst.detail}" if worst.detail else "") + ")"
    failed = [s for s in steps if s.status == StepStatus.FAIL]
    ok = not failed and not structure
    if structure:
        reason = "releases disagree in structure: " + "; ".join(structure)
    elif failed:
        worst = min(failed, key=lambda s: min((_PRIORITY.get(t.name, 99), t.p if t.p is not None else -1.0)
                                             for t in s.failures()))
        reason = f"{worst.view} step {worst.index} ({worst.name}): {worst.reason}"
    else:
        kinds = sorted({s.status for s in steps})
        reason = f"declared model consistent with {2 * n} held-out releases ({total} tests, alpha={alpha:g}); steps: " \
                 + (", ".join(kinds) or "none")
    extra = []
    if unread:
        extra.append(f"unread views: {', '.join(unread)}")
    if leaks:
        extra.append(f"leaks: {leaks[0]}" + (f" (+{len(leaks) - 1})" if len(leaks) > 1 else ""))
    if extra:
        reason += " | " + "; ".join(extra)
    return DeclaredCheck(ok=ok, reason=reason, steps=steps, alpha=alpha, n=n, tests=total, unread_views=unread,
                         leaks=leaks, attack_levels=levels, wall_s=time.time() - t0,
                         deviations=declared_joint.deviations(steps))


__all__ = ["DeclaredCheck", "StepCheck", "Test", "apply_policy", "attack_levels", "check_declared",
           "check_generators", "unread_views", "LEVELS", "SEED_TAG"]
