"""The declared-model check's statistical tests (:mod:`audit.declared_model.declared`'s battery): each world's
residuals, from a :class:`~audit.declared_model.declared_moments.ResidualSummary`, against the declared Gaussian
law, and SML trace steps against W·χ²_d; the module doc of :mod:`audit.declared_model.declared` states each test.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import torch
from scipy import stats

from audit.declared_model import declared_moments as moments


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


def two_sided_chi2(stat: float, dof: float) -> float:
    return float(min(1.0, 2 * min(stats.chi2.cdf(stat, dof), stats.chi2.sf(stat, dof))))


def as3d(t: torch.Tensor) -> np.ndarray:
    a = t.detach().to("cpu", torch.float64).numpy()
    if a.ndim == 0:
        return a.reshape(1, 1)
    if a.ndim == 1:
        return a.reshape(1, -1)
    return a.reshape(a.shape[0], -1)


def gaussian_battery(R: np.ndarray, std: float | None, world: int, rng: np.random.Generator,
                      directions: Any = ()) -> tuple[list[Test], float]:
    """The Gaussian tests of one world's residuals R (n × rows × cols); returns (tests, v̂).
    `std` None: scale not tested (e.g. directions of SML noise, already unit-scaled)."""
    return battery(moments.summarise(R, moments.ks_positions(R.size, rng)), std, world, directions)


def battery(s: moments.ResidualSummary, std: float | None, world: int, directions: Any = ()
             ) -> tuple[list[Test], float]:
    """The Gaussian tests of one world's residual summary; returns (tests, v̂).
    `directions`: (label, u) with u shaped like one residual; the residual mean's component along
    each u is z-tested (terms a declared mean typically misses: self-loops, a normalisation)."""
    n, r, c = s.n, s.rows, s.cols
    E = r * c
    Rbar = s.mean
    dof_w = (n - 1) * E
    vhat = s.sum_c2 / dof_w
    out: list[Test] = []
    if vhat <= 0:
        return [Test("identical", world, None, False, "residuals identical across releases")], 0.0
    if std is not None:
        if std <= 0:
            out.append(Test("scale", world, None, False, f"declared std 0, measured {math.sqrt(vhat):.4g}"))
        else:
            stat = s.sum_c2 / std**2
            out.append(Test("scale", world, two_sided_chi2(stat, dof_w),
                            detail=f"measured std {math.sqrt(vhat):.4g} vs declared {std:.4g}"))
    mean_sq = float((Rbar * Rbar).sum())
    stat = n * mean_sq / vhat  # /E: F(E, (n−1)E) (R̄ and C independent under the null)
    f = stat / E
    p = float(min(1.0, 2 * min(stats.f.cdf(f, E, dof_w), stats.f.sf(f, E, dof_w))))
    corr = float((n * n * mean_sq - s.sum_r2) / (n * (n - 1) * E * vhat)) if n > 1 else 0.0
    out.append(Test("entry-mean", world, p,
                    detail=f"n·Σ mean²/v̂ = {stat:.4g} (dof {E}); rms entry bias {math.sqrt(mean_sq / E):.3g}; "
                           f"mean residual correlation between generators {corr:.3g}"))
    for label, u in directions:
        norm = float(np.sqrt((u * u).sum()))
        if norm > 0 and u.shape == Rbar.shape:
            zu = float((Rbar * u).sum()) / norm * math.sqrt(n / vhat)
            out.append(Test("mean-direction", world, float(2 * stats.norm.sf(abs(zu))),
                            detail=f"residual mean along {label}: z = {zu:.3g}"))
    z = n * float(Rbar.sum()) / math.sqrt(n * E * vhat)
    out.append(Test("global-mean", world, float(2 * stats.norm.sf(abs(z))), detail=f"z = {z:.3g}"))
    # the column sums (rows summed) of C span a (n−1)·cols-dimensional subspace of C's (n−1)·E: under
    # the null their share of ΣC² is Beta((n−1)c/2, (n−1)(E−c)/2); row sums likewise
    for name, sums, size, k in (("rows-shared", s.colsum_c2, r, c), ("cols-shared", s.rowsum_c2, c, r)):
        if size > 1 and n > 1:
            share = sums / size / s.sum_c2
            a, b = (n - 1) * k / 2, (n - 1) * (E - k) / 2
            p = float(min(1.0, 2 * min(stats.beta.cdf(share, a, b), stats.beta.sf(share, a, b))))
            what = "column sums" if name == "rows-shared" else "row sums"
            out.append(Test(name, world, p, detail=f"variance ratio of {what} {share * dof_w / ((n - 1) * k):.3g} (1 expected)"))
    scale = math.sqrt(vhat * (n - 1) / n)
    sub = s.ks / scale
    ks = stats.kstest(sub, "norm")
    out.append(Test("shape-ks", world, float(ks.pvalue), detail=f"KS D = {ks.statistic:.4g} on {sub.size} entries"))
    kurt = s.sum_c4 / scale**4 / (n * E) - 3.0
    zk = kurt / math.sqrt(24.0 / (n * E))
    out.append(Test("kurtosis", world, float(2 * stats.norm.sf(abs(zk))), detail=f"excess kurtosis {kurt:.3g}"))
    return out, vhat


def sml_tests(R: np.ndarray, std: float, world: int, rng: np.random.Generator) -> list[Test]:
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
    tests, _ = gaussian_battery(U, None, world, rng)
    shape, means = ("shape-ks", "kurtosis"), ("entry-mean", "global-mean")
    for t in tests:
        if t.name in shape or t.name in means:
            t.name = "sml-direction" if t.name in shape else t.name
            out.append(t)
    return out


def directions(graph: Any, mean: torch.Tensor | None, shape: tuple[int, ...]) -> Iterator[tuple[str, np.ndarray]]:
    """Terms a declared mean typically misses or mis-scales: the declared mean itself (a different
    normalisation, a scale), the mean scaled by degree or by its inverse (row / symmetric
    normalisation), and the graph's features, raw and unit-row (self-loops, a residual connection);
    one at a time (each is as large as a release)."""
    if mean is not None:
        m = as3d(mean)
        yield (("the declared mean", m))
        if getattr(graph, "edge_index", None) is not None and m.shape[0] == int(graph.num_nodes):
            deg = np.bincount(graph.edge_index[0].cpu().numpy(), minlength=m.shape[0]).astype(float)[:, None]
            yield (("the declared mean / degree", m / np.maximum(deg, 1.0)))
            yield (("the declared mean · degree", m * deg))
    x = getattr(graph, "x", None)
    if isinstance(x, torch.Tensor) and tuple(x.shape) == tuple(shape):
        xd = x.detach().to("cpu", torch.float64)
        yield (("the features", xd.numpy()))
        yield (("the unit-row features", (xd / xd.norm(dim=1, keepdim=True).clamp_min(1e-12)).numpy()))


def world_scale(vh: dict[int, float], n: int, entries: int, expected: float = 1.0) -> Test:
    """F test of v̂₁/v̂₀ against `expected` (the ratio of the declared variances)."""
    if vh[0] <= 0 or vh[1] <= 0:
        return Test("world-scale", None, None, vh[0] == vh[1], "zero residual variance")
    dof = (n - 1) * entries
    f = vh[1] / vh[0] / expected
    p = float(min(1.0, 2 * min(stats.f.cdf(f, dof, dof), stats.f.sf(f, dof, dof))))
    return Test("world-scale", None, p, detail=f"std ratio world1/world0 {math.sqrt(f):.4g}")
