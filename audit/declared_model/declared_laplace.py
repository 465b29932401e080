"""The declared-model check's tests of a Laplace law (``MechanismStep.laplace_scale`` = b: each entry's
noise is Laplace(0, b), i.i.d., variance σ² = 2b², μ₄ = 24b⁴, so κ = μ₄/σ⁴ = 6): the Gaussian battery
of :mod:`audit.declared_model.declared_battery` with each null replaced by the Laplace one, on the same residual
summary (n releases per world, C = R − R̄ centred per entry, v̂ = ΣC²/((n−1)E)).

* ``scale``: ΣC²/σ² has mean (n−1)E and variance E·(n−1)²/n·(κ − (n−3)/(n−1)) (the variance of a
  sample variance, any law with finite μ₄); its law is taken as the Gamma with those two moments,
  two-sided. ``world-scale``: ln(v̂₁/v̂₀) against N(ln(ratio declared), r₀ + r₁), r = (κ − (n−3)/(n−1))/(nE).
* ``entry-mean``: n·ΣR̄²/v̂, mean E, variance E·(2 + (κ−3)/n) (R̄ of n Laplace has excess kurtosis
  3/n), Gamma as above; ``mean-direction`` and ``global-mean``: the Gaussian battery's z-tests (linear
  in R̄: normal by the central limit theorem).
* ``rows-shared`` / ``cols-shared``: the column sums (rows summed, m = rows terms) of C against their
  Laplace null: Σ/(m·v̂) has mean (n−1)k and variance k·(n−1)²/n·(κ_m − (n−3)/(n−1)), κ_m = 3 + 3/m.
* ``laplace-shape``: C/sd(C) against the exact law of a centred Laplace residual (R − R̄ of n i.i.d.
  Laplace draws, which is not itself Laplace), by a two-sample KS against a fixed reference sample;
  ``laplace-kurtosis``: C's excess kurtosis against its exact value 3·((1−1/n)⁴ + (n−1)/n⁴)/(1−1/n)², with
  the Laplace law's delta-method variance (μ₈/σ⁸ − 4κμ₆/σ⁶ + 4κ³ − κ² = 1188, over nE entries;
  C is lighter-tailed than the Laplace, so this variance is an upper bound).

False-alarm rates and power: ``benchmarks/pure_dp.md``.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from scipy import stats

from audit.declared_model.declared_battery import Test
from audit.declared_model.declared_moments import ResidualSummary

KAPPA = 6.0  # μ₄/σ⁴ of a Laplace law
KURTOSIS_VAR = 1188.0  # the Laplace law's n·Var(sample kurtosis) (module docstring)
REFERENCE = 200_000


def _gamma_p(stat: float, mean: float, var: float) -> float:
    """Two-sided p-value of `stat` under the Gamma law with this mean and variance."""
    shape, scale = mean * mean / var, var / mean
    return float(min(1.0, 2 * min(stats.gamma.cdf(stat, shape, scale=scale), stats.gamma.sf(stat, shape, scale=scale))))


def _sample_variance_var(n: int, kappa: float) -> float:
    """Var(Σ_i (x_i − x̄)²)/σ⁴ for n i.i.d. draws of kurtosis κ."""
    return (n - 1) ** 2 / n * (kappa - (n - 3) / (n - 1))


def centred_excess_kurtosis(n: int) -> float:
    """The excess kurtosis of R_i − R̄ for n i.i.d. Laplace draws (excess 3)."""
    return 3.0 * ((1 - 1 / n) ** 4 + (n - 1) / n**4) / (1 - 1 / n) ** 2


@functools.lru_cache(maxsize=16)
def reference(n: int) -> np.ndarray:
    """A fixed sample of (R_i − R̄)/sd for n i.i.d. Laplace draws (one entry of each group)."""
    rng = np.random.default_rng([0x1A9, n])
    r = rng.laplace(0.0, 1.0, (REFERENCE, n))
    return (r[:, 0] - r.mean(1)) / math.sqrt(2.0 * (1 - 1 / n))


def battery(s: ResidualSummary, b: float, world: int, directions: Any = ()) -> tuple[list[Test], float]:
    """The Laplace tests of one world's residual summary against the declared scale `b`; (tests, v̂)."""
    n, r, c = s.n, s.rows, s.cols
    E = r * c
    vhat = s.sum_c2 / ((n - 1) * E)
    if vhat <= 0:
        return [Test("identical", world, None, False, "residuals identical across releases")], 0.0
    out: list[Test] = []
    if b <= 0:
        out.append(Test("scale", world, None, False, f"declared Laplace scale 0, measured {math.sqrt(vhat / 2):.4g}"))
    else:
        stat = s.sum_c2 / (2 * b * b)
        out.append(Test("scale", world, _gamma_p(stat, (n - 1) * E, E * _sample_variance_var(n, KAPPA)),
                        detail=f"measured Laplace scale {math.sqrt(vhat / 2):.4g} vs declared {b:.4g}"))
    mean_sq = float((s.mean * s.mean).sum())
    stat = n * mean_sq / vhat
    out.append(Test("entry-mean", world, _gamma_p(stat, E, E * (2 + (KAPPA - 3) / n)),
                    detail=f"n·Σ mean²/v̂ = {stat:.4g} ({E} expected); rms entry bias {math.sqrt(mean_sq / E):.3g}"))
    for label, u in directions:
        norm = float(np.sqrt((u * u).sum()))
        if norm > 0 and u.shape == s.mean.shape:
            zu = float((s.mean * u).sum()) / norm * math.sqrt(n / vhat)
            out.append(Test("mean-direction", world, float(2 * stats.norm.sf(abs(zu))),
                            detail=f"residual mean along {label}: z = {zu:.3g}"))
    z = n * float(s.mean.sum()) / math.sqrt(n * E * vhat)
    out.append(Test("global-mean", world, float(2 * stats.norm.sf(abs(z))), detail=f"z = {z:.3g}"))
    for name, sums, m, k in (("rows-shared", s.colsum_c2, r, c), ("cols-shared", s.rowsum_c2, c, r)):
        if m > 1 and n > 1:
            w = sums / (m * vhat)
            var = k * _sample_variance_var(n, 3.0 + (KAPPA - 3) / m)
            what = "column sums" if name == "rows-shared" else "row sums"
            out.append(Test(name, world, _gamma_p(w, (n - 1) * k, var),
                            detail=f"variance ratio of {what} {w / ((n - 1) * k):.3g} (1 expected)"))
    sd = math.sqrt(vhat * (n - 1) / n)
    ks = stats.ks_2samp(s.ks / sd, reference(n))
    out.append(Test("laplace-shape", world, float(ks.pvalue),
                    detail=f"KS D = {ks.statistic:.4g} on {s.ks.size} entries against a centred Laplace residual"))
    kurt = s.sum_c4 / sd**4 / (n * E) - 3.0
    expected = centred_excess_kurtosis(n)
    zk = (kurt - expected) / math.sqrt(KURTOSIS_VAR / (n * E))
    out.append(Test("laplace-kurtosis", world, float(2 * stats.norm.sf(abs(zk))),
                    detail=f"excess kurtosis {kurt:.3g} ({expected:.3g} expected of a centred Laplace residual)"))
    return out, vhat


def world_scale(vh: dict[int, float], n: int, entries: int, expected: float = 1.0) -> Test:
    """v̂₁/v̂₀ against `expected` (the declared scales' ratio, squared), on the log scale."""
    if vh[0] <= 0 or vh[1] <= 0:
        return Test("world-scale", None, None, vh[0] == vh[1], "zero residual variance")
    r = (KAPPA - (n - 3) / (n - 1)) / (n * entries)
    z = (math.log(vh[1] / vh[0]) - math.log(expected)) / math.sqrt(2 * r)
    return Test("world-scale", None, float(2 * stats.norm.sf(abs(z))),
                detail=f"scale ratio world1/world0 {math.sqrt(vh[1] / vh[0] / expected):.4g}")


def step_check(check: Any, w: dict[int, Any], scales: dict[int, float | None], digests: dict[int, list]
               ) -> tuple[Any, bool]:
    """The verdict on a step that declares a Laplace law (`scales`: each world's declared b), from
    both worlds' reading (``audit.declared_model.declared_steps.StepWorld``): the identity and noise-free tests, each
    world's battery, ``world-scale``. True where its residuals took the battery."""
    from audit.declared_model import declared_joint
    from targets.common.noise import NoiseLaw

    if scales[0] != scales[1] or not scales[0]:
        check.tests.append(Test("declared-world" if scales[0] and scales[1] else "structure", None, None, False,
                                f"declared Laplace scale {scales[0]} in world 0, {scales[1]} in world 1"))
        return check, False
    for b in (0, 1):
        if w[b].mean_error:
            check.tests.append(Test("structure", b, None, False, w[b].mean_error))
            return check, False
    std = math.sqrt(2.0) * float(scales[0])
    check.declared_std, check.law = std, NoiseLaw.LAPLACE.value
    check.notes.append(f"declared Laplace noise of scale {scales[0]:.6g} (std {std:.6g})")
    check.tests += declared_joint.identity_from_digests(digests, {b: w[b].prints for b in (0, 1)}, Test)
    check.tests += [t for b in (0, 1) if (t := w[b].noise_free.test(std, b, Test))]
    for b in (0, 1):
        check.tests += w[b].tests
        check.measured_std.append(math.sqrt(w[b].vhat))
    entries = int(np.prod(next(iter(w[0].shapes))))
    check.tests.append(world_scale({b: w[b].vhat for b in (0, 1)}, n=len(w[0].digests), entries=entries))
    return check, True
