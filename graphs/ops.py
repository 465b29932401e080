"""Graph helpers every layer may import: degrees and statistics, edge edits, and one fingerprint.

These sit at the bottom of the package order (graphs → targets → canaries → attacks → audit).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce


# ---------------------------------------------------------------------------------------------
# statistics and edge helpers
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GraphStats:
    nodes: int
    undirected_edges: int
    min_degree: int
    max_degree: int
    classes: int
    features: int


def degrees(graph: Data) -> torch.Tensor:
    return torch.bincount(graph.edge_index[0], minlength=graph.num_nodes)


def graph_stats(graph: Data) -> GraphStats:
    deg = degrees(graph)
    return GraphStats(
        nodes=int(graph.num_nodes),
        undirected_edges=int(graph.edge_index.size(1) // 2),
        min_degree=int(deg.min()) if deg.numel() else 0,
        max_degree=int(deg.max()) if deg.numel() else 0,
        classes=int(graph.y.max()) + 1 if graph.y.numel() else 0,
        features=int(graph.x.size(1)),
    )


def drop_isolated(graph: Data) -> Data:
    """The subgraph without degree-0 nodes (re-indexed), as GAP/CARIBOU pre-process their datasets."""
    keep = degrees(graph) > 0
    if bool(keep.all()):
        return graph
    index = torch.full((graph.num_nodes,), -1, dtype=torch.long)
    index[keep] = torch.arange(int(keep.sum()))
    out = Data(x=graph.x[keep], y=graph.y[keep], edge_index=index[graph.edge_index])
    for m in ("train_mask", "val_mask", "test_mask"):
        setattr(out, m, getattr(graph, m)[keep])
    out.num_nodes = int(keep.sum())
    return out


def drop_isolated_with_notice(graph: Data, who: str) -> tuple[Data, str | None]:
    """`graph` without its isolated nodes (a target's ``preprocess``, as GAP's loader does) and a
    one-line notice naming `who`; the graph itself and None when there is none."""
    isolated = int((degrees(graph) == 0).sum())
    if isolated == 0:
        return graph, None
    out = drop_isolated(graph)
    return out, (f"{who}: dropped {isolated} isolated node(s) as the paper does (GAP's RemoveIsolatedNodes): "
                 f"{graph.num_nodes} -> {out.num_nodes} nodes")


class EdgeSet:
    """``(u, v) in EdgeSet(edge_index)``: membership of directed pairs through sorted int64 keys
    (16 bytes an edge; a Python set of the pairs costs ~100: gigabytes at 10⁷ edges)."""

    def __init__(self, edge_index: torch.Tensor) -> None:
        ei = edge_index.cpu().numpy().astype(np.int64)
        self._width = int(ei.max()) + 1 if ei.size else 1
        keys = ei[0] * self._width + ei[1]
        self._keys = keys if bool(np.all(keys[1:] > keys[:-1])) else np.unique(keys)  # coalesced: sorted

    def __contains__(self, pair: tuple[int, int]) -> bool:
        u, v = int(pair[0]), int(pair[1])
        if not (0 <= u < self._width and 0 <= v < self._width):
            return False
        key = u * self._width + v
        i = int(np.searchsorted(self._keys, key))
        return i < self._keys.size and int(self._keys[i]) == key

    def __len__(self) -> int:
        return int(self._keys.size)


def undirected_pairs(graph: Data) -> np.ndarray:
    """The undirected edges as sorted (min, max) rows (k × 2 int64), each once."""
    ei = graph.edge_index.cpu().numpy().astype(np.int64)
    lo, hi = np.minimum(ei[0], ei[1]), np.maximum(ei[0], ei[1])
    keep = lo != hi
    n = int(hi.max()) + 1 if hi.size else 1
    keys = np.unique(lo[keep] * n + hi[keep])
    return np.stack([keys // n, keys % n], 1)


def has_edge(graph: Data, u: int, v: int) -> bool:
    ei = graph.edge_index
    return bool(((ei[0] == u) & (ei[1] == v)).any())


def add_edge(graph: Data, u: int, v: int) -> Data:
    """A shallow copy of `graph` with the undirected edge {u, v} added (the input is untouched)."""
    if u == v:
        raise ValueError("a canary edge cannot be a self-loop")
    new = graph.clone()
    extra = torch.tensor([[u, v], [v, u]], dtype=graph.edge_index.dtype)
    new.edge_index = coalesce(torch.cat([graph.edge_index, extra], 1), num_nodes=graph.num_nodes)
    return new


def add_directed_edge(graph: Data, u: int, v: int) -> Data:
    """A shallow copy of `graph` with the one directed entry u → v added (for targets whose
    privacy unit is a directed edge; most targets expect both directions)."""
    if u == v:
        raise ValueError("a canary edge cannot be a self-loop")
    new = graph.clone()
    extra = torch.tensor([[u], [v]], dtype=graph.edge_index.dtype)
    new.edge_index = coalesce(torch.cat([graph.edge_index, extra], 1), num_nodes=graph.num_nodes)
    return new


def remove_edge(graph: Data, u: int, v: int) -> Data:
    """A copy of `graph` without the undirected edge {u, v}."""
    new = graph.clone()
    ei = graph.edge_index
    keep = ~(((ei[0] == u) & (ei[1] == v)) | ((ei[0] == v) & (ei[1] == u)))
    new.edge_index = ei[:, keep]
    return new


# ---------------------------------------------------------------------------------------------
# content fingerprints (cache keys)
# ---------------------------------------------------------------------------------------------
GRAPH_KEYS = ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask")


def fingerprint(*items: Any, keys: tuple[str, ...] = GRAPH_KEYS, extra: Any = ()) -> str:
    """A content hash (sha256 hex) of graphs and tensors, and of ``extra``'s repr.

    A graph contributes its node count and the tensors named in ``keys`` that it has (so a cache
    keyed on what an encoder reads passes ``keys=("x", "y", "train_mask")``); a tensor contributes
    its shape, dtype and bytes. Graphs are values: nothing here is keyed on object identity.
    """
    h = hashlib.sha256()
    for item in items:
        if isinstance(item, torch.Tensor):
            _update(h, item)
            continue
        h.update(str(int(item.num_nodes)).encode())
        for key in keys:
            t = getattr(item, key, None)
            if t is not None:
                h.update(key.encode())
                _update(h, t)
    h.update(repr(extra).encode())
    return h.hexdigest()


def _update(h: Any, t: torch.Tensor) -> None:
    h.update(f"{tuple(t.shape)}{t.dtype}".encode())
    h.update(t.detach().cpu().contiguous().numpy().tobytes())
