"""DPDGC's classifier and graph helpers (the degree bound)."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# ---------------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------------
class _LinkX(nn.Module):
    """LINKX-style classifier over [X | Z] (spec §2.3): MLP_X (2 layers), residual over X and Z."""

    def __init__(self, features: int, hidden: int, classes: int, dropout: float, batch_norm: bool):
        super().__init__()
        self.features = features
        norm = (lambda d: nn.BatchNorm1d(d)) if batch_norm else (lambda d: nn.Identity())
        self.mlp_x = nn.Sequential(nn.Linear(features, hidden), norm(hidden), nn.Dropout(dropout),
                                   nn.SELU(), nn.Linear(hidden, hidden))
        self.bn1 = norm(2 * hidden)
        self.mlp_w = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.Dropout(dropout), nn.SELU(),
                                   nn.Linear(hidden, hidden))
        self.bn2 = norm(hidden)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, classes)

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        hx = self.mlp_x(inp[:, :self.features])
        ha = inp[:, self.features:]
        u = F.selu(self.drop(self.bn1(torch.cat([hx, ha], dim=1))))
        u = self.mlp_w(u) + hx + ha
        u = F.selu(self.drop(self.bn2(u)))
        return self.head(u)


def _ce(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.unsqueeze(0), y.unsqueeze(0))


def _splitmix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (a fixed hash of uint64 keys)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def bound_column_degree(edge_index: torch.Tensor, n: int, max_degree: int, seed: int) -> torch.Tensor:
    """Keep at most `max_degree` entries per column of A (A[i, j] = 1 for edge (i, j)).

    Each column keeps its entries of smallest hash(seed, i, j): a uniformly random subset, and the
    same edge gets the same priority in both worlds (spec §9.8; no off-by-one).
    """
    if edge_index.numel() == 0:
        return edge_index
    src, dst = edge_index[0].cpu().numpy().astype(np.uint64), edge_index[1].cpu().numpy().astype(np.uint64)
    key = _splitmix(_splitmix(np.uint64(seed) ^ (src * np.uint64(n) + dst)))
    order = np.lexsort((key, dst.astype(np.int64)))  # by column, then priority
    cols = dst[order].astype(np.int64)
    start = np.searchsorted(cols, cols, side="left")
    rank = np.arange(len(cols)) - start
    keep = np.sort(order[rank < max_degree])
    return edge_index[:, torch.as_tensor(keep, dtype=torch.long)]

