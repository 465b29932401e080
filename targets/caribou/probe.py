"""CARIBOU's probe adapter: the PCMP hops as a step map (edge level), and how a witness is played:
one PCMP hop given the witness's X⁽⁰⁾ (:class:`targets.caribou.given_input.CaribouGivenInput`)."""
from __future__ import annotations

from typing import Any

import torch
from torch_geometric.data import Data

from targets.caribou.model import cgl
from targets.common.probe import StepMap, WitnessPlan

#: how a witness X reaches CARIBOU's hop
HOW = ("one PCMP hop given the witness's X⁽⁰⁾ (targets.caribou.given_input:CaribouGivenInput): the edge-level "
       "claim is conditional on the edge-free encoder's output, Eq. 6 bounds every unit-row X⁽⁰⁾")
GIVEN_INPUT = "targets.caribou.given_input:CaribouGivenInput"


def step_maps(target: Any) -> list[StepMap]:
    cfg = target.config
    if cfg.unit != "edge":
        return []

    def apply(graph: Data, x: torch.Tensor) -> torch.Tensor:
        x = x.double()
        return cgl(graph, x, torch.zeros_like(x), cfg.contraction, cfg.alpha1, cfg.beta)

    def claimed(g0: Data, g1: Data) -> float | None:
        try:  # both worlds must be in the domain (D_min ≥ 1); the claim of the sparser world
            return max(target.sensitivity(g0), target.sensitivity(g1))
        except ValueError:
            return None

    def realised(graph: Data) -> torch.Tensor:
        target.prepare(graph)
        _, _, x0 = target._edge_encoder(graph)
        return x0.double().cpu()

    return [StepMap(name=f"hops 1-{cfg.hops} (CGL: C_L·α1·ÂX + ...)", norm="l2", kinds=("edge",),
                    extra_kinds=(), apply=apply, claimed=claimed, radius=1.0, width=cfg.hidden,
                    realised=realised, covers=[f"hop {k}" for k in range(1, cfg.hops + 1)],
                    note="X = the previous hop, projected to the unit ball (X⁽⁰⁾ unit rows); Eq. 6 with "
                         "D_min of the sparser world; realised X = X⁽⁰⁾")]


def takes_witness(config: Any) -> bool:
    """Only edge-level PCMP with one hop: hop k > 1 reads the previous noisy hop, not the witness's X."""
    return config.unit == "edge" and config.hops == 1


def witness_plan(doc: dict[str, Any], params: dict[str, str]) -> WitnessPlan | None:
    config = doc["config"]
    if config.get("unit", "edge") != "edge" or config.get("hops") != 1 or doc["x"] is None:
        return None
    path = doc["path"]
    return WitnessPlan(GIVEN_INPUT, f"witness:{path}", f"witness:{path}", {**params, "x0": str(path)}, HOW)
