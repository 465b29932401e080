"""What the declared-model check (:mod:`audit.declared_model.declared`) reads of one world's residuals, held
either as the stacked residuals (``n × rows × cols``, exact two-pass sums) or as running moments
fed one release at a time, whose memory does not grow with the releases.

Per entry e the running mean, M2, M3 and M4 of the residuals R_ie are updated by Welford's and
Pébay's one-pass formulas (Pébay 2008, eq. 2.1-2.3; with δ = x − mean_old, n the new count):

    mean += δ/n
    M4   += δ⁴(n−1)(n²−3n+3)/n³ + 6δ²M2/n² − 4δM3/n
    M3   += δ³(n−1)(n−2)/n² − 3δM2/n
    M2   += δ²(n−1)/n

so ΣC² = Σ_e M2_e and ΣC⁴ = Σ_e M4_e with C = R − R̄. The row and column sums of C are handled
the same way (Welford on the per-release sums), and the co-moment of two steps' residuals
Σ_e Σ_i (a_ie − ā_e)(c_ie − c̄_e) by ``cross += (1 − 1/n)·Σ_e δ_a·δ_c``. The KS subsample's
positions are drawn before any release (they depend only on n and the entry count), its raw
residuals kept as their releases pass and centred at the end.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the shape test reads at most this many standardised entries (a fixed random subsample)
KS_SUBSAMPLE = 20_000


def ks_positions(total: int, rng: np.random.Generator) -> np.ndarray | None:
    """The KS subsample's positions in the flattened n × rows × cols residuals (None: all)."""
    return None if total <= KS_SUBSAMPLE else rng.choice(total, KS_SUBSAMPLE, replace=False)


@dataclass
class ResidualSummary:
    """The sufficient statistics of one world's residuals R (n × rows × cols), C = R − R̄."""

    n: int
    rows: int
    cols: int
    mean: np.ndarray  # R̄, rows × cols
    sum_c2: float  # Σ C²
    sum_c4: float  # Σ C⁴
    sum_r2: float  # Σ R²
    colsum_c2: float  # Σ_i ‖C_i summed over rows‖² (one sum per column)
    rowsum_c2: float  # Σ_i ‖C_i summed over columns‖²
    ks: np.ndarray  # C at the KS positions (all of C when it is small)


def summarise(R: np.ndarray, positions: np.ndarray | None) -> ResidualSummary:
    """The summary of the stacked residuals R, in two exact passes."""
    n, r, c = R.shape
    mean = R.mean(0)
    C = R - mean
    C2 = C * C
    cols, rows = C.sum(1), C.sum(2)
    flat = C.ravel()
    return ResidualSummary(n, r, c, mean, float(C2.sum()), float((C2 * C2).sum()), float((R * R).sum()),
                           float((cols * cols).sum()), float((rows * rows).sum()),
                           flat if positions is None else flat[positions])


class _Welford:
    """Running mean and M2 of vectors (summed over their entries at the end)."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, None, None

    def add(self, x: np.ndarray) -> None:
        self.n += 1
        if self.mean is None:
            self.mean, self.m2 = np.zeros_like(x), np.zeros_like(x)
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)


class ResidualMoments:
    """One world's residuals of one step, fed one release (rows × cols) at a time."""

    def __init__(self, n: int, positions: np.ndarray | None) -> None:
        self.expected, self.positions = n, positions
        self.n = 0
        self.mean = self.m2 = self.m3 = self.m4 = None
        self.sum_r2 = 0.0
        self.cols, self.rows = _Welford(), _Welford()
        self.ks: np.ndarray | None = None

    def add(self, r: np.ndarray) -> np.ndarray:
        """Adds residual `r`; returns δ = r − the mean before it (for :meth:`cross`)."""
        if self.mean is None:
            self.mean, self.m2, self.m3, self.m4 = (np.zeros_like(r) for _ in range(4))
            size = self.expected * r.size if self.positions is None else self.positions.size
            self.ks = np.empty(size)
        i, flat = self.n, r.ravel()
        self.n += 1
        n = self.n
        delta = r - self.mean
        dn = delta / n
        dn2 = dn * dn
        term1 = delta * dn * (n - 1)
        self.mean += dn
        self.m4 += term1 * dn2 * (n * n - 3 * n + 3)
        self.m4 += 6 * dn2 * self.m2
        self.m4 -= 4 * dn * self.m3
        self.m3 += term1 * dn * (n - 2)
        self.m3 -= 3 * dn * self.m2
        self.m2 += term1
        self.sum_r2 += float(np.dot(flat, flat))
        self.cols.add(r.sum(0))
        self.rows.add(r.sum(1))
        if self.positions is None:
            self.ks[i * r.size:(i + 1) * r.size] = flat
        else:
            mine = np.flatnonzero(self.positions // r.size == i)
            self.ks[mine] = flat[self.positions[mine] % r.size]
        return delta

    def summary(self) -> ResidualSummary:
        rows, cols = self.mean.shape
        where = np.tile(np.arange(self.mean.size), self.n) if self.positions is None else self.positions % self.mean.size
        return ResidualSummary(self.n, rows, cols, self.mean, float(self.m2.sum()), float(self.m4.sum()),
                               self.sum_r2, float(self.cols.m2.sum()), float(self.rows.m2.sum()),
                               self.ks - self.mean.ravel()[where])


class ResidualStack:
    """One world's residuals of one step, held whole (the exact reference of :class:`ResidualMoments`)."""

    def __init__(self, n: int, positions: np.ndarray | None) -> None:
        self.positions = positions
        self.items: list[np.ndarray] = []

    @property
    def n(self) -> int:
        return len(self.items)

    def add(self, r: np.ndarray) -> None:
        self.items.append(r)

    def stacked(self) -> np.ndarray:
        return np.stack(self.items)

    def summary(self) -> ResidualSummary:
        return summarise(self.stacked(), self.positions)


def cross_moment(a: ResidualStack, c: ResidualStack) -> float:
    """Σ over entries and releases of (a − ā)(c − c̄), from two stacks (exact)."""
    A, Cc = a.stacked(), c.stacked()
    return float(((A - A.mean(0)) * (Cc - Cc.mean(0))).sum())


__all__ = ["KS_SUBSAMPLE", "ResidualMoments", "ResidualStack", "ResidualSummary", "cross_moment", "ks_positions",
           "summarise"]
