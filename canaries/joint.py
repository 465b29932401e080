"""A node whose edges and whose training example both change the release (issue #32): the pair a
composed node-level claim (DP-SGD on the node's example, then an aggregation over its edges) covers,
with both parts moved at once so that a joint score reads the whole composition.

World 1 is :class:`canaries.node.InsertHubNode`'s (the node appended with its edges), except that the
node's one training example enters DP-SGD as a Dirac gradient canary (:class:`canaries.gradient.DiracGradient`,
norm C at the clip bound, its own Poisson coin per step) instead of its natural gradient: under DP-SGD's
threat model an example's clipped gradient is any vector of norm ≤ C, so this is one example, as the node-level
relation allows. World 0 is the hub canary's (the node present, isolated, in no mask).

``--canary hub-with-gradient:D`` gives the node D neighbours: at a degree bound of D every one of its
edges is kept, so the aggregation's shift is the bound's √D exactly and its mean needs no sampling seed.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from torch_geometric.data import Data

from canaries.base import Canary, CanaryPair
from canaries.gradient import DiracGradient
from canaries.node import InsertHubNode
from targets.base import Unit


class HubWithGradient(Canary):
    name = "hub-with-gradient"
    unit = Unit.NODE

    def __init__(self, degree: int = 256, scale: float = 3.0) -> None:
        self.hub = InsertHubNode(degree=degree, scale=scale)

    @classmethod
    def parse(cls, text: str) -> HubWithGradient:
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"hub-with-gradient:D needs the node's degree D (an int >= 1), got {text!r}")
        return cls(degree=int(text))

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        hub = self.hub.worlds(graph, rng, target)
        node = int(hub.info["node"])
        gradient = DiracGradient().worlds(hub.g0, rng, target)
        g1 = hub.g1.clone()
        g1.train_mask = g1.train_mask.clone()
        g1.train_mask[node] = False  # its example is the gradient canary, not its natural gradient
        g1.canary_gradient = gradient.g1.canary_gradient
        info = {**gradient.info, **hub.info, "canary": self.name,
                "chosen_by": f"{hub.info['chosen_by']}; its example: the Dirac gradient canary "
                             f"({gradient.info['chosen_by']})",
                "g1": "the node with its edges, its training example the gradient canary"}
        return CanaryPair(hub.g0, g1, info)
