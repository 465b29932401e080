"""GAP's probe adapter: every PMA hop as a step map, and how a hop's witness is played."""
from __future__ import annotations

from typing import Any

import torch
from torch_geometric.data import Data

from targets.common.probe import StepMap, WitnessPlan

#: how a witness X reaches GAP's hops
HOW = ("the witness graph; every hop's input has unit rows and the hop's change under a directed edge "
       "or a node is the same for every unit-row input")


def step_maps(target: Any) -> list[StepMap]:
    cfg = target.config
    node = cfg.node_level

    def apply(graph: Data, x: torch.Tensor) -> torch.Tensor:
        edges = target._private_edges(graph, 0)
        return target._aggregator(graph, edges)(x.double().to(target.device)).cpu().double()

    def realised(graph: Data) -> torch.Tensor:  # hop 1's input: rownorm(encoder(x)) (edge level)
        target.prepare(graph)
        _, encoder = target._cached_encoder(graph)
        return target._embeddings(encoder, graph.x).double().cpu()

    def in_domain(g0: Data, g1: Data, kind: str, canary: Any) -> bool:
        if kind != "node":
            return True
        # node level: only the canary may exceed the degree bound, so the seeded out-degree
        # sampling is the identity for every other node in both worlds (no re-sampling artefacts)
        deg = torch.bincount(g1.edge_index[0], minlength=g1.num_nodes)
        deg[int(canary)] = 0
        return int(deg.max()) <= cfg.max_degree

    if node:
        kinds, extra = ("node",), ()
    elif cfg.edge_unit == "directed":
        kinds, extra = ("directed",), ("edge",)
    else:
        kinds, extra = ("edge",), ("directed",)
    return [StepMap(name=f"hops 1-{cfg.hops} (S_k = Aᵀ H_(k-1))", norm="l2", kinds=kinds, extra_kinds=extra,
                    apply=apply, claimed=lambda g0, g1: target.claim(g1).sensitivity, radius=1.0,
                    width=cfg.hidden_dim, realised=None if node else realised,
                    covers=[f"hop {k}" for k in range(1, cfg.hops + 1)],
                    degree_bound=cfg.max_degree if node else None, in_domain=in_domain,
                    note="H rows unit-norm (rownorm); every hop has the same map and domain; realised X = "
                         "hop 1's rownorm(encoder(x))")]


def witness_plan(doc: dict[str, Any], params: dict[str, str]) -> WitnessPlan:
    path = doc["path"]
    return WitnessPlan(doc["target"], f"witness:{path}", f"witness:{path}", params, HOW)
