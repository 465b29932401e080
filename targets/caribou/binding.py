"""Where CARIBOU's convergent accounting binds (issue #32): a witness X⁽⁰⁾ searched on the exact
linear chain (:mod:`targets.caribou.linear_chain`), with every noiseless hop inside the unit ball so
that the released X⁽ᴷ⁾ is that chain's Gaussian up to the noise's excursions.

The search maximises the exact μ of the pair (world 0's covariance) over unit-row X⁽⁰⁾ and β, with a
penalty on any noiseless hop row above ``1 − margin``; ``ratio`` is that μ over the claim's
√M(K, C_L)·Δ/s (the noise scale cancels). It is a search, not a proof: its result is a lower bound
on how far the claim can be met by a witness of this graph.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch_geometric.data import Data

from graphs.ops import add_edge
from graphs.small import make_graph
from targets.caribou.accountant import convergent_multiplier, edge_sensitivity
from targets.caribou.linear_chain import CPU, chain_law, max_row_norm, operator, pair_mu


def circulant(n: int, d: int, features: int) -> Data:
    """The d-regular circulant C_n(1…d/2) (every node's D = d)."""
    edges = [(i, (i + k) % n) for i in range(n) for k in range(1, d // 2 + 1)]
    return make_graph(n, edges, features=features, name=f"circulant C{n}(d={d})")


@dataclass
class BindingWitness:
    """A searched witness: X⁽⁰⁾ (unit rows), β, and the exact reading of the pair on it."""

    x0: torch.Tensor
    beta: float
    mu_unit: float  # μ·s: the linear test's μ at unit noise std (world 0's covariance)
    claim_unit: float  # √M·Δ: the claim's μ·s
    max_norm: float  # the largest noiseless hop row norm (≤ 1 − margin)

    @property
    def ratio(self) -> float:
        return self.mu_unit / self.claim_unit


def search(g0: Data, g1: Data, *, hops: int, contraction: float, alpha1: float, width: int,
           margin: float = 0.05, steps: int = 600, restarts: int = 2, seed: int = 0) -> BindingWitness:
    """The best unit-row X⁽⁰⁾ (n × width) and β found by projected Adam on the exact chain."""
    l0, l1 = (operator(g, contraction, alpha1) for g in (g0, g1))
    cov0 = chain_law(g0, torch.zeros(g0.num_nodes, 1, device=CPU), hops, contraction, alpha1, 0.0).cov
    cov0_inv = torch.linalg.inv(cov0)
    d_min = min(int(g.edge_index[0].bincount(minlength=g.num_nodes).min()) for g in (g0, g1))
    claim_unit = math.sqrt(convergent_multiplier(hops, contraction)) * edge_sensitivity(d_min, contraction, alpha1)
    best: BindingWitness | None = None
    for r in range(restarts):
        gen = torch.Generator().manual_seed(seed + r)
        w = torch.randn(g0.num_nodes, width, generator=gen, dtype=torch.float64, device=CPU).requires_grad_()
        log_beta = torch.tensor(math.log(max(1e-3, (1 - contraction) * (1 - margin))), dtype=torch.float64,
                                requires_grad=True)
        opt = torch.optim.Adam([w, log_beta], lr=0.02)
        for _ in range(steps):
            x0 = w / w.norm(dim=1, keepdim=True)
            beta = log_beta.exp()
            x_0, x_1, top = x0, x0, torch.zeros((), dtype=torch.float64, device=CPU)
            for _ in range(hops):
                x_0, x_1 = l0 @ x_0 + beta * x0, l1 @ x_1 + beta * x0
                top = torch.maximum(top, torch.maximum(x_0.norm(dim=1).max(), x_1.norm(dim=1).max()))
            diff = x_1 - x_0
            mu = (diff * (cov0_inv @ diff)).sum().sqrt()
            loss = -mu / claim_unit + 50 * torch.relu(top - (1 - margin)) ** 2
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            x0 = w / w.norm(dim=1, keepdim=True)
            beta = float(log_beta.exp())
            # keep the noiseless hops inside the ball: shrink β until they are
            while max(max_row_norm(g, x0, hops, contraction, alpha1, beta) for g in (g0, g1)) > 1 - margin:
                beta *= 0.995
            laws = [chain_law(g, x0, hops, contraction, alpha1, beta) for g in (g0, g1)]
            mu_unit = pair_mu(laws[0], laws[1], 1.0)["mu_0"]
            top = max(max_row_norm(g, x0, hops, contraction, alpha1, beta) for g in (g0, g1))
            found = BindingWitness(x0=x0.clone(), beta=beta, mu_unit=mu_unit, claim_unit=claim_unit, max_norm=top)
        if best is None or found.ratio > best.ratio:
            best = found
    assert best is not None
    return best


def antipodal_pair(n: int, d: int, width: int) -> tuple[Data, Data, tuple[int, int]]:
    """C_n(d) and the same graph with the edge (0, n/2) added: the canary's ends share no neighbour."""
    g0 = circulant(n, d, width)
    edge = (0, n // 2)
    return g0, add_edge(g0, *edge), edge
