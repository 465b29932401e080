"""The declared-model check's trace steps (:mod:`audit.declared_model.declared` runs the check): a release's
trace rows by dimension, and one :class:`~audit.declared_model.declared_verdict.StepCheck` per dimension
against the declared Gaussian or SML law.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from audit.declared_model import declared_joint
from audit.declared_model.declared_battery import Test, gaussian_battery as _gaussian_battery, sml_tests as _sml_tests
from audit.declared_model.declared_battery import world_scale as _world_scale
from audit.declared_model.declared_verdict import StepCheck
from audit.declared_model.declared_verdict import StepStatus
from targets.base import Level
from targets.common.noise import NoiseLaw
from targets.common.pair_law import PairLaw


def trace_rows(trace: Any) -> dict[int, tuple[list, list]]:
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


def check_trace(groups: dict[int, list[dict[int, tuple[list, list]]]], law: tuple[Any, Any], info: dict[str, Any],
                 rng: np.random.Generator) -> list[StepCheck]:
    """One :class:`StepCheck` per group of trace steps of one dimension (a trace may interleave
    modules of different sizes), each on the first T steps of that dimension every release has.
    `groups`: per world, each release's :func:`trace_rows`; `law`: the first trace's (noise,
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
            check.status = StepStatus.UNDECLARED
            check.notes.append("the trace carries no clean sums: freshness only")
            check.tests += declared_joint.identity_tests(outputs, None, Test)
            continue
        residuals = {b: [np.stack(g[d][1][:T]) for g in groups[b]] for b in (0, 1)}
        check.tests += declared_joint.identity_tests(outputs, residuals, Test)
        if std is None or noise not in (NoiseLaw.GAUSSIAN, NoiseLaw.SML):
            check.status = StepStatus.UNVERIFIED
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
