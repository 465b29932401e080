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
