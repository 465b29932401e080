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
``hub-with-gradient:D:replace`` is the replace-one pair where the claim's relation replaces the node's data
(node r in both graphs): world 0's node, isolated, carries the opposite canary (−v against world 1's +v).
Where one neighbouring change touches g examples (DPDGC at N_k: g = k + 1, ``canary_norm``) ‖v‖ = g·C:
v stands for the g aligned clipped gradients of the change's group, each of norm ≤ C (no single example
exceeds C), and the two differ by 2·g·C, the replace-one sensitivity. It needs full-batch DP-SGD (q = 1:
no inclusion coin) and an attack that reads both worlds' canaries (``attacks.joint:JointLRT``).
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

    def __init__(self, degree: int = 256, scale: float = 3.0, replace: bool = False) -> None:
        self.hub = InsertHubNode(degree=degree, scale=scale)
        self.replace = replace

    @classmethod
    def parse(cls, text: str) -> HubWithGradient:
        degree, _, mode = text.partition(":")
        if not degree.isdigit() or int(degree) < 1 or mode not in ("", "replace"):
            raise ValueError(f"hub-with-gradient:D[:replace] needs the node's degree D (an int >= 1), got {text!r}")
        return cls(degree=int(degree), replace=mode == "replace")

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        hub = self.hub.worlds(graph, rng, target)
        node = int(hub.info["node"])
        gradient = DiracGradient().worlds(hub.g0, rng, target)
        g1 = hub.g1.clone()
        g1.train_mask = g1.train_mask.clone()
        g1.train_mask[node] = False  # its example is the gradient canary, not its natural gradient
        g1.canary_gradient = gradient.g1.canary_gradient
        info = {**gradient.info, **hub.info, "canary": self.name,
                "gradient_pair": "replace-one" if self.replace else "add-one",
                "chosen_by": f"{hub.info['chosen_by']}; its example: the Dirac gradient canary "
                             f"({gradient.info['chosen_by']})",
                "g1": "the node with its edges, its training example the gradient canary"}
        g0 = hub.g0
        if self.replace:
            g0 = hub.g0.clone()
            g0.canary_gradient = -gradient.g1.canary_gradient
            info["g0"] = f"{info['g0']}, its training example the opposite gradient canary"
        return CanaryPair(g0, g1, info)
