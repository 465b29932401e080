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

Integration API (for ``audit/game.py``'s ``run_audit``, once per run after the pair is made; its
2·n fits are held out, so it may run before or after the trials)::

    from audit import declared
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
from scipy import stats

from audit import declared_joint
from targets.base import LEVELS, Lazy, LazyDict, Level, MechanismStep, Release, Target, resolve
from targets.common.noise import NoiseLaw

#: the SeedSequence tag of the check's generators (never used by a trial)
SEED_TAG = 0xDEC1A4ED
DEFAULT_ALPHA = 1e-3
DEFAULT_N = 16
_KS_SUBSAMPLE = 20_000

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
    ("sml-direction", "SML noise direction is not isotropic Gaussian (a scale drawn per coordinate?)"),
]
# a reason names the failing test of the lowest tier (then the smallest p): exact findings, then
# dependence, then the law's shape (the scale tests' χ²/F nulls assume it), scale, and the mean
# (entry-mean, free of any scale error, comes before the scale tests: noise partly shared across
# generators leaves a smaller within-entry variance AND a per-entry mean; the mean names the cause)
_TIERS = {"structure": 0, "identical": 0, "norm": 0, "declared-world": 0, "noise-free": 0, "shared-steps": 1,
          "rows-shared": 1, "cols-shared": 1,
          "shape-ks": 2, "kurtosis": 2, "sml-scale": 3, "sml-direction": 3, "entry-mean": 4, "world-scale": 5,
          "scale": 6, "global-mean": 7, "mean-direction": 7}
_PRIORITY = {name: _TIERS[name] for name, _ in _REASONS}
_TEXT = dict(_REASONS)


@dataclass
class Test:
    """One test: p-value (None for an exact test), pass/fail, and what it measured."""

    name: str
    world: int | None
    p: float | None
    passed: bool = True
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "world": self.world, "p": self.p, "passed": self.passed, "detail": self.detail}


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

    def failures(self) -> list[Test]:
        return [t for t in self.tests if not t.passed]

    def to_dict(self) -> dict[str, Any]:
        return {"view": self.view, "index": self.index, "name": self.name, "status": self.status,
                "reason": self.reason, "declared_std": self.declared_std, "measured_std": self.measured_std,
                "notes": self.notes, "tests": [t.to_dict() for t in self.tests]}


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
# tests
# ---------------------------------------------------------------------------------------------
def _two_sided_chi2(stat: float, dof: float) -> float:
    return float(min(1.0, 2 * min(stats.chi2.cdf(stat, dof), stats.chi2.sf(stat, dof))))


def _as3d(t: torch.Tensor) -> np.ndarray:
    a = t.detach().to("cpu", torch.float64).numpy()
    if a.ndim == 0:
        return a.reshape(1, 1)
    if a.ndim == 1:
        return a.reshape(1, -1)
    return a.reshape(a.shape[0], -1)


def _gaussian_battery(R: np.ndarray, std: float | None, world: int, rng: np.random.Generator,
                      directions: list[tuple[str, np.ndarray]] = ()) -> tuple[list[Test], float]:
    """The Gaussian tests of one world's residuals R (n × rows × cols); returns (tests, v̂).
    `std` None: scale not tested (e.g. directions of SML noise, already unit-scaled).
    `directions`: (label, u) with u shaped like one residual; the residual mean's component along
    each u is z-tested (terms a declared mean typically misses: self-loops, a normalisation)."""
    n, r, c = R.shape
    E = r * c
    Rbar = R.mean(0)
    C = R - Rbar
    dof_w = (n - 1) * E
    vhat = float((C * C).sum() / dof_w)
    out: list[Test] = []
    if vhat <= 0:
        return [Test("identical", world, None, False, "residuals identical across releases")], 0.0
    if std is not None:
        if std <= 0:
            out.append(Test("scale", world, None, False, f"declared std 0, measured {math.sqrt(vhat):.4g}"))
        else:
            stat = (C * C).sum() / std**2
            out.append(Test("scale", world, _two_sided_chi2(stat, dof_w),
                            detail=f"measured std {math.sqrt(vhat):.4g} vs declared {std:.4g}"))
    stat = n * (Rbar * Rbar).sum() / vhat  # /E: F(E, (n−1)E) (R̄ and C independent under the null)
    f = stat / E
    p = float(min(1.0, 2 * min(stats.f.cdf(f, E, dof_w), stats.f.sf(f, E, dof_w))))
    corr = float((n * n * (Rbar * Rbar).sum() - (R * R).sum()) / (n * (n - 1) * E * vhat)) if n > 1 else 0.0
    out.append(Test("entry-mean", world, p,
                    detail=f"n·Σ mean²/v̂ = {stat:.4g} (dof {E}); rms entry bias {math.sqrt((Rbar**2).mean()):.3g}; "
                           f"mean residual correlation between generators {corr:.3g}"))
    for label, u in directions:
        norm = float(np.sqrt((u * u).sum()))
        if norm > 0 and u.shape == Rbar.shape:
            zu = float((Rbar * u).sum()) / norm * math.sqrt(n / vhat)
            out.append(Test("mean-direction", world, float(2 * stats.norm.sf(abs(zu))),
                            detail=f"residual mean along {label}: z = {zu:.3g}"))
    z = R.sum() / math.sqrt(n * E * vhat)
    out.append(Test("global-mean", world, float(2 * stats.norm.sf(abs(z))), detail=f"z = {z:.3g}"))
    # the column sums (rows summed) of C span a (n−1)·cols-dimensional subspace of C's (n−1)·E: under
    # the null their share of ΣC² is Beta((n−1)c/2, (n−1)(E−c)/2); row sums likewise
    total = float((C * C).sum())
    for name, axis, size, k in (("rows-shared", 1, r, c), ("cols-shared", 2, c, r)):
        if size > 1 and n > 1:
            S = C.sum(axis)
            share = float((S * S).sum()) / size / total
            a, b = (n - 1) * k / 2, (n - 1) * (E - k) / 2
            p = float(min(1.0, 2 * min(stats.beta.cdf(share, a, b), stats.beta.sf(share, a, b))))
            what = "column sums" if axis == 1 else "row sums"
            out.append(Test(name, world, p, detail=f"variance ratio of {what} {share * dof_w / ((n - 1) * k):.3g} (1 expected)"))
    Z = (C / math.sqrt(vhat * (n - 1) / n)).ravel()
    sub = Z if Z.size <= _KS_SUBSAMPLE else Z[rng.choice(Z.size, _KS_SUBSAMPLE, replace=False)]
    ks = stats.kstest(sub, "norm")
    out.append(Test("shape-ks", world, float(ks.pvalue), detail=f"KS D = {ks.statistic:.4g} on {sub.size} entries"))
    kurt = float((Z**4).mean() - 3.0)
    zk = kurt / math.sqrt(24.0 / Z.size)
    out.append(Test("kurtosis", world, float(2 * stats.norm.sf(abs(zk))), detail=f"excess kurtosis {kurt:.3g}"))
    return out, vhat


def _sml_tests(R: np.ndarray, std: float, world: int, rng: np.random.Generator) -> list[Test]:
    """SML residuals R (n × steps × d): ‖r‖²/s² ~ W·χ²_d per step, directions isotropic Gaussian."""
    n, T, d = R.shape
    if std <= 0:
        return [Test("sml-scale", world, None, bool(np.all(R == 0)), "declared std 0")]
    q = (R * R).sum(2).ravel() / std**2
    ref_rng = np.random.default_rng(12345)
    ref = ref_rng.exponential(size=100_000) * ref_rng.chisquare(d, size=100_000)
    ks = stats.ks_2samp(q, ref)
    out = [Test("sml-scale", world, float(ks.pvalue),
                detail=f"KS D = {ks.statistic:.3g}; mean ‖r‖²/(d s²) = {q.mean() / d:.3g} (1 expected)")]
    # the scale's sufficient statistic: Σ q/d ≈ Gamma(k, θ) matching mean N, variance N(1 + 4/d)
    theta = 1.0 + 4.0 / d
    k = q.size / theta
    total = float(q.sum() / d)
    p = float(min(1.0, 2 * min(stats.gamma.cdf(total, k, scale=theta), stats.gamma.sf(total, k, scale=theta))))
    out.append(Test("sml-scale", world, p, detail=f"Σ‖r‖²/(d s²) = {total:.4g} over {q.size} steps ({q.size} expected)"))
    norms = np.sqrt((R * R).sum(2, keepdims=True)).clip(1e-300)
    U = R / norms * math.sqrt(d)
    battery, _ = _gaussian_battery(U, None, world, rng)
    shape, means = ("shape-ks", "kurtosis"), ("entry-mean", "global-mean")
    for t in battery:
        if t.name in shape or t.name in means:
            t.name = "sml-direction" if t.name in shape else t.name
            out.append(t)
    return out


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
                   attack: Any = None, graph: Any = None, prepare: bool = True) -> DeclaredCheck:
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
    releases = {b: _fit(target, worlds[b], gens[b]) for b in (0, 1)}
    rng = np.random.default_rng([int(seed), SEED_TAG, 1])
    steps: list[StepCheck] = []
    structure: list[str] = []

    # mechanism steps
    mech = {b: [r.view(Level.MECHANISM) if r.mechanism is not None else None for r in releases[b]] for b in (0, 1)}
    counts = {len(m) if m is not None else -1 for b in (0, 1) for m in mech[b]}
    noiseless_means: dict[int, dict[int, torch.Tensor]] = {0: {}, 1: {}}
    step_residuals: dict[int, dict[int, np.ndarray]] = {}
    if counts != {-1}:
        if len(counts) != 1:
            structure.append(f"mechanism views with different step counts {sorted(counts)}")
        else:
            for k in range(counts.pop()):
                steps.append(_check_step(k, {b: [m[k] for m in mech[b]] for b in (0, 1)}, worlds, rng,
                                         noiseless_means, step_residuals))
            for k, tests in declared_joint.shared_step_tests(step_residuals, Test).items():
                steps[k].tests += tests

    # trace steps
    traces = {b: [resolve(r.trace) for r in releases[b]] for b in (0, 1)}
    if any(t is not None for b in (0, 1) for t in traces[b]):
        steps += _check_trace(traces, pair.info, rng)

    # views
    unread = unread_views(releases[0][0], levels) if levels is not None else []
    leaks: list[str] = []
    for b in (0, 1):
        for rel in releases[b][:2]:
            leaks += [f"world {b}: {x}" for x in _leaks(rel, noiseless_means[b], levels or ())]
    leaks = sorted(set(leaks))

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


def _check_step(k: int, by_world: dict[int, list[MechanismStep]], worlds: tuple[Any, Any],
                rng: np.random.Generator, noiseless_means: dict[int, dict[int, torch.Tensor]],
                step_residuals: dict[int, dict[int, np.ndarray]] | None = None) -> StepCheck:
    """The battery on step k; its residuals per world go to `step_residuals[k]` (the joint tests)."""
    first = by_world[0][0]
    check = StepCheck(Level.MECHANISM, k, first.name or f"step {k}")
    world_stds = {b: {s.noise_std for s in by_world[b]} for b in (0, 1)}
    projected = {bool(s.row_projected) for b in (0, 1) for s in by_world[b]}
    dens = {s.log_density is not None for b in (0, 1) for s in by_world[b]}
    if any(len(v) > 1 for v in world_stds.values()) or len(projected) > 1 or len(dens) > 1:
        check.tests.append(Test("structure", None, None, False,
                                f"releases of one world declare different laws (noise_std {world_stds})"))
        return check
    std_w = {b: world_stds[b].pop() for b in (0, 1)}
    std = std_w[0]
    check.declared_std = std
    if std_w[0] != std_w[1]:
        # the attack's exact LLR (and its threshold 0) assume one std for both worlds
        if std_w[0] is None or std_w[1] is None:
            check.tests.append(Test("structure", None, None, False, f"one world declares no law ({std_w})"))
            return check
        rel = abs(std_w[1] - std_w[0]) / max(abs(std_w[0]), 1e-300)
        check.tests.append(Test("declared-world", None, None, False,
                                f"declared std {std_w[0]:.6g} in world 0, {std_w[1]:.6g} in world 1 "
                                f"(relative difference {rel:.2g})"))
    outputs = {b: [_as3d(s.output) for s in by_world[b]] for b in (0, 1)}
    if any(len({o.shape for o in outputs[b]}) != 1 for b in (0, 1)):
        check.tests.append(Test("structure", None, None, False, "output shapes vary within a world"))
        return check
    if dens.pop():
        check.status = "unverified"
        check.notes.append("log_density declared: the exact likelihood ratio is not tested (freshness only)")
        check.tests += declared_joint.identity_tests(outputs, None, Test)
        return check
    if not std and std != 0.0:
        check.status = "undeclared"
        check.notes.append("no noise law declared (noise_std None): freshness only")
        check.tests += declared_joint.identity_tests(outputs, None, Test)
        return check
    # residuals against the declared mean of each world (one call per mean_key and world)
    residuals: dict[int, list[np.ndarray]] = {}
    for b in (0, 1):
        cache: dict[Any, np.ndarray] = {}
        res = []
        for s, o in zip(by_world[b], outputs[b]):
            key = s.mean_key
            if key is not None and key in cache:
                m = cache[key]
            else:
                mt = s.mean(worlds[b]).detach().to("cpu", torch.float64)
                noiseless_means[b].setdefault(k, mt)
                m = _as3d(mt)
                if key is not None:
                    cache[key] = m
            if m.shape != o.shape:
                check.tests.append(Test("structure", b, None, False,
                                        f"declared mean has shape {m.shape}, output {o.shape}"))
                return check
            res.append(o - m)
        residuals[b] = res
    if all(not np.any(r) for b in (0, 1) for r in residuals[b]):
        ok = std_w[0] == 0.0 and std_w[1] == 0.0
        check.tests.append(Test("scale", None, None, ok, "" if ok else f"no noise at all (declared std {std:.4g})"))
        check.measured_std = [0.0, 0.0]
        return check
    check.tests += declared_joint.identity_tests(outputs, residuals, Test)
    check.tests += [t for b in (0, 1) if (t := declared_joint.noise_free_test(outputs[b], std_w[b], b, Test))]
    if projected.pop():
        norms = max(float(np.sqrt((o * o).sum(1)).max()) for b in (0, 1) for o in outputs[b])
        check.tests.append(Test("norm", None, None, norms <= 1 + 1e-5, f"largest row norm {norms:.6g}"))
        check.status = "unverified"
        check.notes.append("row-projected: output rows have norm <= 1 checked; the noise law before the "
                           "projection is not recoverable from the output")
        return check
    if step_residuals is not None:  # a plain Gaussian law: its residuals are the noise (joint tests)
        step_residuals[k] = {b: np.stack(residuals[b]) for b in (0, 1)}
    vh = {}
    for b in (0, 1):
        dirs = _directions(worlds[b], noiseless_means[b].get(k), residuals[b][0].shape)
        tests, vh[b] = _gaussian_battery(np.stack(residuals[b]), float(std_w[b]), b, rng, dirs)
        check.tests += tests
        check.measured_std.append(math.sqrt(vh[b]))
    check.tests.append(_world_scale(vh, n=len(residuals[0]), entries=residuals[0][0].size,
                                    expected=(std_w[1] / std_w[0]) ** 2 if std_w[0] else 1.0))
    return check


def _directions(graph: Any, mean: torch.Tensor | None, shape: tuple[int, ...]) -> list[tuple[str, np.ndarray]]:
    """Terms a declared mean typically misses or mis-scales: the declared mean itself (a different
    normalisation, a scale), the mean scaled by degree or by its inverse (row / symmetric
    normalisation), and the graph's features, raw and unit-row (self-loops, a residual connection)."""
    out: list[tuple[str, np.ndarray]] = []
    if mean is not None:
        m = _as3d(mean)
        out.append(("the declared mean", m))
        if getattr(graph, "edge_index", None) is not None and m.shape[0] == int(graph.num_nodes):
            deg = np.bincount(graph.edge_index[0].cpu().numpy(), minlength=m.shape[0]).astype(float)[:, None]
            out.append(("the declared mean / degree", m / np.maximum(deg, 1.0)))
            out.append(("the declared mean · degree", m * deg))
    x = getattr(graph, "x", None)
    if isinstance(x, torch.Tensor) and tuple(x.shape) == tuple(shape):
        xd = x.detach().to("cpu", torch.float64)
        out.append(("the features", xd.numpy()))
        out.append(("the unit-row features", (xd / xd.norm(dim=1, keepdim=True).clamp_min(1e-12)).numpy()))
    return out


def _world_scale(vh: dict[int, float], n: int, entries: int, expected: float = 1.0) -> Test:
    """F test of v̂₁/v̂₀ against `expected` (the ratio of the declared variances)."""
    if vh[0] <= 0 or vh[1] <= 0:
        return Test("world-scale", None, None, vh[0] == vh[1], "zero residual variance")
    dof = (n - 1) * entries
    f = vh[1] / vh[0] / expected
    p = float(min(1.0, 2 * min(stats.f.cdf(f, dof, dof), stats.f.sf(f, dof, dof))))
    return Test("world-scale", None, p, detail=f"std ratio world1/world0 {math.sqrt(f):.4g}")


def _check_trace(traces: dict[int, list[Any]], info: dict[str, Any], rng: np.random.Generator) -> list[StepCheck]:
    """One :class:`StepCheck` per group of trace steps of one dimension (a trace may interleave
    modules of different sizes), each on the first T steps of that dimension every release has."""
    first = next(t for b in (0, 1) for t in traces[b] if t is not None)
    noise = info.get("noise", getattr(first, "noise", None))
    std = info.get("noise_std", getattr(first, "noise_std", None))
    note = None
    if "noise_std" in info and float(info["noise_std"]) != float(getattr(first, "noise_std", info["noise_std"])):
        note = (f"pair.info noise_std {info['noise_std']} differs from the trace's {first.noise_std}; "
                "the attack reads pair.info's, which is tested")
    # per world, per release: dim -> (noisy rows, residual rows or None)
    groups: dict[int, list[dict[int, tuple[list, list]]]] = {0: [], 1: []}
    for b in (0, 1):
        for tr in traces[b]:
            if tr is None:
                continue
            by_dim: dict[int, tuple[list, list]] = {}
            for st in tr:
                noisy = st.noisy.detach().double().cpu().numpy().ravel()
                clean = getattr(st, "clean", None)
                res = None if clean is None else noisy - clean.detach().double().cpu().numpy().ravel()
                rows = by_dim.setdefault(noisy.size, ([], []))
                rows[0].append(noisy)
                rows[1].append(res)
            groups[b].append(by_dim)
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
