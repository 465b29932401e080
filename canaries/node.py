"""Node canaries: two worlds that differ by one training node (node-level DP, add/remove).

Node indexing is the same in both worlds (an attack can query node z in either): the node that is
"absent" stays in the graph as an isolated node that is in no split mask, so a node-level DP
trainer never reads it (no edges: it is nobody's neighbour; no mask: it is no example). Its
feature row and label stay (unread). ``b = 1`` means "z is in".

Both worlds also carry ``public_outdeg``: the out-degrees of the *whole* graph (the world with z).
Node-level DP with degree-dependent sampling (HeterPoisson's scenario S2) takes degrees from the
fixed public graph, so z's presence must not move them; targets that do not read the attribute
ignore it.

* :class:`RemoveNode` — g1 = the graph, g0 = the graph with one existing training node z's edges
  removed and z taken out of every mask. z is drawn uniformly among the training nodes with at
  least one edge (canary rng).
* :class:`InsertNode` — a crafted node appended as index n in both worlds: out-of-distribution
  features (the base graph's lowest-variance principal direction, scaled to 3× the largest row
  norm, ClipBKD-style), the rarest training label, and edges to ``degree`` training nodes drawn
  uniformly (canary rng). g1: z has its edges and is a training node; g0: z isolated, in no mask.
* :class:`IsolatingNode` — :class:`RemoveNode` for the training node whose removal leaves the most
  neighbours with no edge (the node-level half of the relation that isolates a node; a
  calibration that reads D_min or the node count sees both move).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce

from canaries.base import Canary, CanaryPair
from targets.base import Unit

_MASKS = ("train_mask", "val_mask", "test_mask")


def _outdeg(graph: Data) -> torch.Tensor:
    return torch.bincount(graph.edge_index[0].cpu(), minlength=graph.num_nodes)


def isolate(graph: Data, node: int) -> Data:
    """A copy of `graph` where `node` has no edges and is in no split mask (indexing unchanged)."""
    out = graph.clone()
    ei = graph.edge_index
    keep = (ei[0] != node) & (ei[1] != node)
    out.edge_index = ei[:, keep]
    for m in _MASKS:
        if getattr(graph, m, None) is not None:
            mask = getattr(graph, m).clone()
            mask[node] = False
            setattr(out, m, mask)
    return out


def removal_worlds(graph: Data, z: int, name: str, how: str, **extra: Any) -> CanaryPair:
    """(z isolated and in no mask, the graph), both with the whole graph's out-degrees public."""
    deg = _outdeg(graph)
    g1 = graph.clone()
    g1.public_outdeg = deg.clone()
    g0 = isolate(graph, z)
    g0.public_outdeg = deg.clone()
    info = {"canary": name, "node": z, "degree": int(deg[z]), "label": int(graph.y[z]), "relation": "remove",
            "chosen_by": how, **extra,
            "g0": "node z isolated (edges removed) and in no mask; features/label kept, unread",
            "public_outdeg": "whole-graph out-degrees on both worlds"}
    return CanaryPair(g0, g1, info)


class NodeRemoval(Canary):
    """A canary whose world 0 isolates a training node of the given graph (:func:`removal_worlds`)."""

    unit = Unit.NODE
    relation = "remove"

    @staticmethod
    def training_nodes(graph: Data) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(out-degrees, the training nodes, those of them with at least one edge)."""
        deg = _outdeg(graph)
        train = graph.train_mask.cpu().nonzero().view(-1)
        return deg, train, train[deg[train] > 0]


class RemoveNode(NodeRemoval):
    name = "remove-node"

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        _, train, pool = self.training_nodes(graph)
        how = "uniform among training nodes with at least one edge"
        if pool.numel() == 0:
            pool, how = train, "uniform among training nodes (none has an edge)"
        if pool.numel() == 0:
            raise ValueError("the graph has no training node to remove")
        z = int(pool[int(rng.integers(pool.numel()))])
        return removal_worlds(graph, z, self.name, how + " (canary rng)")


class IsolatingNode(NodeRemoval):
    name = "isolating-node"

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        deg, _, train = self.training_nodes(graph)
        if train.numel() == 0:
            raise ValueError("the graph has no training node with an edge to remove")
        src, dst = graph.edge_index.cpu()
        leaves = torch.bincount(src[deg[dst] == 1], minlength=graph.num_nodes)  # degree-1 neighbours
        tie = torch.as_tensor(rng.permutation(train.numel()))
        order = np.lexsort((tie.numpy(), -deg[train].numpy(), -leaves[train].numpy()))
        z = int(train[int(order[0])])
        return removal_worlds(graph, z, self.name, "the training node with the most degree-1 neighbours "
                              "(then the largest degree; ties by canary rng)",
                              isolates=[int(w) for w in dst[(src == z) & (deg[dst] == 1)]])


class InsertNode(Canary):
    name = "insert-node"
    unit = Unit.NODE

    def __init__(self, degree: int = 3, scale: float = 3.0) -> None:
        self.degree = degree
        self.scale = scale

    def crafted_features(self, graph: Data) -> torch.Tensor:
        x = graph.x.float().cpu()
        centred = x - x.mean(0, keepdim=True)
        _, _, vh = torch.linalg.svd(centred, full_matrices=False)
        direction = vh[-1]
        return x.mean(0) + self.scale * float(x.norm(dim=1).max()) * direction

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        n = graph.num_nodes
        train = graph.train_mask.cpu().nonzero().view(-1)
        if train.numel() == 0:
            raise ValueError("the graph has no training node to attach the canary to")
        classes = int(graph.y.max()) + 1
        counts = torch.bincount(graph.y.cpu()[train], minlength=classes)
        label = int(torch.argmin(counts))
        k = min(self.degree, train.numel())
        nbrs = sorted(int(train[i]) for i in rng.choice(train.numel(), size=k, replace=False))
        feat = self.crafted_features(graph)

        base = graph.clone()
        base.num_nodes = n + 1  # (a pre-processed graph, e.g. isolated nodes dropped, states its count)
        base.x = torch.cat([graph.x, feat.to(graph.x.dtype).unsqueeze(0)], 0)
        base.y = torch.cat([graph.y, torch.tensor([label], dtype=graph.y.dtype)])
        for m in _MASKS:
            if getattr(graph, m, None) is not None:
                setattr(base, m, torch.cat([getattr(graph, m), torch.zeros(1, dtype=torch.bool)]))
        g1 = base.clone()
        nb = torch.tensor(nbrs, dtype=graph.edge_index.dtype)
        zz = torch.full_like(nb, n)
        extra = torch.stack([torch.cat([zz, nb]), torch.cat([nb, zz])])
        g1.edge_index = coalesce(torch.cat([graph.edge_index, extra], 1), num_nodes=n + 1)
        g1.train_mask[n] = True
        public = _outdeg(g1)
        g1.public_outdeg = public
        g0 = base
        g0.public_outdeg = public.clone()
        info = {"canary": self.name, "node": n, "neighbours": nbrs, "label": label,
                "chosen_by": (f"appended node {n}: features = mean + {self.scale} x max row norm along the "
                              f"lowest-variance principal direction; label = rarest training class; "
                              f"{k} neighbours uniform among training nodes (canary rng)"),
                "g0": "node present but isolated and in no mask (unread by a node-level DP trainer)",
                "public_outdeg": "out-degrees of the world with the node, on both worlds"}
        return CanaryPair(g0, g1, info)


class InsertHubNode(InsertNode):
    """:class:`InsertNode` with up to 256 neighbours (every training node on small graphs): a node
    whose degree exceeds a degree bound D.

    A node-level mechanism that bounds degrees to D charges sensitivity for D edges; a hub with
    more shows whether the bound is enforced (e.g. GAP's aggregation charges √D).
    """

    name = "insert-hub-node"

    @classmethod
    def pointed_by(cls, target: Any, graph: Any) -> str | None:
        bound = target.claim(graph).notes.get("max_degree")
        if isinstance(bound, (int, float)) and bound < graph.num_nodes - 1:
            return f"the claim charges a degree bound D = {bound:g}: a hub's degree exceeds it"
        return None

    def __init__(self, degree: int = 256, scale: float = 3.0) -> None:
        super().__init__(degree=degree, scale=scale)
