"""The declared-model check's mechanism steps (:mod:`audit.declared_model.declared` runs the check): each
world's steps read one release at a time (:class:`StepWorld`, :class:`WorldSteps`, never holding the releases)
and the verdict on one step from both worlds' reading (:func:`step_check`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from audit.declared_model import declared_joint
from audit.declared_model import declared_laplace as laplace
from audit.declared_model import declared_moments as moments
from audit.declared_model.declared_battery import Test, as3d as _as3d, battery as _battery, directions as _directions
from audit.declared_model.declared_battery import world_scale as _world_scale
from audit.declared_model.declared_verdict import SEED_TAG, StepCheck
from audit.declared_model.declared_verdict import StepStatus
from targets.base import Level, MechanismStep
from targets.common.noise import NoiseLaw


class StepWorld:
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


class WorldSteps:
    """Every mechanism step of one world, read release by release, with the co-moments of each
    pair of steps with as many entries (the ``shared-steps`` test)."""

    def __init__(self, b: int, graph: Any, n: int, stream: bool, seed: int) -> None:
        self.b, self.graph, self.n, self.stream, self.seed = b, graph, n, stream, seed
        self.counts: set[int] = set()
        self.steps: list[StepWorld] = []
        self._cross: dict[tuple[int, int], float] = {}
        self.cross: dict[tuple[int, int], tuple[int, int, float, float, float]] = {}

    def add(self, view: list[MechanismStep] | None) -> None:
        self.counts.add(-1 if view is None else len(view))
        if view is None or len(self.counts) > 1:
            return
        while len(self.steps) < len(view):
            self.steps.append(StepWorld(len(self.steps), self.b, self.graph, self.n, self.stream, self.seed))
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


def step_check(k: int, w: dict[int, StepWorld]) -> tuple[StepCheck, bool]:
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
        check.status = StepStatus.UNVERIFIED
        check.notes.append("log_density declared: the exact likelihood ratio is not tested (freshness only)")
        check.tests += declared_joint.identity_from_digests(digests, None, Test)
        return check, False
    if not std and std != 0.0:
        check.status = StepStatus.UNDECLARED
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
        check.status = StepStatus.UNVERIFIED
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
