"""GCON's propagation (Eqs. 4-11), one-hop inference (Eq. 16) and edge-free encoder."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

# ---------------------------------------------------------------------------------------------
# propagation (Eqs. 4-11) and one-hop inference (Eq. 16)
# ---------------------------------------------------------------------------------------------
def _rw_step(edge_index: torch.Tensor, n: int, deg1: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Ã h with Ã = D⁻¹(A + I)."""
    out = h.clone()
    out.index_add_(0, edge_index[0], h[edge_index[1]])
    return out / deg1.unsqueeze(1)


def propagate(edge_index: torch.Tensor, x: torch.Tensor, alpha: float, steps: tuple[float, ...],
              *, tol: float = 1e-12, max_iter: int = 100_000) -> torch.Tensor:
    """Z = (1/s)[R_{m_1}X | … | R_{m_s}X] (n × s·d1); R_∞ by fixed-point iteration to max-abs change < tol."""
    n = x.size(0)
    ei = edge_index.to(x.device)
    deg1 = torch.bincount(ei[0], minlength=n).to(x.dtype) + 1.0
    blocks = []
    for m in steps:
        z = x
        if math.isinf(m):
            for _ in range(max_iter):
                new = (1.0 - alpha) * _rw_step(ei, n, deg1, z) + alpha * x
                done = (new - z).abs().max().item() < tol if new.numel() else True
                z = new
                if done:
                    break
        else:
            for _ in range(int(m)):
                z = (1.0 - alpha) * _rw_step(ei, n, deg1, z) + alpha * x
        blocks.append(z)
    return torch.cat(blocks, 1) / len(steps)


def one_hop(edge_index: torch.Tensor, x: torch.Tensor, alpha_i: float, steps: tuple[float, ...]) -> torch.Tensor:
    """Algorithm 4's features [R̂_{m_1}X | … | R̂_{m_s}X]: R̂ = I (m = 0) or (1-α_I)Ã + α_I I; no 1/s."""
    n = x.size(0)
    ei = edge_index.to(x.device)
    deg1 = torch.bincount(ei[0], minlength=n).to(x.dtype) + 1.0
    hop = (1.0 - alpha_i) * _rw_step(ei, n, deg1, x) + alpha_i * x
    return torch.cat([x if m == 0 else hop for m in steps], 1)



# ---------------------------------------------------------------------------------------------
# encoder (Algorithm 3)
# ---------------------------------------------------------------------------------------------
class _Encoder(nn.Module):
    def __init__(self, d0: int, d1: int, c: int, dropout: float, activation: str = "relu") -> None:
        super().__init__()
        self.activation = activation
        self.block = nn.Linear(d0, d1)
        self.head = nn.Linear(d1, c)
        self.dropout = nn.Dropout(dropout)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        h = self.block(x)
        if self.activation == "relu":
            return torch.relu(h)
        return torch.tanh(h) if self.activation == "tanh" else h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.dropout(self.embed(x)))


@dataclass
class Encoded:
    """Output of the edge-free stage: encoder, unit-row X (float64), n1 row ids, label matrix."""

    encoder: _Encoder
    x: torch.Tensor
    rows: torch.Tensor
    labels: torch.Tensor  # n1 × c, 0/1 float64
    val_acc: float


def _unit_rows(x: torch.Tensor) -> torch.Tensor:
    norm = x.norm(dim=1, keepdim=True)
    return torch.where(norm > 0, x / norm.clamp_min(1e-300), x)

