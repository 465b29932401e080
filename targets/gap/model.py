"""GAP's graph helpers (sum aggregation, out-degree bound, sparse Aᵀ) and modules (encoder,
classifier)."""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from targets.gap.config import _ACTIVATIONS, GAPConfig

# ---------------------------------------------------------------------------------------------
# graph helpers
# ---------------------------------------------------------------------------------------------
def rownorm(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x, p=2, dim=-1)


def unit_rows(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`rownorm` (F.normalize's own formula, so the same floats) without its Python layers,
    for tensors outside autograd; into `out` where given (a division rounds the same wherever it
    is written)."""
    return torch.div(x, torch.linalg.vector_norm(x, 2, -1, True).clamp_min_(1e-12), out=out)


def sum_aggregate(h: torch.Tensor, edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Aᵀ h: row v = Σ over edges u→v of h[u]."""
    src, dst = edge_index[0], edge_index[1]
    out = torch.zeros(num_nodes, h.size(1), dtype=h.dtype, device=h.device)
    return out.index_add_(0, dst, h[src])


def aggregate_together(aggregate: Callable[..., torch.Tensor], hs: list[torch.Tensor],
                        group: int | None = None, out: torch.Tensor | None = None) -> list[torch.Tensor]:
    """[aggregate(h) for h in hs], up to `group` trials per product (all by default): a CSR
    product adds each output entry's terms in its row's entry order whatever the other columns,
    so each trial's columns are the floats of its own product. `hs` that are column blocks of one
    buffer (as the hops' loop writes them) are read in place. `out`: a buffer N × (len(hs)·h)
    the products write their columns into (``aggregate(x, out=...)``), instead of fresh tensors.

    Wider products are cheaper per trial: each edge then reads one contiguous row of all the
    trials' H (at 10⁶ nodes and 8·10⁶ edges, 0.101 CPU s a trial with 16 side by side, 0.134
    with 8, 0.161 alone)."""
    out_list: list[torch.Tensor] = []
    group = group or len(hs)
    for lo in range(0, len(hs), group):
        part = hs[lo:lo + group]
        width = part[0].size(1)
        dest = out[:, lo * width:(lo + len(part)) * width] if out is not None else None
        if len(part) == 1:
            out_list.append(aggregate(part[0]) if dest is None else aggregate(part[0], out=dest))
            continue
        base = part[0]
        adjacent = all(h.storage_offset() == base.storage_offset() + i * width and h.stride() == base.stride()
                       and h.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
                       for i, h in enumerate(part))
        x = base.as_strided((base.size(0), width * len(part)), base.stride()) if adjacent else torch.cat(part, 1)
        wide = aggregate(x) if dest is None else aggregate(x, out=dest)
        out_list += [wide[:, i * width:(i + 1) * width] for i in range(len(part))]
    return out_list


def bound_out_degree(edge_index: torch.Tensor, num_nodes: int, max_degree: int, seed: int) -> torch.Tensor:
    """Keep at most `max_degree` out-edges u→· per node u, sampled without replacement (seeded)."""
    if edge_index.size(1) == 0:
        return edge_index
    g = torch.Generator().manual_seed(seed)
    src = edge_index[0].cpu()
    key = torch.rand(src.numel(), generator=g, dtype=torch.float64)
    order = torch.argsort(src.double() * 2.0 + key)  # group by source, random order within
    sorted_src = src[order]
    counts = torch.bincount(sorted_src, minlength=num_nodes)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(src.numel()) - starts[sorted_src]
    keep = order[rank < max_degree]
    keep, _ = torch.sort(keep)
    return edge_index[:, keep.to(edge_index.device)]


def transposed_adjacency(edge_index: torch.Tensor, num_nodes: int, dtype: torch.dtype = torch.float32
                         ) -> torch.Tensor:
    """Aᵀ as a sparse CSR matrix (row v: the sources u of the edges u→v, in increasing u).

    ``transposed_adjacency(ei, n) @ h`` equals :func:`sum_aggregate` ``(h, ei, n)`` and, for a
    coalesced ``edge_index``, adds each row's terms in the same order; it is ~10× faster.
    """
    src, dst = edge_index[0], edge_index[1]
    order = torch.argsort(dst * max(num_nodes, 1) + src, stable=True)
    crow = torch.zeros(num_nodes + 1, dtype=torch.long, device=edge_index.device)
    crow[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
    values = torch.ones(src.numel(), dtype=dtype, device=edge_index.device)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(crow, src[order], values, (num_nodes, num_nodes), check_invariants=False)


def csr_rows(matrix: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The given rows of a sparse CSR matrix, as a CSR matrix (each row's entries in their order,
    so ``csr_rows(m, rows) @ h`` equals ``(m @ h)[rows]`` row by row)."""
    crow, col, val = matrix.crow_indices(), matrix.col_indices(), matrix.values()
    rows = rows.to(crow.device)
    starts, counts = crow[rows], crow[rows + 1] - crow[rows]
    new_crow = torch.zeros(rows.numel() + 1, dtype=crow.dtype, device=crow.device)
    new_crow[1:] = torch.cumsum(counts, 0)
    # entry positions: each row's start, then consecutive
    offsets = torch.arange(int(new_crow[-1]), device=crow.device) - torch.repeat_interleave(new_crow[:-1], counts)
    take = torch.repeat_interleave(starts, counts) + offsets
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(new_crow, col[take], val[take], (rows.numel(), matrix.size(1)),
                                       check_invariants=False)


def narrow_columns(matrix: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(m', cols): a sparse CSR matrix without its empty columns, and the columns it keeps, so
    ``m' @ h[cols]`` adds the same terms in the same order as ``m @ h``."""
    cols, col = torch.unique(matrix.col_indices(), return_inverse=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        narrow = torch.sparse_csr_tensor(matrix.crow_indices(), col, matrix.values(), (matrix.size(0), cols.numel()),
                                         check_invariants=False)
    return narrow, cols


def differing_rows(edges0: torch.Tensor, edges1: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """The destinations v whose multiset of in-edges u→v differs between two edge sets: outside
    them, Aᵀh is the same for both (sorted indices)."""
    keys = torch.cat([edges0[1] * num_nodes + edges0[0], edges1[1] * num_nodes + edges1[0]])
    sign = torch.cat([torch.ones(edges0.size(1), dtype=torch.long, device=keys.device),
                      -torch.ones(edges1.size(1), dtype=torch.long, device=keys.device)])
    unique, inverse = torch.unique(keys, return_inverse=True)
    count = torch.zeros(unique.numel(), dtype=torch.long, device=keys.device).index_add_(0, inverse, sign)
    return torch.unique(unique[count != 0] // num_nodes)


class _ByIdentity:
    """A small cache of values computed from tensors, hit only by the very same (unmodified) objects.

    Keeps a reference to each key tensor, so an id is never reused while its entry lives.
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._items: list[tuple[tuple[torch.Tensor, ...], tuple[int, ...], Any]] = []

    def get(self, key: tuple[torch.Tensor, ...], compute: Callable[[], Any]) -> Any:
        for tensors, versions, value in self._items:
            if len(tensors) == len(key) and all(a is b and a._version == v
                                                for a, b, v in zip(key, tensors, versions)):
                return value
        value = compute()
        self._items.append((key, tuple(k._version for k in key), value))
        if len(self._items) > self.size:
            self._items.pop(0)
        return value



# ---------------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------------
class _MLP(nn.Module):
    """Linear layers with (BatchNorm →) dropout → activation between them; the last is plain."""

    def __init__(self, d_in: int, hidden: int, d_out: int, layers: int, act, dropout: float, bn: bool):
        super().__init__()
        dims = [d_in] + [hidden] * (layers - 1) + [d_out]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.bns = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(layers - 1)) if bn else None
        self.act, self.dropout = act, nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self.bns[i](x) if self.bns is not None else x
                x = self.act(self.dropout(x))
        return x


class _Encoder(nn.Module):
    """EM: encoder MLP → rownorm → (BN) → dropout → act → head (training only)."""

    def __init__(self, d_in: int, cfg: GAPConfig, classes: int):
        super().__init__()
        act, bn, h = _ACTIVATIONS[cfg.activation], cfg.use_batch_norm, cfg.hidden_dim
        self.encoder_mlp = _MLP(d_in, h, h, cfg.encoder_layers, act, cfg.dropout, bn)
        self.bn = nn.BatchNorm1d(h) if bn else None
        self.head = _MLP(h, h, classes, cfg.head_layers, act, cfg.dropout, bn)
        self.act, self.dropout = act, nn.Dropout(cfg.dropout)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return rownorm(self.encoder_mlp(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.encode(x)
        z = self.bn(z) if self.bn is not None else z
        return self.head(self.act(self.dropout(z)))


class _Classifier(nn.Module):
    """CM: one base MLP per hop channel → combine → rownorm → (BN) → dropout → act → head."""

    def __init__(self, d_in: int, cfg: GAPConfig, classes: int):
        super().__init__()
        act, bn, h, k = _ACTIVATIONS[cfg.activation], cfg.use_batch_norm, cfg.hidden_dim, cfg.hops + 1
        self.base = nn.ModuleList(_MLP(d_in, h, h, cfg.base_layers, act, cfg.dropout, bn) for _ in range(k))
        width = h * k if cfg.combine == "cat" else h
        self.bn = nn.BatchNorm1d(width) if bn else None
        self.head = _MLP(width, h, classes, cfg.head_layers, act, cfg.dropout, bn)
        self.combine, self.act, self.dropout = cfg.combine, act, nn.Dropout(cfg.dropout)

    def forward(self, stack: torch.Tensor) -> torch.Tensor:  # stack: n × h × (K+1)
        hs = [mlp(stack[..., i]) for i, mlp in enumerate(self.base)]
        if self.combine == "cat":
            z = torch.cat(hs, dim=-1)
        else:
            z = torch.stack(hs, 0)
            if self.combine == "sum":
                z = z.sum(0)
            elif self.combine == "mean":
                z = z.mean(0)
            else:
                z = z.max(0).values
        z = rownorm(z)
        z = self.bn(z) if self.bn is not None else z
        return self.head(self.act(self.dropout(z)))


def _per_example_flat_grads(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """B × P per-example gradients of the cross-entropy (vmap; dropout draws differ per example)."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def one(p, b, xi, yi):
        out = functional_call(model, (p, b), (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    grads = vmap(grad(one), in_dims=(None, None, 0, 0), randomness="different")(params, buffers, x, y)
    return torch.cat([grads[k].reshape(x.size(0), -1) for k, _ in model.named_parameters()], dim=1)


def _flat_params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()


@torch.no_grad()
def _accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    if y.numel() == 0:
        return float("nan")
    model.eval()
    return float((model(x).argmax(-1) == y).float().mean())
