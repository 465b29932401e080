"""Playing a sensitivity witness through the target's own pipeline.

A witness (:mod:`canaries.witness`) fixes a graph, a canary and the step's held-fixed input X. The
game can play it only where the target's released step really reads that X. Per target:

* ``gaussian``: not played: X̂ has unit rows and every edge of any graph moves A·X̂ by exactly √2,
  so the given graph is already a worst case.
* ``gap``: every hop's input has unit rows (rownorm), and a directed edge or a node moves a hop
  by the same amount for every unit-row input: the witness graph alone realises the witness Δ.
* ``caribou`` (edge level): X⁽⁰⁾ is the edge-free encoder's row-normalised embedding of the
  features. The claim (Theorem 6/8, specs/caribou.md §2.3) is conditional on X⁽⁰⁾ — the encoder
  never sees an edge, its output is identical in both worlds and Eq. 6 bounds the hop over every
  unit-row X — so the game plays PCMP given the witness's X⁽⁰⁾: :class:`CaribouGivenInput`
  replaces only the embedding, every hop is the target's own code.
* ``gcon``: the tight canary realises its X through raw features (``witness-gcon-tight.json``).
* ``dpdgc`` (X = DP-Emb's released W, itself noisy) and ``heterpoisson`` (sampled batches): not
  playable on an adversarial X; their witnesses come from the given graph.

:func:`plan` says, for a witness, which target, dataset and canary the game plays it with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch_geometric.data import Data

from canaries import witness as W
from targets.caribou import Caribou, CaribouConfig


@dataclass
class CaribouGivenInputConfig(CaribouConfig):
    """CARIBOU's config plus ``x0``: the witness file whose input X is X⁽⁰⁾."""

    x0: str = ""


class CaribouGivenInput(Caribou):
    """CARIBOU (edge level) with X⁽⁰⁾ taken from a sensitivity witness instead of the encoder.

    Rows the witness leaves at zero (the canary's change reads none of them) are set to the unit
    vector e₁, so that X⁽⁰⁾ has unit rows as the encoder's does; the witness's Δ is unchanged.
    """

    Config: ClassVar[type] = CaribouGivenInputConfig

    def __init__(self, config: Any = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        if self.config.unit != "edge":
            raise ValueError("CaribouGivenInput plays edge-level PCMP (X⁽⁰⁾ is an edge-free input only there)")
        self._given: torch.Tensor | None = None

    def given_x0(self) -> torch.Tensor:
        if self._given is None:
            if not self.config.x0:
                raise ValueError("CaribouGivenInput needs --set x0=WITNESS_FILE")
            x = W.load(self.config.x0)["x"]
            if x is None:
                raise ValueError(f"witness {self.config.x0!r} stores no input X")
            x = unit_rows(x.double())
            if x.size(1) != self.config.hidden:
                raise ValueError(f"the witness's X has {x.size(1)} columns, the target's hidden width is "
                                 f"{self.config.hidden}")
            self._given = x.float().to(self.device)
        return self._given

    def embed(self, encoder: Any, graph: Data) -> torch.Tensor:
        x = self.given_x0()
        if x.size(0) != graph.num_nodes:
            raise ValueError(f"the witness's X⁽⁰⁾ has {x.size(0)} rows, the graph {graph.num_nodes} nodes")
        return x

    def _encoder_key(self, graph: Data) -> str:
        return super()._encoder_key(graph) + f":x0={self.config.x0}"


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    """Zero rows set to e₁; a row of norm above 1 (beyond rounding) is an error."""
    norms = x.norm(dim=1)
    if bool((norms > 1 + 1e-9).any()):
        raise ValueError(f"the witness's X has rows of norm up to {float(norms.max()):.6g} > 1")
    out = x.clone()
    zero = norms == 0
    out[zero] = 0.0
    out[zero, 0] = 1.0
    return out


@dataclass
class Plan:
    """How the game plays a witness: ``run --target T --dataset D --canary C --set PARAMS``."""

    target: str
    dataset: str
    canary: str
    params: dict[str, str]
    how: str

    def argv(self) -> list[str]:
        sets = [f"{k}={v}" for k, v in self.params.items()]
        return ["--target", self.target, "--dataset", self.dataset, "--canary", self.canary,
                *(["--set", " ".join(sets)] if sets else [])]


#: the X a target's step reads, and how a witness X reaches it (None: not playable)
HOW = {
    "gap": "the witness graph; every hop's input has unit rows and the hop's change under a directed edge "
           "or a node is the same for every unit-row input",
    "caribou": "PCMP given the witness's X⁽⁰⁾ (canaries.playable:CaribouGivenInput): the edge-level claim is "
               "conditional on the edge-free encoder's output, Eq. 6 bounds every unit-row X⁽⁰⁾",
    "gcon": "the tight canary's raw features ±scale·a, mapped by GCON's own encoder",
}


#: targets whose mechanism-level witnesses :func:`plan` can play (``--canary auto`` probes only these)
PLAYABLE = tuple(HOW)


def plan(path: str, params: dict[str, str] | None = None) -> Plan | None:
    """The game's inputs for witness `path` (None where the target cannot take the witness's X).

    `params`: the run's own ``--set`` parameters, kept (the witness's config fixes the rest).
    """
    doc = W.load(path)
    name = doc["target"]
    keep = dict(params or {})
    if name == "caribou" and doc["config"].get("unit", "edge") == "edge" and doc["x"] is not None:
        return Plan("canaries.playable:CaribouGivenInput", f"witness:{path}", f"witness:{path}",
                    {**keep, "x0": str(path)}, HOW[name])
    if name == "gap" or (name == "gcon" and "gcon" in doc):
        return Plan(name, f"witness:{path}", f"witness:{path}", keep, HOW[name])
    return None
