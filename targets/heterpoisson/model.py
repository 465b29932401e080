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


def aggregate(x: torch.Tensor, s: torch.Tensor, n: torch.Tensor, backbone: str,
              gin_eps: torch.Tensor | None = None) -> torch.Tensor:
    """The backbone's one message-passing layer on stars: x the central rows, s the sum of the
    kept peripheral rows, n their count."""
    if backbone == "gcn":  # undirected star with self-loops: d_i = n+1, d_j = 2
        return x / (n + 1) + s / torch.sqrt(2 * (n + 1))
    if backbone == "sage":
        return (x + s) / (n + 1)
    return s + (1 + gin_eps) * x


def star_forward(weights: dict[str, torch.Tensor], packed: torch.Tensor, features: int, backbone: str) -> torch.Tensor:
    """StarNet's logits with the given parameters (names as ``StarNet.named_parameters()``)."""
    f = features
    a = aggregate(packed[:, :f], packed[:, f:2 * f], packed[:, 2 * f:2 * f + 1], backbone, weights.get("gin_eps"))
    h = F.linear(a, weights["lin1.weight"], weights["lin1.bias"])
    return F.linear(F.elu(h), weights["lin2.weight"], weights["lin2.bias"])


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
        a = aggregate(x, s, n, self.backbone, getattr(self, "gin_eps", None))
        return self.lin2(F.elu(self.lin1(a)))
