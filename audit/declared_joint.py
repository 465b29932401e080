"""Declarations checked together: what one step's battery (:mod:`audit.declared`) cannot see.

Each step's declared law can pass alone while the steps together break it:

* ``shared-steps``: the noises of two steps are correlated (one draw added to both, or one derived
  from the other). An attack that sums the steps' log-likelihood ratios as if their noises were
  independent (``mechanism-lrt``) then rests on a wrong model: with the means moving in opposite
  directions the noise cancels from the sum and the score is a deterministic distinguisher. Test:
  the correlation of the two steps' centred residuals over every entry and release,
  ``r·√((n − 1)·E)`` against N(0, 1), two-sided, for each pair of steps with the same entry count.
* ``identical`` (exact): two releases of one world with the same output, or one residual repeated
  in both worlds: the noise ignores the generator.
* ``noise-free``: entries released without noise though the step declares a std: an entry's
  output is the same in all n releases of a world while the declared std is far above the float
  resolution of that entry (``std ≥ 1e-4·|output|``, so rounding cannot make n Gaussian draws
  equal). Exact.

Both append :class:`audit.declared.Test` rows to the steps, so the check's Bonferroni and its policy
(no a-priori threshold, no ``gdp`` once a test fails) apply; :func:`deviations` names what was
found, for a portfolio that switches to a score exploiting it.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

#: an entry's noise is resolvable in float32 when the declared std is at least this share of |output|
RESOLVABLE = 1e-4


def noise_free_test(outputs: list[np.ndarray], std: float, world: int, make_test: Any) -> Any | None:
    """The exact ``noise-free`` test on one world's outputs (n arrays of one shape); None where no
    entry's noise is resolvable."""
    if not std or len(outputs) < 2:
        return None
    stack = np.stack(outputs)
    resolvable = std >= RESOLVABLE * np.abs(stack).max(0)
    if not resolvable.any():
        return None
    still = (stack.max(0) == stack.min(0)) & resolvable
    count = int(still.sum())
    rows = int(still.any(axis=tuple(range(1, still.ndim))).sum()) if still.ndim > 1 else count
    detail = (f"{count} entries ({rows} rows) the same in all {len(outputs)} releases of world {world} "
              f"though the declared std is {std:.4g}") if count else ""
    return make_test("noise-free", world, None, count == 0, detail)


def shared_step_tests(residuals: dict[int, dict[int, np.ndarray]], make_test: Any) -> dict[int, list[Any]]:
    """``shared-steps`` tests for every pair of steps k < l with as many entries, per world:
    {l: [tests]} (each test is attached to the later step). `residuals[k][b]`: n × rows × cols."""
    out: dict[int, list[Any]] = {}
    steps = sorted(residuals)
    for i, k in enumerate(steps):
        for l in steps[i + 1:]:
            for b in (0, 1):
                a, c = residuals[k].get(b), residuals[l].get(b)
                if a is None or c is None or a.shape[0] != c.shape[0] or a[0].size != c[0].size:
                    continue
                n = a.shape[0]
                ca = (a - a.mean(0)).reshape(n, -1)
                cc = (c - c.mean(0)).reshape(n, -1)
                norm = math.sqrt(float((ca * ca).sum()) * float((cc * cc).sum()))
                if norm == 0:
                    continue
                r = float((ca * cc).sum()) / norm
                z = r * math.sqrt((n - 1) * ca.shape[1])
                p = float(2 * stats.norm.sf(abs(z)))
                out.setdefault(l, []).append(make_test(
                    "shared-steps", b, p, True, f"steps {k} and {l}: residual correlation {r:.3g} (z = {z:.3g})"))
    return out


def identity_tests(outputs: dict[int, list[np.ndarray]], residuals: dict[int, list[np.ndarray]] | None,
                   make_test: Any) -> list[Any]:
    """Exact: no two releases of one world with the same output; no residual repeated across worlds."""
    out = []
    for b, outs in outputs.items():
        flat = [o.ravel() for o in outs]
        same = [(i, j) for i in range(len(flat)) for j in range(i + 1, len(flat))
                if flat[i].shape == flat[j].shape and np.array_equal(flat[i], flat[j])]
        out.append(make_test("identical", b, None, not same,
                             f"{len(same)} pairs of identical outputs among {len(flat)} releases" if same else ""))
    if residuals is not None and len(residuals) == 2:
        r0 = [r.ravel() for r in residuals[0]]
        r1 = [r.ravel() for r in residuals[1]]
        same = 0
        for a in r0:
            tol = 1e-7 * (1 + np.abs(a).max())
            same += sum(1 for b in r1 if a.shape == b.shape and np.abs(a - b).max() <= tol)
        out.append(make_test("identical", None, None, same == 0,
                             f"{same} residuals repeated across the two worlds" if same else ""))
    return out


#: the joint tests whose failure is a deviation of the declared model
JOINT_TESTS = ("shared-steps", "noise-free", "identical")


def deviations(steps: list[Any]) -> list[str]:
    """What the joint tests found, one line each (for the record and a portfolio's choice of score)."""
    found = []
    for s in steps:
        for t in s.tests:
            if not t.passed and t.name in JOINT_TESTS:
                found.append(f"{t.name}: {t.detail}" if t.detail else t.name)
    return found


def deterministic_distinguisher(scores_out: np.ndarray, scores_in: np.ndarray, estimate: Any) -> str | None:
    """Where every trial of a world got the same score (to a millionth of the gap between the
    worlds) and the two worlds' scores differ, the release is a deterministic distinguisher: the
    reason, with the bound it reaches (only the budget limits it); None otherwise."""
    out, inn = np.asarray(scores_out, float), np.asarray(scores_in, float)
    if out.size < 2 or inn.size < 2:
        return None
    gap = abs(float(np.median(inn) - np.median(out)))
    # one score per world up to float rounding (noise that cancels exactly in theory leaves ulps)
    if gap == 0 or max(np.ptp(out), np.ptp(inn)) > 1e-6 * gap:
        return None
    order = getattr(estimate, "direction", "higher means IN")
    return (f"deterministic distinguisher: every release of a world gives one score (world 0: {out[0]:.6g}, "
            f"world 1: {inn[0]:.6g}; {order}): only the budget limits the bound, ε_lb {estimate.eps_lb:.4g} with "
            f"{out.size + inn.size} trials (a perfect attack's {estimate.max_certifiable_eps:.4g}): add trials for more")
