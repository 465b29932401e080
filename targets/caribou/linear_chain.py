"""CARIBOU's edge-level PCMP as a linear Gaussian chain: the exact law of X⁽ᴷ⁾ given X⁽⁰⁾ while no
row is projected, and the μ of the best test of one edge pair on it (issue #32).

With every row inside the unit ball the projection is the identity and hop k + 1 is (Eq. 4)
    X⁽ᵏ⁺¹⁾ = L X⁽ᵏ⁾ + β X⁽⁰⁾ + Z_k,   L = C_L (α1 Â + (1 − α1) 11ᵀ/n),   Z_k with iid N(0, s²) entries,
so X⁽ᴷ⁾ = Lᴷ X⁽⁰⁾ + β Σ_{j<K} Lʲ X⁽⁰⁾ + Σ_{j<K} Lʲ Z_{K−1−j}: its columns are independent Gaussians
with the noiseless chain as mean and covariance s² S, S = Σ_{j<K} Lʲ Lʲᵀ. Only X⁽ᴷ⁾ is released, so
the hidden hops enter through S. The claim charges √M(K, C_L)·Δ/s; a signal that adds Δ along an
eigenvector of L with eigenvalue C_L at every hop meets it exactly, since M = (Σγʲ)² / Σγ²ʲ.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch_geometric.data import Data

from targets.caribou.model import gcn_operator

#: the chain is an analysis tool (witness search, exact laws of small graphs): dense float64 on the CPU
CPU = torch.device("cpu")


def operator(graph: Data, contraction: float, alpha1: float) -> torch.Tensor:
    """L = C_L (α1 Â + (1 − α1) 11ᵀ/n), dense float64 (the CGL's linear part)."""
    n = int(graph.num_nodes)
    a_hat = gcn_operator(graph, CPU, torch.float64).to_dense()
    return contraction * (alpha1 * a_hat + (1 - alpha1) * torch.full((n, n), 1.0 / n, dtype=torch.float64, device=CPU))


@dataclass
class ChainLaw:
    """X⁽ᴷ⁾'s law with no row projected: each column ~ N(mean[:, c], s² · cov)."""

    mean: torch.Tensor  # n × h
    cov: torch.Tensor  # n × n, in units of s²
    _chol: torch.Tensor | None = None

    def log_density(self, x: torch.Tensor, noise_std: float) -> float:
        """log N(x; mean, s² cov), columns independent (up to the 2π constant)."""
        if self._chol is None:
            self._chol = torch.linalg.cholesky(self.cov)
        r = torch.linalg.solve_triangular(self._chol, (x.double() - self.mean) / noise_std, upper=False)
        log_det = self._chol.diagonal().log().sum() + self.mean.size(0) * math.log(noise_std)
        return float(-0.5 * r.pow(2).sum() - x.size(1) * log_det)


def chain_law(graph: Data, x0: torch.Tensor, hops: int, contraction: float, alpha1: float,
              beta: float) -> ChainLaw:
    """The law of X⁽ᴷ⁾ on `graph` given X⁽⁰⁾ = `x0`, while no row is projected."""
    lin = operator(graph, contraction, alpha1)
    x0 = x0.double()
    mean = x0
    power = torch.eye(lin.size(0), dtype=torch.float64, device=CPU)
    cov = torch.zeros_like(power)
    for _ in range(hops):
        mean = lin @ mean + beta * x0
        cov += power @ power.T  # Lʲ Lʲᵀ for j = 0 … K−1
        power = lin @ power
    return ChainLaw(mean=mean, cov=cov)


def pair_mu(law0: ChainLaw, law1: ChainLaw, noise_std: float) -> dict[str, float]:
    """μ of the linear test of world 0 against world 1: ‖S_b^{-1/2}(m1 − m0)‖/s under each world's
    covariance S_b. Where S0 = S1 (the worlds differ in the mean only) both are the exact GDP μ of
    the pair; otherwise the test's two readings, and `cov_gap` = ‖S1 − S0‖/‖S0‖ says by how much
    the worlds' covariances differ (a Gaussian pair with unequal covariances is not μ-GDP)."""
    diff = law1.mean - law0.mean
    out = {}
    for b, law in ((0, law0), (1, law1)):
        out[f"mu_{b}"] = math.sqrt(float((diff * torch.linalg.solve(law.cov, diff)).sum())) / noise_std
    out["cov_gap"] = float(torch.linalg.matrix_norm(law1.cov - law0.cov, ord=2)
                           / torch.linalg.matrix_norm(law0.cov, ord=2))
    return out


def max_row_norm(graph: Data, x0: torch.Tensor, hops: int, contraction: float, alpha1: float,
                 beta: float) -> float:
    """The largest row norm of the noiseless hops X⁽¹⁾…X⁽ᴷ⁾ before projection (≤ 1: the chain is
    linear up to the noise's excursions)."""
    lin = operator(graph, contraction, alpha1)
    x = x0.double()
    top = 0.0
    for _ in range(hops):
        x = lin @ x + beta * x0.double()
        top = max(top, float(x.norm(dim=1).max()))
    return top
