"""Edge correlation: does noise travel across the canary edge?

A noisy propagation X⁽ᵏ⁺¹⁾ = P(CGL(X⁽ᵏ⁾) + Nₖ) mixes each node's row into its neighbours' rows at
the next hop, noise included. If the edge {u, v} is present, rows u and v of the released X⁽ᴷ⁾
share noise drawn at earlier hops, so their inner product ⟨X⁽ᴷ⁾_u, X⁽ᴷ⁾_v⟩ is shifted upwards.

The shift is what a per-hop sensitivity bound must control. With rows projected to the unit
ball after every hop (CARIBOU's Algorithm 1), the propagated part of a row has norm ≤ 1 while the
fresh noise has norm ≈ s·√h, so the shared component is negligible. Without the projection the
propagated noise is as large as the fresh noise, and one trial can tell the worlds apart: this
score catches a missing projection that the mean-based likelihood ratio of
:mod:`attacks.mechanism` cannot see (the means barely move; the covariance does).

The score is a valid statistic for any release (its threshold is chosen on held-out trials); it
needs an edge canary (``pair.edge``) and a ``mechanism`` view whose last step is n × h.
"""
from __future__ import annotations

from typing import Any

from attacks.base import Attack
from targets.base import Level, Release, Unit, resolve


class EdgeCorrelation(Attack):
    name = "edge-correlation"
    levels = (Level.MECHANISM,)
    units = (Unit.EDGE,)

    def applies_to(self, release: Release, graph: Any = None) -> bool:
        """A mechanism whose last step has a row per node (not, e.g., released weights d × c)."""
        if not release.mechanism:
            return False
        out = resolve(release.mechanism)[-1].output
        return out.dim() == 2 and (graph is None or out.size(0) == graph.num_nodes)

    def score(self, release: Release, pair: Any, graph: Any = None) -> float:
        if "edge" not in pair.info:
            raise ValueError("edge-correlation needs an edge canary (e.g. --canary low-degree-edge)")
        u, v = pair.edge
        out = release.view(Level.MECHANISM)[-1].output
        if out.dim() != 2:
            raise ValueError(f"edge-correlation needs an n × h release, got shape {tuple(out.shape)}")
        if max(u, v) >= out.size(0):
            raise ValueError(f"edge-correlation needs a row per node; the last step has {out.size(0)} rows "
                             f"and the canary edge is ({u}, {v})")
        out = out.double()
        return float((out[u] * out[v]).sum())
