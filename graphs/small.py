"""Small graphs built from an edge list (the sensitivity probe's families and witnesses)."""
from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce


def make_graph(n: int, edges: list[tuple[int, int]], *, features: int = 4, classes: int = 2,
               seed: int = 0, name: str = "") -> Data:
    """A normalised graph (both directions, coalesced, no self-loops; seeded features, labels,
    every node a training node) from an undirected edge list."""
    rng = np.random.default_rng(seed)
    if edges:
        e = torch.tensor(edges, dtype=torch.long).t()
        ei = torch.cat([e, e.flip(0)], 1)
        ei = ei[:, ei[0] != ei[1]]
        ei = coalesce(ei, num_nodes=n)
    else:
        ei = torch.zeros(2, 0, dtype=torch.long)
    g = Data(x=torch.tensor(rng.standard_normal((n, features)), dtype=torch.float32), edge_index=ei,
             y=torch.arange(n) % classes)
    g.train_mask = torch.ones(n, dtype=torch.bool)
    g.val_mask = torch.zeros(n, dtype=torch.bool)
    g.test_mask = torch.zeros(n, dtype=torch.bool)
    g.num_nodes = n
    g.family = name
    return g


def opposed_rows(n_train: int = 180, features: int = 256, scale: float = 0.5) -> Data:
    """A public graph on which a two-class linear model's clipped per-example gradients are exactly
    ``±C·u``, one direction u fixed by the data whatever the parameters (Chua et al.'s shuffled-batch pair).

    Every training node has the same feature row ``a = scale·1`` (‖a‖ = scale·√features). Node 0 is
    labelled 1, the other ``n_train − 1`` training nodes 0. A two-class linear model's gradient at a
    row is (p − e_y) ⊗ [a; 1], and p − e_y = ±p_{1−y}·(1, −1), so label 0 gives −p_1·w and label 1
    gives +p_0·w with w = (1, −1) ⊗ [a; 1]: exactly opposite, clipped to C wherever p_{1−y}·‖w‖ ≥ C.
    At nn.Linear's initialisation the logit gap is a sum of `features` small uniforms (std ≈
    0.82·scale), so p stays far from 0 and 1. One test node (index ``n_train``, in no training mask)
    has an edge to node 0 only: the node-removal canaries (training nodes with an edge) take node 0.
    No other edges; a model that reads only a node's own row (``hops = 0``) never sees this one.
    """
    if n_train < 2 or features < 1 or scale <= 0:
        raise ValueError(f"opposed_rows needs n_train >= 2, features >= 1, scale > 0; "
                         f"got {n_train}, {features}, {scale}")
    n = n_train + 1
    y = torch.zeros(n, dtype=torch.long)
    y[0] = 1
    ei = torch.tensor([[0, n_train], [n_train, 0]], dtype=torch.long)
    g = Data(x=torch.full((n, features), float(scale)), edge_index=ei, y=y)
    g.train_mask = torch.arange(n) < n_train
    g.val_mask = torch.zeros(n, dtype=torch.bool)
    g.test_mask = ~g.train_mask
    g.num_nodes = n
    return g
