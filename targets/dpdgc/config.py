"""DPDGC's config: every hyperparameter, with the spec's defaults (see :mod:`targets.dpdgc`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from targets.base import TargetConfig

# ---------------------------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------------------------
_CHOICES = {
    "unit": ("edge", "node"),
    "group_scaling": ("linear", "sqrt"),
    "node_group": ("sound", "paper"),
    "projection": ("sphere", "ball"),
    "checkpoint": ("best-val", "last"),
    "split": ("graph", "paper"),
}


@dataclass
class DPDGCConfig(TargetConfig):
    """DPDGC hyperparameters (spec §2.4 defaults).

    Args:
        unit (str): ``edge`` (one directed entry) or ``node`` (k-neighbour when ``k`` is set, else
            node GDP with degree bound ``max_degree``) (default: ``edge``).
        k (int, optional): k of k-neighbour GDP; only with ``unit="node"`` (default: None).
        max_degree (int): D, the column-sum bound under node GDP (default: 100).
        hidden (int): h, width of W and of the classifier (default: 64).
        norm_scale (float): c, the row norm of W (default: 1.0, spec §9 #2; privacy does not depend
            on c. The paper's experiments use 1e-8, which under a real projection leaves Z ≈ b).
        epochs_encoder (int): DP-Emb epochs (default: 100).
        epochs_classifier (int): classifier epochs (default: 100).
        batch_size (int): B, capped at the number of training nodes (default: 64).
        lr (float): Adam learning rate of both stages (default: 1e-3).
        encoder_weight_decay (float): Adam weight decay of DP-Emb (default: 1e-5, code).
        clip (float): per-example clip norm (default: 1.0).
        dropout (float, optional): classifier dropout; None = 0.5 for edge, 0 otherwise.
        batch_norm (bool, optional): classifier BatchNorm; None = on for edge, off otherwise.
        group_scaling (str): DP-Emb noise ``2σ·f(g)``: ``linear`` f(g)=g (sound) or ``sqrt`` (code).
        node_group (str): node-GDP group size: ``sound`` 2D+1 or ``paper`` D+1.
        undirected_edge (bool): under edge GDP protect both directions (Δ_Z = √2c, g = 2).
        projection (str): after each step put W's rows ``sphere`` (= c) or in the ``ball`` (≤ c).
        rescale_z (bool): feed (Z − b)/c to the classifier instead of Z (post-processing; not in
            the paper; makes utility independent of c) (default: False).
        normalize_z (bool): row-normalise Z (after its noise) before the classifier, as Alg. 2
            does (post-processing; Eq. 2 and the code do not, spec §9 #6). With c = 1 an
            unnormalised noisy Z swamps the classifier (DP-SGD: Cora N_1 at 25 % instead of 56 %;
            results/utility.md) (default: True).
        checkpoint (str): classifier released at the ``best-val`` epoch (code) or the ``last``.
        split (str): ``graph`` masks, or the ``paper``'s 75/10/15 random split (seed 12345).
        num_train (int, optional): m assumed by the accountant (for reproducing worked numbers
            from the CLI); a fit refuses a graph whose training set differs (default: the graph's).
        num_edges (int, optional): #directed edges for the edge δ rule (default: the graph's).
    """

    unit: str = "edge"
    k: int | None = None
    max_degree: int = 100
    hidden: int = 64
    norm_scale: float = 1.0
    epochs_encoder: int = 100
    epochs_classifier: int = 100
    batch_size: int = 64
    lr: float = 1e-3
    encoder_weight_decay: float = 1e-5
    clip: float = 1.0
    dropout: float | None = None
    batch_norm: bool | None = None
    group_scaling: str = "linear"
    node_group: str = "sound"
    undirected_edge: bool = False
    projection: str = "sphere"
    rescale_z: bool = False
    normalize_z: bool = True
    checkpoint: str = "best-val"
    split: str = "graph"
    num_train: int | None = None
    num_edges: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, options in _CHOICES.items():
            value = getattr(self, name)
            if value not in options:
                raise ValueError(f"The {name!r} parameter must be one of {', '.join(options)}, got {value!r}")
        self.require_int("k", 0, optional=True)
        if self.k is not None and self.unit != "node":
            raise ValueError(f"The 'k' parameter needs unit='node' (k-neighbour GDP), got unit={self.unit!r}")
        self.require_int("max_degree", 1)
        self.require_int("hidden", 1)
        self.require_int("epochs_encoder", 0)
        self.require_int("epochs_classifier", 1)
        self.require_int("batch_size", 1)
        self.require_int("num_train", 1, optional=True)
        self.require_int("num_edges", 1, optional=True)
        for name in ("norm_scale", "lr", "clip"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
                raise ValueError(f"The {name!r} parameter must be a finite float > 0, got {value!r}")
        wd = self.encoder_weight_decay
        if isinstance(wd, bool) or not isinstance(wd, (int, float)) or not wd >= 0:
            raise ValueError(f"The 'encoder_weight_decay' parameter must be a float >= 0, got {wd!r}")
        if self.dropout is not None and not (isinstance(self.dropout, (int, float)) and 0 <= self.dropout < 1):
            raise ValueError(f"The 'dropout' parameter must be a float in [0, 1), got {self.dropout!r}")

    @property
    def level(self) -> str:
        """``edge``, ``kneighbour`` or ``node``."""
        if self.unit == "edge":
            return "edge"
        return "node" if self.k is None else "kneighbour"
