"""The declared-model check's verdict (:mod:`audit.declared_model.declared` runs the check): one step's
:class:`StepCheck`, the run's :class:`DeclaredCheck`, the order in which a reason names a failing test, and
:func:`apply_policy`, the estimator and a-priori threshold the game may use given the verdict.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from audit.declared_model.declared_battery import Test
from audit.stats.kinds import Method
from targets.common.value_enum import ValueEnum
from targets.base import Level

#: the SeedSequence tag of the check's generators (never used by a trial)
SEED_TAG = 0xDEC1A4ED
DEFAULT_ALPHA = 1e-3
DEFAULT_N = 16

# failure kinds, in the order a reason names them (the most specific first)
REASONS: list[tuple[str, str]] = [
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
TIERS = {"structure": 0, "identical": 0, "norm": 0, "declared-world": 0, "noise-free": 0, "shared-steps": 1,
          "rows-shared": 1, "cols-shared": 1,
          "shape-ks": 2, "kurtosis": 2, "laplace-shape": 2, "laplace-kurtosis": 2, "sml-scale": 3, "sml-direction": 3, "entry-mean": 4, "world-scale": 5,
          "scale": 6, "global-mean": 7, "mean-direction": 7}
PRIORITY = {name: TIERS[name] for name, _ in REASONS}
TEXT = dict(REASONS)


class StepStatus(ValueEnum):
    """What the check concluded of one released step."""

    PASS = "pass"
    FAIL = "fail"
    UNVERIFIED = "unverified"  # a law is declared that cannot be tested from the output
    UNDECLARED = "undeclared"  # no law declared: freshness only


@dataclass
class StepCheck:
    """The verdict on one released step: ``pass``, ``fail``, ``unverified`` (a law is declared that
    cannot be tested from the output), ``undeclared`` (no law declared: freshness only)."""

    view: str
    index: int
    name: str
    status: StepStatus = StepStatus.PASS
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
        return bool(self.steps) and all(s.status == StepStatus.PASS for s in self.steps)

    @property
    def allows_declared_model(self) -> bool:
        """May the game use the declared model (a-priori threshold 0, ``gdp``)? Strict: no failure
        and every step verified."""
        return self.ok and self.verified

    def allows(self, strict: bool = True) -> bool:
        """:attr:`allows_declared_model`; with ``strict=False`` undeclared steps do not block."""
        if strict:
            return self.allows_declared_model
        return self.ok and all(s.status in (StepStatus.PASS, StepStatus.UNDECLARED) for s in self.steps)

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
    new_method = Method.CP if method == Method.GDP else method
    changes = []
    if new_method != method:
        changes.append(f"{method} -> {new_method}")
    if prior_threshold is not None:
        changes.append(f"a-priori threshold {prior_threshold:g} dropped (held-out threshold)")
    why = check.reason if not check.ok else "declared model not verifiable: " + "; ".join(
        f"{s.view}[{s.index}] {s.status}" for s in check.steps if s.status != StepStatus.PASS)
    return new_method, None, f"declared model not trusted ({why}): " + (", ".join(changes) or "nothing to change")
