"""CARIBOU (edge level) playing a sensitivity witness: X⁽⁰⁾ taken from the witness's input.

X⁽⁰⁾ is the edge-free encoder's row-normalised embedding of the features. The claim (Theorem 6/8,
specs/caribou.md §2.3) is conditional on X⁽⁰⁾ — the encoder never sees an edge, its output is
identical in both worlds and Eq. 6 bounds the hop over every unit-row X — so the game plays PCMP
given the witness's X⁽⁰⁾: :class:`CaribouGivenInput` replaces only the embedding, every hop is the
target's own code. Only with one hop: hop k > 1 reads the previous noisy hop, not the witness's X,
so the witness realises hop 1's Δ alone (on the 16-regular witness, ``release-all-hops`` at K = 20
audits at ε_lb 3.19 against 8, on csbm at 9.8–11.4).

With K > 1 the released X⁽ᴷ⁾ declares the linear chain's log-density
(:mod:`targets.caribou.linear_chain`): exact while no row is projected, which a witness searched inside
the ball (:mod:`targets.caribou.binding`) makes the rule; an attack then scores the hidden hops'
propagation of the noise as well as the mean (issue #32).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch_geometric.data import Data

from graphs.datasets import load_witness_input
from targets.base import Release
from targets.caribou.config import CaribouConfig
from targets.caribou.linear_chain import ChainLaw, chain_law
from targets.caribou.target import Caribou


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
        self._laws: list[tuple[Data, ChainLaw]] = []

    def given_x0(self) -> torch.Tensor:
        if self._given is None:
            if not self.config.x0:
                raise ValueError("CaribouGivenInput needs --set x0=WITNESS_FILE")
            x = load_witness_input(self.config.x0)
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

    def chain_law(self, graph: Data) -> ChainLaw:
        """X⁽ᴷ⁾'s law on `graph` while no row is projected (the last few graphs remembered, held)."""
        for held, law in self._laws:
            if held is graph:
                return law
        c = self.config
        law = chain_law(graph, self.given_x0().cpu(), c.hops, c.contraction, c.alpha1, c.beta)
        self._laws = [*self._laws[-3:], (graph, law)]
        return law

    def _release(self, graph: Data, work: Data, *args: Any, **kwargs: Any) -> Release:
        release = super()._release(graph, work, *args, **kwargs)
        c = self.config
        if c.hops > 1 and not self.bug("release-all-hops") and not self.bug("no-noise"):
            step = release.mechanism[0]
            std = self.claim(graph).noise_std
            output = step.output.cpu()
            step.log_density = lambda g: self.chain_law(g).log_density(output, std)
            step.gaussian_law = lambda g: (self.chain_law(g).mean, std**2 * self.chain_law(g).cov)
            step.name += "; log-density of the linear chain (exact while no row is projected)"
        return release

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
