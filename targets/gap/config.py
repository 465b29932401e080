"""GAP's config: every hyperparameter, with the spec's defaults (see :mod:`targets.gap`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from targets.base import TargetConfig

_ACTIVATIONS = {"selu": F.selu, "relu": F.relu, "tanh": torch.tanh}
_COMBINES = ("cat", "sum", "mean", "max")
_OPTIMIZERS = ("adam", "sgd")
_TRACE_MODULES = ("all", "encoder", "classifier")


# ---------------------------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------------------------
@dataclass
class GAPConfig(TargetConfig):
    """GAP hyperparameters (spec §4; defaults from the reference code's scripts).

    Args:
        unit (str): ``edge`` (EDP) or ``node`` (NDP) (default: ``edge``).
        hops (int): K, number of noisy aggregation hops (default: 2).
        hidden_dim (int): h (default: 16).
        encoder_layers (int): encoder MLP layers; 0 uses raw features (default: 2).
        base_layers (int): layers of each per-hop base MLP (default: 1).
        head_layers (int): layers of the head MLPs (default: 1).
        combine (str): ``cat``, ``sum``, ``mean`` or ``max`` (default: ``cat``).
        activation (str): ``selu``, ``relu`` or ``tanh`` (default: ``selu``).
        dropout (float): dropout rate (default: 0).
        batch_norm (bool): BatchNorm in encoder and classifier; forced off at node level (default: True).
        epochs (int, optional): classifier epochs; None → 100 (edge) / 10 (node).
        encoder_epochs (int, optional): encoder epochs; None → 100 (edge) / 10 (node); 0 when
            ``encoder_layers`` is 0.
        optimizer (str): ``adam`` or ``sgd`` (default: ``adam``).
        learning_rate (float): learning rate of the encoder's and the classifier's optimizer (default: 0.01).
        weight_decay (float): L2 penalty of the encoder's and the classifier's optimizer (default: 0).
        batch_size (int, optional): None → full batch (edge) / 256 (node, Poisson rate B/N_train).
        max_grad_norm (float): DP-SGD clipping norm C, node level (default: 1.0).
        max_degree (int): out-degree bound D, node level (default: 100).
        edge_unit (str): ``directed`` (GAP's code: Δ = 1) or ``undirected`` (Δ = √2), edge level.
        trace_module (str): node level: the DP-SGD steps the ``trace`` view records and a gradient
            canary joins: ``all`` (both modules, no canary), ``encoder`` or ``classifier``.
    """

    unit: str = "edge"
    hops: int = 2
    hidden_dim: int = 16
    encoder_layers: int = 2
    base_layers: int = 1
    head_layers: int = 1
    combine: str = "cat"
    activation: str = "selu"
    dropout: float = 0.0
    batch_norm: bool = True
    epochs: int | None = None
    encoder_epochs: int | None = None
    optimizer: str = "adam"
    learning_rate: float = 0.01
    weight_decay: float = 0.0
    batch_size: int | None = None
    max_grad_norm: float = 1.0
    max_degree: int = 100
    edge_unit: str = "directed"
    trace_module: str = "all"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_choice("unit", ("edge", "node"))
        self.require_choice("combine", _COMBINES)
        self.require_choice("activation", tuple(_ACTIVATIONS))
        self.require_choice("optimizer", _OPTIMIZERS)
        self.require_choice("edge_unit", ("directed", "undirected"))
        self.require_choice("trace_module", _TRACE_MODULES)
        if self.trace_module != "all" and not self.node_level:
            raise ValueError("The 'trace_module' parameter applies at node level only: edge-level GAP "
                             "trains its encoder and classifier without DP-SGD, so it has no trace")
        if self.trace_module == "encoder" and self.encoder_layers == 0:
            raise ValueError("trace_module='encoder' needs an encoder (encoder_layers >= 1)")
        self.require_int("hops", 1)
        self.require_int("hidden_dim", 1)
        self.require_int("encoder_layers", 0)
        self.require_int("base_layers", 1)
        self.require_int("head_layers", 1)
        self.require_int("max_degree", 1)
        for key in ("epochs", "encoder_epochs"):
            if getattr(self, key) is not None:
                self.require_int(key, 0)
        if self.batch_size is not None:
            self.require_int("batch_size", 1)
        if not isinstance(self.batch_norm, bool):
            raise ValueError(f"The 'batch_norm' parameter must be a bool, got {self.batch_norm!r}")
        if not (isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0):
            raise ValueError(f"The 'dropout' parameter must be a float in [0, 1), got {self.dropout!r}")
        for key in ("learning_rate", "max_grad_norm"):
            value = getattr(self, key)
            if not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                raise ValueError(f"The {key!r} parameter must be a float > 0, got {value!r}")
        if not (isinstance(self.weight_decay, (int, float)) and self.weight_decay >= 0):
            raise ValueError(f"The 'weight_decay' parameter must be a float >= 0, got {self.weight_decay!r}")

    # resolved defaults -------------------------------------------------------------------
    @property
    def node_level(self) -> bool:
        return self.unit == "node"

    @property
    def cm_epochs(self) -> int:
        return self.epochs if self.epochs is not None else (10 if self.node_level else 100)

    @property
    def em_epochs(self) -> int:
        if self.encoder_layers == 0:
            return 0
        return self.encoder_epochs if self.encoder_epochs is not None else (10 if self.node_level else 100)

    @property
    def use_batch_norm(self) -> bool:
        return self.batch_norm and not self.node_level

    @property
    def node_batch_size(self) -> int:
        return self.batch_size if self.batch_size is not None else 256

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity of one hop's sum aggregation, as GAP charges it."""
        if self.node_level:
            return math.sqrt(self.max_degree)
        return math.sqrt(2.0) if self.edge_unit == "undirected" else 1.0
