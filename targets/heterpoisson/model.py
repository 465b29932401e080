"""HeterPoisson's batch (central nodes and kept edges) and star-graph network."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


# ---------------------------------------------------------------------------------------------
# release objects
# ---------------------------------------------------------------------------------------------
@dataclass
class Batch:
    """A Heter-Poisson batch: central nodes and kept peripheral edges (src → dst central)."""

    central: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor


class StarNet(nn.Module):
    """One message-passing layer on a star + MLP head; input rows are [x_i, Σ_{j∈N_i} x_j, |N_i|]."""

    def __init__(self, features: int, hidden: int, classes: int, backbone: str) -> None:
        super().__init__()
        self.features, self.backbone = features, backbone
        self.lin1 = nn.Linear(features, hidden)
        self.lin2 = nn.Linear(hidden, classes)
        if backbone == "gin":
            self.gin_eps = nn.Parameter(torch.zeros(1))

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        f = self.features
        x, s, n = packed[:, :f], packed[:, f:2 * f], packed[:, 2 * f:2 * f + 1]
        if self.backbone == "gcn":  # undirected star with self-loops: d_i = n+1, d_j = 2
            a = x / (n + 1) + s / torch.sqrt(2 * (n + 1))
        elif self.backbone == "sage":
            a = (x + s) / (n + 1)
        else:
            a = s + (1 + self.gin_eps) * x
        return self.lin2(F.elu(self.lin1(a)))
