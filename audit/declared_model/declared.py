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

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from audit.declared_model import declared_joint
from audit.declared_model import declared_laplace as laplace
from audit.declared_model import declared_moments as moments
from audit.declared_model.declared_battery import Test, as3d as _as3d, battery as _battery, directions as _directions
from audit.declared_model.declared_battery import gaussian_battery as _gaussian_battery, sml_tests as _sml_tests, world_scale as _world_scale
from targets.base import LEVELS, Lazy, LazyDict, Level, MechanismStep, Release, Target, resolve
from targets.common.noise import NoiseLaw
from targets.common.pair_law import PairLaw

#: the SeedSequence tag of the check's generators (never used by a trial)
SEED_TAG = 0xDEC1A4ED
DEFAULT_ALPHA = 1e-3
DEFAULT_N = 16

# failure kinds, in the order a reason names them (the most specific first)
_REASONS: list[tuple[str, str]] = [
    ("structure", "releases disagree in structure"),
    ("identical", "noise reused: releases from different generators carry the same noise"),
    ("noise-free", "entries released without noise though the step declares a std"),
    ("shared-steps", "noise shared or correlated across steps (a sum of the steps' ratios assumes independence)"),
    ("declared-world", "declared noise_std depends on the world (the exact LLR assumes one std)"),
    ("norm", "row-projected output has rows of norm > 1"),
    ("rows-shared", "noise shared across rows (one draw broadcast over rows)"),
    ("cols-shared", "noise shared across columns (one draw broadcast over columns)"),
    ("world-scale", "noise std depends on the world (graph)"),
    ("scale", "noise std differs from the declared noise_std"),
    ("sml-scale", "noise scale law differs from the declared SML (W~Exp(1)) law"),
    ("entry-mean", "residual has a nonzero mean per entry, shared across generators (declared mean wrong, "
                   "or noise partly reused across generators)"),
    ("global-mean", "declared mean is not the output's mean (residual mean ≠ 0)"),
    ("mean-direction", "declared mean misses a term (residual mean has a component along a likely term)"),
    ("shape-ks", "noise is not Gaussian"),
    ("kurtosis", "noise is not Gaussian"),
    ("laplace-shape", "noise is not the declared Laplace law"), ("laplace-kurtosis", "noise is not the declared Laplace law"),
    ("sml-direction", "SML noise direction is not isotropic Gaussian (a scale drawn per coordinate?)"),
]
# a reason names the failing test of the lowest tier (then the smallest p): exact findings, then
# dependence, then the law's shape (the scale tests' χ²/F nulls assume it), scale, and the mean
# (entry-mean, free of any scale error, comes before the scale tests: noise partly shared across
# generators leaves a smaller within-entry variance AND a per-entry mean; the mean names the cause)
_TIERS = {"structure": 0, "identical": 0, "norm": 0, "declared-world": 0, "noise-free": 0, "shared-steps": 1,
          "rows-shared": 1, "cols-shared": 1,
          "shape-ks": 2, "kurtosis": 2, "laplace-shape": 2, "laplace-kurtosis": 2, "sml-scale": 3, "sml-direction": 3, "entry-mean": 4, "world-scale": 5,
          "scale": 6, "global-mean": 7, "mean-direction": 7}
_PRIORITY = {name: _TIERS[name] for name, _ in _REASONS}
_TEXT = dict(_REASONS)


@dataclass
class StepCheck:
    """The verdict on one released step: ``pass``, ``fail``, ``unverified`` (a law is declared that
    cannot be tested from the output), ``undeclared`` (no law declared: freshness only)."""

    view: str
    index: int
    name: str
    status: str = "pass"
    reason: str = ""
    declared_std: float | None = None
    measured_std: list[float] = field(default_factory=list)
    tests: list[Test] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    law: str | None = None  # the declared noise law the battery tested ("gaussian", "sml"), None if none

    def failures(self) -> list[Test]:
        return [t for t in self.tests if not t.passed]

    def to_dict(self) -> dict[str, Any]:
        return {"view": self.view, "index": self.index, "name": self.name, "status": self.status,
                "reason": self.reason, "declared_std": self.declared_std, "measured_std": self.measured_std,
                "notes": self.notes, "tests": [t.to_dict() for t in self.tests], "law": self.law}


@dataclass
class DeclaredCheck:
    """The result of :func:`check_declared`."""

    ok: bool
    reason: str
    steps: list[StepCheck]
    alpha: float
    n: int
    tests: int
    unread_views: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    attack_levels: tuple[Level, ...] | None = None
    wall_s: float = 0.0
    #: what the joint tests found (shared noise across steps, noise-free entries, reused noise): no
    #: score may rest on the declared model; a portfolio picks one exploiting these, or a learned one
    deviations: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        """Every released step's declared law was tested (none unverified or undeclared), and there
        was at least one (a release with no mechanism or trace view declares no law to verify)."""
        return bool(self.steps) and all(s.status == "pass" for s in self.steps)

    @property
    def allows_declared_model(self) -> bool:
        """May the game use the declared model (a-priori threshold 0, ``gdp``)? Strict: no failure
        and every step verified."""
        return self.ok and self.verified

    def allows(self, strict: bool = True) -> bool:
        """:attr:`allows_declared_model`; with ``strict=False`` undeclared steps do not block."""
        if strict:
            return self.allows_declared_model
        return self.ok and all(s.status in ("pass", "undeclared") for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "allows_declared_model": self.allows_declared_model, "verified": self.verified,
                "reason": self.reason, "alpha": self.alpha, "n_per_world": self.n, "tests": self.tests,
                "seed_tag": SEED_TAG, "unread_views": self.unread_views, "leaks": self.leaks,
                "attack_levels": list(self.attack_levels) if self.attack_levels is not None else None,
                "wall_s": self.wall_s, "deviations": self.deviations, "steps": [s.to_dict() for s in self.steps]}


# ---------------------------------------------------------------------------------------------
# policy
# ---------------------------------------------------------------------------------------------
def apply_policy(check: DeclaredCheck | None, method: str, prior_threshold: float | None, *,
                 strict: bool = True) -> tuple[str, float | None, str]:
    """The estimator and a-priori threshold the game may use given `check`.

    Returns ``(method, prior_threshold, note)``: unchanged when the declared model is allowed;
    otherwise ``gdp`` becomes ``cp`` and the prior threshold ``None`` (held out on trials).
    """
    if check is None:
        return method, prior_threshold, "declared model not checked"
    if check.allows(strict):
        return method, prior_threshold, f"declared model checked ({check.tests} tests, alpha={check.alpha:g}): kept"
    new_method = "cp" if method == "gdp" else method
    changes = []
    if new_method != method:
        changes.append(f"{method} -> {new_method}")
    if prior_threshold is not None:
        changes.append(f"a-priori threshold {prior_threshold:g} dropped (held-out threshold)")
    why = check.reason if not check.ok else "declared model not verifiable: " + "; ".join(
        f"{s.view}[{s.index}] {s.status}" for s in check.steps if s.status != "pass")
    return new_method, None, f"declared model not trusted ({why}): " + (", ".join(changes) or "nothing to change")


# ---------------------------------------------------------------------------------------------
# views
# ---------------------------------------------------------------------------------------------
def attack_levels(attack: Any) -> tuple[str, ...] | None:
    """The views an attack reads: from an attack object, a registry name, or a tuple of levels."""
    if attack is None:
        return None
    if isinstance(attack, str):
        from attacks.base import make

        attack = make(attack)
    if isinstance(attack, (tuple, list)):
        return tuple(attack)
    return tuple(attack.levels)


def unread_views(release: Release, attack: Any) -> list[str]:
    """Views `release` offers that `attack` does not read."""
    levels = attack_levels(attack) or ()
    return [lvl for lvl in release.levels if lvl not in levels]


def _leaks(release: Release, means: dict[int, torch.Tensor], read: tuple[str, ...]) -> list[str]:
    """Tensors in unread ``weights`` or in ``info`` equal to a step's noiseless mean."""
    found = []
    places: list[tuple[str, Any]] = []
    if Level.WEIGHTS not in read and release.weights is not None and not isinstance(release.weights, Lazy):
        weights = release.weights
        shapes = {tuple(m.shape) for m in means.values()}
        if isinstance(weights, LazyDict) and weights.rest_shapes is not None \
                and not shapes & set(weights.rest_shapes.values()):
            weights = dict(weights.eager_items())  # no lazy entry has a mean's shape: none computed
        places += [(f"weights[{k!r}]", v) for k, v in weights.items()]
    places += [(f"info[{k!r}]", v) for k, v in (release.info or {}).items()]
    for where, value in places:
        if not isinstance(value, torch.Tensor) or value.numel() < 2:
            continue
        for k, m in means.items():
            if tuple(value.shape) == tuple(m.shape) and torch.allclose(value.detach().double().cpu(), m,
                                                                         atol=1e-6, rtol=1e-5):
                found.append(f"{where} equals the noiseless mean of mechanism step {k}")
    return found


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
            s.status = "fail"
            worst = min(fails, key=lambda t: (_PRIORITY.get(t.name, 99), t.p if t.p is not None else -1.0))
            s.reason = f"{_TEXT.get(worst.name, worst.name)} ({worst.name}" + \
                (f", world {worst.world}" if worst.world is not None else "") + \
                (f", p={worst.p:.2g}" if worst.p is not None else "") + (f": {worst.detail}" if worst.detail else "") + ")"
    failed = [s for s in steps if s.status == "fail"]
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


class _StepWorld:
    """Mechanism step k of one world, read one release at a time: what the battery needs of it
    (digests and fingerprints for the identity tests, the noise-free state, the largest row norm,
    and the residuals' moments or stack), never the releases themselves."""

    def __init__(self, k: int, b: int, graph: Any, n: int, stream: bool, seed: int) -> None:
        self.k, self.b, self.graph, self.n, self.stream, self.seed = k, b, graph, n, stream, seed
        self.name: str | None = None
        self.stds: set = set()
        self.laplace: set = set()
        self.projected: set[bool] = set()
        self.dens: set[bool] = set()
        self.shapes: set[tuple[int, ...]] = set()
        self.digests: list[bytes] = []
        self.prints: list[tuple[np.ndarray, float]] = []
        self.noise_free = declared_joint.NoiseFree()
        self.max_norm = 0.0
        self.any_noise = False
        self.mean_error = ""
        self.noiseless: torch.Tensor | None = None  # the first declared mean (leaks, directions)
        self._means: dict[Any, np.ndarray] = {}
        self.residuals: moments.ResidualMoments | moments.ResidualStack | None = None
        self.tests: list[Test] = []
        self.vhat = 0.0
        self.sum_c2 = 0.0

    def read(self, step: MechanismStep) -> np.ndarray | None:
        """Reads one release's step; returns its residual where the battery takes it (a plain
        declared Gaussian law, every release so far alike)."""
        self.name = self.name or step.name or f"step {self.k}"
        self.stds.add(step.noise_std)
        self.projected.add(bool(step.row_projected))
        self.dens.add(step.log_density is not None)
        o = _as3d(step.output)
        self.shapes.add(o.shape)
        self.digests.append(declared_joint.digest(o))
        self.laplace.add(step.laplace_scale)
        std = step.noise_std if not step.laplace_scale else math.sqrt(2.0) * step.laplace_scale
        if max(len(self.stds), len(self.laplace), len(self.projected), len(self.dens), len(self.shapes)) > 1 \
                or self.mean_error or (step.log_density is not None and not step.laplace_scale) or (not std and std != 0.0):
            return None  # a structure failure, or a law with no residual to test
        key = step.mean_key
        m = self._means.get(key) if key is not None else None
        if m is None:
            mt = step.mean(self.graph).detach().to("cpu", torch.float64)
            if self.noiseless is None:
                self.noiseless = mt
            m = _as3d(mt)
            if key is not None:
                self._means[key] = m
        if m.shape != o.shape:
            self.mean_error = f"declared mean has shape {m.shape}, output {o.shape}"
            return None
        r = o - m
        self.any_noise = self.any_noise or bool(np.any(r))
        self.prints.append(declared_joint.fingerprint(r))
        self.noise_free.add(o)
        if step.row_projected:
            self.max_norm = max(self.max_norm, float(np.sqrt((o * o).sum(1)).max()))
            return None
        if self.residuals is None:
            where = moments.ks_positions(self.n * r.size, np.random.default_rng([self.seed, SEED_TAG, 2, self.k, self.b]))
            self.residuals = (moments.ResidualMoments if self.stream else moments.ResidualStack)(self.n, where)
        return r

    def finish(self) -> None:
        """The Gaussian battery on this world's residuals (kept: the tests, v̂ and Σ C²)."""
        if self.residuals is None or self.residuals.n < 2:
            return
        summary = self.residuals.summary()
        scale, dirs = next(iter(self.laplace)), _directions(self.graph, self.noiseless, summary.mean.shape)
        self.tests, self.vhat = (laplace.battery(summary, float(scale), self.b, dirs) if scale
                                 else _battery(summary, float(next(iter(self.stds))), self.b, dirs))
        self.sum_c2 = summary.sum_c2


class _WorldSteps:
    """Every mechanism step of one world, read release by release, with the co-moments of each
    pair of steps with as many entries (the ``shared-steps`` test)."""

    def __init__(self, b: int, graph: Any, n: int, stream: bool, seed: int) -> None:
        self.b, self.graph, self.n, self.stream, self.seed = b, graph, n, stream, seed
        self.counts: set[int] = set()
        self.steps: list[_StepWorld] = []
        self._cross: dict[tuple[int, int], float] = {}
        self.cross: dict[tuple[int, int], tuple[int, int, float, float, float]] = {}

    def add(self, view: list[MechanismStep] | None) -> None:
        self.counts.add(-1 if view is None else len(view))
        if view is None or len(self.counts) > 1:
            return
        while len(self.steps) < len(view):
            self.steps.append(_StepWorld(len(self.steps), self.b, self.graph, self.n, self.stream, self.seed))
        read = {k: r for k, step in enumerate(view) if (r := self.steps[k].read(step)) is not None}
        deltas = {k: self.steps[k].residuals.add(r) for k, r in read.items()}
        if self.stream:  # Σ (a − ā)(c − c̄) += (1 − 1/n)·Σ δ_a·δ_c (module doc of declared_moments)
            for k, l in self._pairs(deltas):
                n = self.steps[l].residuals.n
                self._cross[(k, l)] = self._cross.get((k, l), 0.0) + \
                    (1 - 1 / n) * float(np.dot(deltas[k].ravel(), deltas[l].ravel()))

    @staticmethod
    def _pairs(residuals: dict[int, Any]) -> list[tuple[int, int]]:
        keys = sorted(residuals)
        return [(k, l) for i, k in enumerate(keys) for l in keys[i + 1:]
                if residuals[k] is not None and residuals[l] is not None
                and np.size(residuals[k]) == np.size(residuals[l])]

    def noiseless_means(self) -> dict[int, torch.Tensor]:
        return {k: s.noiseless for k, s in enumerate(self.steps) if s.noiseless is not None}

    def finish(self) -> None:
        """Each step's battery; the co-moments' sums (then the residuals are dropped)."""
        held = {k: s.residuals for k, s in enumerate(self.steps) if s.residuals is not None}
        sizes = {k: (r.mean.size if self.stream else r.items[0].size) for k, r in held.items() if r.n}
        if not self.stream:
            self._cross = {(k, l): moments.cross_moment(held[k], held[l])
                           for k, l in self._pairs({k: np.empty(sizes[k]) for k in sizes})}
        for s in self.steps:
            s.finish()
        for (k, l), cross in self._cross.items():
            a, c = self.steps[k], self.steps[l]
            if a.residuals.n == c.residuals.n:
                self.cross[(k, l)] = (a.residuals.n, sizes[k], cross, a.sum_c2, c.sum_c2)
        for s in self.steps:
            s.residuals = None


def _step_check(k: int, w: dict[int, _StepWorld]) -> tuple[StepCheck, bool]:
    """The verdict on step k from both worlds' reading; True where its residuals took the battery."""
    check = StepCheck(Level.MECHANISM, k, w[0].name or f"step {k}")
    world_stds = {b: w[b].stds for b in (0, 1)}
    if any(len(v) > 1 for v in world_stds.values()) or len(w[0].projected | w[1].projected) > 1 \
            or len(w[0].dens | w[1].dens) > 1:
        check.tests.append(Test("structure", None, None, False,
                                f"releases of one world declare different laws (noise_std {world_stds})"))
        return check, False
    std_w = {b: next(iter(world_stds[b])) for b in (0, 1)}
    std = std_w[0]
    check.declared_std = std
    if std_w[0] != std_w[1]:
        # the attack's exact LLR (and its threshold 0) assume one std for both worlds
        if std_w[0] is None or std_w[1] is None:
            check.tests.append(Test("structure", None, None, False, f"one world declares no law ({std_w})"))
            return check, False
        rel = abs(std_w[1] - std_w[0]) / max(abs(std_w[0]), 1e-300)
        check.tests.append(Test("declared-world", None, None, False,
                                f"declared std {std_w[0]:.6g} in world 0, {std_w[1]:.6g} in world 1 "
                                f"(relative difference {rel:.2g})"))
    if any(len(w[b].shapes) != 1 for b in (0, 1)):
        check.tests.append(Test("structure", None, None, False, "output shapes vary within a world"))
        return check, False
    digests = {b: w[b].digests for b in (0, 1)}
    if any(next(iter(w[b].laplace), None) for b in (0, 1)):
        return laplace.step_check(check, w, {b: next(iter(w[b].laplace), None) for b in (0, 1)}, digests)
    if next(iter(w[0].dens)):
        check.status = "unverified"
        check.notes.append("log_density declared: the exact likelihood ratio is not tested (freshness only)")
        check.tests += declared_joint.identity_from_digests(digests, None, Test)
        return check, False
    if not std and std != 0.0:
        check.status = "undeclared"
        check.notes.append("no noise law declared (noise_std None): freshness only")
        check.tests += declared_joint.identity_from_digests(digests, None, Test)
        return check, False
    for b in (0, 1):
        if w[b].mean_error:
            check.tests.append(Test("structure", b, None, False, w[b].mean_error))
            return check, False
    if not (w[0].any_noise or w[1].any_noise):
        ok = std_w[0] == 0.0 and std_w[1] == 0.0
        check.tests.append(Test("scale", None, None, ok, "" if ok else f"no noise at all (declared std {std:.4g})"))
        check.measured_std = [0.0, 0.0]
        return check, False
    check.tests += declared_joint.identity_from_digests(digests, {b: w[b].prints for b in (0, 1)}, Test)
    check.tests += [t for b in (0, 1) if (t := w[b].noise_free.test(std_w[b], b, Test))]
    if next(iter(w[0].projected)):
        norms = max(w[0].max_norm, w[1].max_norm)
        check.tests.append(Test("norm", None, None, norms <= 1 + 1e-5, f"largest row norm {norms:.6g}"))
        check.status = "unverified"
        check.notes.append("row-projected: output rows have norm <= 1 checked; the noise law before the "
                           "projection is not recoverable from the output")
        return check, False
    check.law = NoiseLaw.GAUSSIAN.value  # noise_std without a density or a projection: the Gaussian battery
    for b in (0, 1):
        check.tests += w[b].tests
        check.measured_std.append(math.sqrt(w[b].vhat))
    entries = int(np.prod(next(iter(w[0].shapes))))
    check.tests.append(_world_scale({b: w[b].vhat for b in (0, 1)}, n=len(w[0].digests), entries=entries,
                                    expected=(std_w[1] / std_w[0]) ** 2 if std_w[0] else 1.0))
    return check, True


def _trace_rows(trace: Any) -> dict[int, tuple[list, list]]:
    """One release's trace steps by dimension: (noisy rows, residual rows or None)."""
    by_dim: dict[int, tuple[list, list]] = {}
    for st in trace:
        noisy = st.noisy.detach().double().cpu().numpy().ravel()
        clean = getattr(st, "clean", None)
        res = None if clean is None else noisy - clean.detach().double().cpu().numpy().ravel()
        rows = by_dim.setdefault(noisy.size, ([], []))
        rows[0].append(noisy)
        rows[1].append(res)
    return by_dim


def _check_trace(groups: dict[int, list[dict[int, tuple[list, list]]]], law: tuple[Any, Any], info: dict[str, Any],
                 rng: np.random.Generator) -> list[StepCheck]:
    """One :class:`StepCheck` per group of trace steps of one dimension (a trace may interleave
    modules of different sizes), each on the first T steps of that dimension every release has.
    `groups`: per world, each release's :func:`_trace_rows`; `law`: the first trace's (noise,
    noise_std)."""
    stated = PairLaw.of(info)
    noise = stated.noise if stated.noise is not None else law[0]
    std = stated.noise_std if stated.noise_std is not None else law[1]
    note = None
    if stated.noise_std is not None and law[1] is not None and stated.noise_std != float(law[1]):
        note = (f"pair.info noise_std {stated.noise_std} differs from the trace's {law[1]}; "
                "the attack reads pair.info's, which is tested")
    dims = sorted({d for b in (0, 1) for g in groups[b] for d in g})
    checks = []
    for gi, d in enumerate(dims):
        check = StepCheck(Level.TRACE, gi, f"trace steps of dim {d} ({noise} noise)",
                          declared_std=None if std is None else float(std))
        if note:
            check.notes.append(note)
        checks.append(check)
        present = all(d in g for b in (0, 1) for g in groups[b]) and all(groups[b] for b in (0, 1))
        if not present:
            check.tests.append(Test("structure", None, None, False, f"not every release has trace steps of dim {d}"))
            continue
        T = min(len(g[d][0]) for b in (0, 1) for g in groups[b])
        if any(len(g[d][0]) != T for b in (0, 1) for g in groups[b]):
            check.notes.append(f"traces of different lengths: the first {T} steps of dim {d} are tested")
        outputs = {b: [np.stack(g[d][0][:T]) for g in groups[b]] for b in (0, 1)}
        has_clean = all(r is not None for b in (0, 1) for g in groups[b] for r in g[d][1][:T])
        if not has_clean:
            check.status = "undeclared"
            check.notes.append("the trace carries no clean sums: freshness only")
            check.tests += declared_joint.identity_tests(outputs, None, Test)
            continue
        residuals = {b: [np.stack(g[d][1][:T]) for g in groups[b]] for b in (0, 1)}
        check.tests += declared_joint.identity_tests(outputs, residuals, Test)
        if std is None or noise not in (NoiseLaw.GAUSSIAN, NoiseLaw.SML):
            check.status = "unverified"
            check.notes.append(f"trace noise law {noise!r} is not one this check knows: freshness only")
            continue
        s = float(std)
        check.law = NoiseLaw(noise).value
        if noise == NoiseLaw.GAUSSIAN:
            vh = {}
            for b in (0, 1):
                tests, vh[b] = _gaussian_battery(np.stack(residuals[b]), s, b, rng)
                check.tests += tests
                check.measured_std.append(math.sqrt(vh[b]))
            check.tests.append(_world_scale(vh, n=len(residuals[0]), entries=residuals[0][0].size))
        else:
            for b in (0, 1):
                R = np.stack(residuals[b])
                check.tests += _sml_tests(R, s, b, rng)
                check.measured_std.append(float(math.sqrt((R * R).mean())))
    return checks


__all__ = ["DeclaredCheck", "StepCheck", "Test", "apply_policy", "attack_levels", "check_declared",
           "check_generators", "unread_views", "LEVELS", "SEED_TAG"]
