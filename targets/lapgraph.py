"""LapGraph: Laplace noise on the adjacency + noisy top-T, then a non-private GCN (LinkTeller's DP defence).

Wu, Long, Zhang & Li, "LinkTeller", IEEE S&P 2022; spec ``shared/specs/linkteller.md`` §7.2.

The graph is perturbed ONCE and a normal GCN (:class:`targets.gcn.NonPrivateGCN`) is trained and
queried on it (queries are post-processing). With ``ε1 = count_share·ε`` (0.01 in the paper) and
``ε2 = ε − ε1``:

* ``T = |E| + trunc(Lap(1/ε1))`` — a noisy count of undirected edges (sensitivity 1), truncated
  toward zero as ``int()`` does in the reference code, then clipped to [0, M];
* ``Ã_ij = A_ij + Lap(1/ε2)`` for every pair i < j (upper triangle only: one undirected edge is
  one entry, ℓ1 sensitivity 1);
* the T pairs with the largest Ã_ij become the edges (mirrored); everything else is 0.

ε1 + ε2 = ε by sequential composition; top-T is post-processing: pure ε-edge-DP. The ``delta``
field is formal only (default 1e-5). Calibration from ε is direct.

Cost: one Laplace draw per pair and a top-T over the M = n(n−1)/2 entries, O(n²) time and memory
(csbm 600 nodes: 179,700 entries; Cora: 3.7 M; the reference code chunks the argpartition in 50
slices for larger graphs). The perturbed graph has ≈ |E| edges, so training cost is unchanged.

Views as in :mod:`targets.edgerand`; the ``mechanism`` view is the noisy count |E| + Lap(1/ε1)
(before truncation) and the noisy entries Ã, each with its exact Laplace log-density (top-T is
post-processing, computed only for the GCN). Bugs: ``no-noise`` (true adjacency
released, claim kept). :meth:`noiseless` is the upper-triangular adjacency.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch_geometric.data import Data

from targets.base import Lazy, Level, MechanismStep, TargetConfig
from targets.common.catalogue import Entry
from targets.edgerand import (PerturbedGCNConfig, PerturbedGraphGCN, Perturbation, laplace, upper_adjacency,
                              upper_index)


def _edge_gain(values: torch.Tensor) -> float:
    """Σ (|v − 1| − |v|) over the noisy entries at a graph's edges (float64)."""
    return float(((values - 1).abs() - values.abs()).sum())


@dataclass
class LapGraphConfig(PerturbedGCNConfig):
    """LapGraph hyperparameters.

    The GCN's hyperparameters (``hidden``, ``epochs``, ...) are documented on ``PerturbedGCNConfig``.

    Args:
        count_share (float): ε1/ε, the share of ε spent on the noisy edge count (the paper's 0.01).
    """

    count_share: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("count_share", 0 < self.count_share < 1, "in (0, 1)")


#: this target's entries in the bug catalogue (``python -m audit regress``)
CATALOGUE = (
    # LinkTeller's DP defences (pure ε-DP adjacency perturbation), audited with LinkTeller
    Entry("lapgraph", "VIOLATION", bug="no-noise", attack="linkteller", trials=100),
    Entry("lapgraph", "CONSISTENT", epsilon=4, attack="linkteller", trials=200, quick=False),
    Entry("lapgraph", "CONSISTENT", trials=1000, quick=False,
          why="exact Laplace likelihood ratio on the noisy entry and count (ε_lb 0.76 of 1 at 1,000 trials)"),
)


class LapGraph(PerturbedGraphGCN):
    """LapGraph + GCN; see the module docstring."""

    name: ClassVar[str] = "lapgraph"
    #: reference-machine seconds (benchmarks/calibrate_costs.py, default config on csbm)
    trial_costs = {Level.MECHANISM: 0.004, Level.API: 0.08, Level.WEIGHTS: 0.08}
    setup_seconds = 0.5
    Config: ClassVar[type[TargetConfig]] = LapGraphConfig
    catalogue: ClassVar[tuple[Entry, ...]] = CATALOGUE
    accountant: ClassVar[str] = "Laplace + noisy top-T, sequential composition (pure ε-DP; δ formal)"

    def split(self) -> tuple[float, float]:
        eps = float(self.config.epsilon)
        eps1 = self.config.count_share * eps
        return eps1, eps - eps1

    def mechanism_details(self, graph: Data) -> dict[str, Any]:
        eps1, eps2 = self.split()
        return {"eps_count": eps1, "eps_entries": eps2, "count_laplace_scale": 1.0 / eps1,
                "entry_laplace_scale": 1.0 / eps2}

    def perturb(self, graph: Data, rng: torch.Generator, noise: bool = True) -> Perturbation:
        eps1, eps2 = self.split()
        a = upper_adjacency(graph)
        m = a.numel()
        edges = int(a.sum())
        count_noise = float(laplace((), 1.0 / eps1, rng)) if noise else 0.0
        t = edges + int(count_noise)  # int() truncates toward zero, as the reference code
        t = min(max(t, 0), m)
        noisy = a.double() + laplace(m, 1.0 / eps2, rng) if noise else a.double()

        def top_t() -> torch.Tensor:  # post-processing of (T, Ã): computed only for the GCN
            kept = torch.zeros(m, dtype=torch.bool)
            if t > 0:
                kept[torch.topk(noisy, t, sorted=False).indices] = True
            return kept

        # exact log-densities (up to terms that do not depend on the graph): the count's
        # Lap(1/ε1) at |E|, and Σ_pairs −ε2·|Ã_ij − A_ij| = const − ε2·Σ_{edges e of A} (|Ã_e − 1| − |Ã_e|)
        count = MechanismStep(
            output=torch.tensor(edges + count_noise, dtype=torch.float64), name="noisy edge count",
            mean=lambda g: torch.tensor(float(upper_index(g).numel()), dtype=torch.float64),
            log_density=lambda g: -eps1 * abs(edges + count_noise - upper_index(g).numel()))
        entries = MechanismStep(
            output=noisy, name="noisy adjacency (upper triangle)", mean=lambda g: upper_adjacency(g).double(),
            log_density=lambda g: -eps2 * _edge_gain(noisy[upper_index(g)]))
        return Perturbation(Lazy(top_t).get, [count, entries], {"T": t, "count_noise": count_noise}, t)
