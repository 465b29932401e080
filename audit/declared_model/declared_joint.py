"""Declarations checked together: what one step's battery (:mod:`audit.declared_model.declared`) cannot see.

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

Both append :class:`audit.declared_model.declared_battery.Test` rows to the steps, so the check's Bonferroni and its policy
(no a-priori threshold, no ``gdp`` once a test fails) apply; :func:`deviations` names what was
found, for a portfolio that switches to a score exploiting it.
"""
from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
from scipy import stats

#: an entry's noise is resolvable in float32 when the declared std is at least this share of |output|
RESOLVABLE = 1e-4


class NoiseFree:
    """The ``noise-free`` test's running state over one world's outputs (one array of one shape at
    a time): the first output, where every later one equals it, and the largest |output|."""

    def __init__(self) -> None:
        self.count, self.first, self.same, self.absmax = 0, None, None, None

    def add(self, output: np.ndarray) -> None:
        self.count += 1
        if self.first is None:
            self.first, self.same, self.absmax = output.copy(), np.ones(output.shape, bool), np.abs(output)
            return
        self.same &= output == self.first
        np.maximum(self.absmax, np.abs(output), out=self.absmax)

    def test(self, std: float, world: int, make_test: Any) -> Any | None:
        """The exact test; None where no entry's noise is resolvable (or fewer than two outputs)."""
        if not std or self.count < 2:
            return None
        resolvable = std >= RESOLVABLE * self.absmax
        if not resolvable.any():
            return None
        still = self.same & resolvable
        count = int(still.sum())
        rows = int(still.any(axis=tuple(range(1, still.ndim))).sum()) if still.ndim > 1 else count
        detail = (f"{count} entries ({rows} rows) the same in all {self.count} releases of world {world} "
                  f"though the declared std is {std:.4g}") if count else ""
        return make_test("noise-free", world, None, count == 0, detail)


def noise_free_test(outputs: list[np.ndarray], std: float, world: int, make_test: Any) -> Any | None:
    """The exact ``noise-free`` test on one world's outputs (n arrays of one shape); None where no
    entry's noise is resolvable."""
    state = NoiseFree()
    for o in outputs:
        state.add(o)
    return state.test(std, world, make_test)


def shared_step_tests(pairs: list[tuple[int, int, int, int, int, float, float, float]], make_test: Any
                      ) -> dict[int, list[Any]]:
    """``shared-steps`` tests, one per (k, l, world, n, entries, Σ c_k·c_l, Σ c_k², Σ c_l²) with k < l
    (the centred residuals' co-moment and squares over every entry and release): {l: [tests]}
    (each test is attached to the later step)."""
    out: dict[int, list[Any]] = {}
    for k, l, b, n, entries, cross, sq_k, sq_l in pairs:
        norm = math.sqrt(sq_k * sq_l)
        if norm == 0:
            continue
        r = cross / norm
        z = r * math.sqrt((n - 1) * entries)
        p = float(2 * stats.norm.sf(abs(z)))
        out.setdefault(l, []).append(make_test(
            "shared-steps", b, p, True, f"steps {k} and {l}: residual correlation {r:.3g} (z = {z:.3g})"))
    return out


#: residuals are compared across the worlds on at most this many entries (evenly spaced): reused
#: noise repeats every entry, fresh noise differs at all of them
FINGERPRINT = 4096


def digest(output: np.ndarray) -> bytes:
    """An output's identity (shape and bytes): two releases with one digest have the same output."""
    h = hashlib.blake2b(repr(output.shape).encode(), digest_size=20)
    h.update(np.ascontiguousarray(output).tobytes())
    return h.digest()


def fingerprint(residual: np.ndarray) -> tuple[np.ndarray, float]:
    """(the residual at :data:`FINGERPRINT` fixed entries, its largest |entry|)."""
    flat = residual.ravel()
    if flat.size > FINGERPRINT:
        flat = flat[np.linspace(0, flat.size - 1, FINGERPRINT).astype(np.int64)]
        return flat.copy(), float(np.abs(residual).max())
    return flat.copy(), float(np.abs(flat).max()) if flat.size else 0.0


def identity_from_digests(digests: dict[int, list[bytes]], prints: dict[int, list[tuple[np.ndarray, float]]] | None,
                          make_test: Any) -> list[Any]:
    """Exact: no two releases of one world with the same output (`digests`); no residual repeated
    across worlds (`prints`, from :func:`fingerprint`)."""
    out = []
    for b, ds in digests.items():
        same = sum(1 for i in range(len(ds)) for j in range(i + 1, len(ds)) if ds[i] == ds[j])
        out.append(make_test("identical", b, None, not same,
                             f"{same} pairs of identical outputs among {len(ds)} releases" if same else ""))
    if prints is not None and len(prints) == 2:
        same = 0
        for a, big in prints[0]:
            tol = 1e-7 * (1 + big)
            same += sum(1 for c, _ in prints[1] if a.shape == c.shape and np.abs(a - c).max(initial=0.0) <= tol)
        out.append(make_test("identical", None, None, same == 0,
                             f"{same} residuals repeated across the two worlds" if same else ""))
    return out


def identity_tests(outputs: dict[int, list[np.ndarray]], residuals: dict[int, list[np.ndarray]] | None,
                   make_test: Any) -> list[Any]:
    """:func:`identity_from_digests` on whole outputs and residuals."""
    prints = None if residuals is None else {b: [fingerprint(r) for r in rs] for b, rs in residuals.items()}
    return identity_from_digests({b: [digest(o) for o in outs] for b, outs in outputs.items()}, prints, make_test)


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
