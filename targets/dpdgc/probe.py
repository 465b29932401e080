"""DPDGC's probe adapter: the Z release (Z = A·W + b, W = DP-Emb's released weights) as a step map
(edge level). W is itself a noisy release, so a witness's X cannot be played: there is no plan."""
from __future__ import annotations

from typing import Any

import torch
from torch_geometric.data import Data

from targets.common.probe import StepMap


def step_maps(target: Any, graph: Data) -> list[StepMap]:
    cfg = target.config
    if cfg.level != "edge":
        return []
    target.fit(graph, torch.Generator().manual_seed(0))
    w = target._last[0].double().cpu()
    projected = w.clone()
    target._project(projected)  # the target's own projection: its image is the domain of W's rows
    radius = float(projected.norm(dim=1).max())

    def apply(g: Data, x: torch.Tensor) -> torch.Tensor:
        adj = target._adjacency(target._edges(g, 0), g.num_nodes, torch.float64)
        return torch.sparse.mm(adj, x.double().to(target.device)).cpu()

    kinds, extra = (("edge",), ("directed",)) if cfg.undirected_edge else (("directed",), ("edge",))
    return [StepMap(name="Z = A·W + b", norm="l2", kinds=kinds, extra_kinds=extra, apply=apply,
                    claimed=lambda g0, g1: target.claim(g1).sensitivity, radius=radius,
                    width=cfg.hidden, realised=lambda g: w if g.num_nodes == w.size(0) else None,
                    covers=["Z"],
                    note=f"W = DP-Emb's released weights (fit seed 0 on the given graph); domain: rows in "
                         f"the image of the target's own projection (max row norm {radius:.3g}, claim c = "
                         f"{cfg.norm_scale:g})")]
