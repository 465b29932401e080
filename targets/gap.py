"""GAP: differentially private GNNs with aggregation perturbation.

Sajadmanesh, Shamsabadi, Bellet & Gatica-Perez, USENIX Security 2023 (arXiv 2203.00949);
spec ``shared/specs/gap.md``. Three decoupled modules:

1. **Encoder** (EM): an MLP ``d → h`` trained on features and labels alone (no edges), then
   ``X0 = rownorm(encoder_mlp(X))`` for every node.
2. **Private multi-hop aggregation** (PMA), the only step that reads edges::

       H0 = rownorm(X0)
       S_k = Aᵀ H_{k-1} + N(0, (σΔ)² I)        (sum over in-neighbours: row v = Σ_{u→v} H_{k-1}[u])
       H_k = rownorm(S_k)                        k = 1..K

   computed once; the stack ``[H0, …, H_K]`` (N × h × (K+1)) is cached and every prediction reads it.
3. **Classifier** (CM): one base MLP per hop channel, combined (``cat`` by default), then a head.

Levels (``unit``):

* ``edge`` (EDP): encoder and classifier are trained without noise (they never see edges); only PMA
  is noisy, with sensitivity Δ = 1. **Unit: one directed edge u→v** — exactly what GAP's code
  charges (adding u→v changes only row v of ``Aᵀ H`` by a unit vector). ``edge_unit="undirected"``
  charges Δ = √2 instead (adding {u, v} changes rows u and v), same noise multiplier σ.
* ``node`` (NDP, add/remove a node with its features, label and incident edges): the out-degree is
  bounded to D = ``max_degree`` by sampling, PMA uses Δ = √D, and encoder and classifier are trained
  by DP-SGD (per-example clipping C, Gaussian noise σC on the summed clipped gradients, Poisson
  sampling at rate q = B / N_train, Adam on the noisy mean). No BatchNorm at node level.

Accountant (the paper's, literally): one noise multiplier σ shared by all modules, calibrated to
the target ε (GAP does not split the budget).

* EDP: PMA is K Gaussian mechanisms with noise multiplier σ, composed exactly (autodp
  ``ComposeGaussian``): it is μ-GDP with μ = √K / σ, converted to (ε, δ) by the exact GDP curve.
* NDP: RDP composition ε(α) = ε_EM(α) + K·α/(2σ²) + ε_CM(α), where each DP-SGD part is
  ``T = ⌊epochs · N_train / B⌋`` Poisson-subsampled Gaussian steps (rate q, via dp-accounting),
  converted with the improved RDP → (ε, δ) conversion (autodp's default).
* δ (``delta=None``): ``10^-digits(n)`` with n = number of *directed* edges (EDP; PyG counts both
  directions) or training nodes (NDP).

Releases (:class:`~targets.base.Release`):

* ``api``: ``predict(graph, nodes=None)`` → softmax posteriors (n_query × classes) read from the
  cached stack of the private graph (the transductive guarantee: no fresh noise; the ``graph``
  argument is accepted for the contract and ignored).
* ``weights``: ``encoder.*`` and ``classifier.*`` parameters.
* ``mechanism``: one :class:`~targets.base.MechanismStep` per hop with output ``S_k`` (N × h), the
  *pre-normalisation* noisy aggregate. GAP's proof is about exactly this Gaussian mechanism
  (``H_k = rownorm(S_k)`` is post-processing), so ``S_k = mean + N(0, (σΔ)²)`` entry-wise and
  ``noise_std = σΔ``; releasing ``S_k`` gives the adversary at least what the cached ``H_k`` gives,
  and the paper's composition bounds the joint law of ``(S_1, …, S_K)``, so an audit of it is sound.
  ``mean(graph) = A_graphᵀ H_{k-1}`` with the *released* ``H_{k-1} = rownorm(S_{k-1})`` held fixed
  (``H_0`` from the released encoder on ``graph.x``; rows a graph has beyond the release are filled
  with that graph's noiseless embeddings). At node level ``A_graph`` is degree-bounded with the
  run's own sampling seed (exact for the trained graph; the identity when no out-degree exceeds D).
* ``trace`` (node level only): a :class:`~targets.trace.HeterPoissonTrace` (Gaussian noise,
  std σC, clip norm C, Poisson rate q) of :class:`GAPTraceStep` s, one per DP-SGD step run: the
  released noisy sum of clipped per-example gradients (flattened in ``parameters()`` order), the
  sampled batch, ``clean`` (the noiseless clipped sum, canary included: auditor instrumentation),
  ``canary_in``, the module and its parameters before the step. ``trace_module`` picks the steps:
  ``all`` (both modules, two parameter spaces: no gradient canary) or ``encoder``/``classifier``
  (that module only, which a :class:`~canaries.gradient.DiracGradient` canary then joins).

Gradient-canary hook (node level, ``trace_module`` = ``encoder`` or ``classifier``): a graph with
``canary_gradient`` (a length-``dimension(graph)`` vector ``g_c``) adds ``g_c`` to that module's
clipped sum at every step where the canary's own Poisson(q) coin comes up, as a virtual extra
example. The coins come from a generator seeded by a hash of the fit generator's state (the fit
generator itself is not drawn from), and are drawn whether or not the canary is present: the two
worlds see the same batches, coins and noise, and every other view keeps its values.

Shapes: ``x`` N × d; stack N × h × (K+1); posteriors n × c; mechanism outputs N × h each.

Batched trials (edge level): :meth:`GAP.fit_batch` plays B trials on one world, each generator
drawn from exactly as :meth:`GAP.fit` draws from it, and ``fit`` is the same code with B = 1. The
work the trials share is done once (Aᵀ as a cached sparse matrix, rownorm(X0) of the prepared
encoder and hop 1's aggregate Aᵀ·H0, the claim); per trial remain the noise draws and hops ≥ 2.
The classifiers are trained together on first use of any trial's classifier view, with parameters
stacked on a trial axis (:class:`ClassifierBatch`); every operation there is chosen so that a
trial's floats do not depend on the batch it is in (bitwise equal to ``fit``; tests check it).
Hop 1's mechanism step carries a ``mean_key``: its mean depends on the cached encoder and the
graph only, so a batched scorer computes it once.

:meth:`GAP.prepare` caches the encoder under EDP only: it is trained on features, labels and masks
(never edges), which an edge canary does not change; the cache is keyed on those tensors. Under NDP
the encoder is a DP-SGD release of node data and is retrained in every fit.
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import logging
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from targets.accounting import (
    DEFAULT_ORDERS,
    calibrate_decreasing,
    gap_delta,
    gaussian_rdp,
    gdp_epsilon,
    rdp_to_dp,
    subsampled_gaussian_rdp,
)
from targets.base import Claim, Lazy, MechanismStep, Release, Target, TargetConfig, child_generator, seeded
from targets.dpsgd import assign_flat_grad, canary_from, clip_rows, noisy_sum, poisson_sample
from targets.gap_stacked import ClassifierBatch
from targets.trace import HeterPoissonTrace, TraceStep

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
        learning_rate (float): (default: 0.01).
        weight_decay (float): (default: 0).
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
        _choice("unit", self.unit, ("edge", "node"))
        _choice("combine", self.combine, _COMBINES)
        _choice("activation", self.activation, tuple(_ACTIVATIONS))
        _choice("optimizer", self.optimizer, _OPTIMIZERS)
        _choice("edge_unit", self.edge_unit, ("directed", "undirected"))
        _choice("trace_module", self.trace_module, _TRACE_MODULES)
        if self.trace_module != "all" and not self.node_level:
            raise ValueError("The 'trace_module' parameter applies at node level only: edge-level GAP "
                             "trains its encoder and classifier without DP-SGD, so it has no trace")
        if self.trace_module == "encoder" and self.encoder_layers == 0:
            raise ValueError("trace_module='encoder' needs an encoder (encoder_layers >= 1)")
        _int_at_least("hops", self.hops, 1)
        _int_at_least("hidden_dim", self.hidden_dim, 1)
        _int_at_least("encoder_layers", self.encoder_layers, 0)
        _int_at_least("base_layers", self.base_layers, 1)
        _int_at_least("head_layers", self.head_layers, 1)
        _int_at_least("max_degree", self.max_degree, 1)
        for key in ("epochs", "encoder_epochs"):
            if getattr(self, key) is not None:
                _int_at_least(key, getattr(self, key), 0)
        if self.batch_size is not None:
            _int_at_least("batch_size", self.batch_size, 1)
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


def _choice(key: str, value: Any, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ValueError(f"The {key!r} parameter must be one of {', '.join(options)}, got {value!r}")


def _int_at_least(key: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"The {key!r} parameter must be an int >= {low}, got {value!r}")


# ---------------------------------------------------------------------------------------------
# accountant (paper-specific)
# ---------------------------------------------------------------------------------------------
def dpsgd_schedule(n_train: int, batch_size: int, epochs: int) -> tuple[float, int]:
    """(sampling rate q, accounted steps T) of one DP-SGD module as GAP's ``NoisySGD`` charges it.

    q = B / N_train and T = ⌊epochs · N_train / B⌋. When B ≥ N_train, q is capped at 1 and
    T = epochs (full-batch DP-GD; the reference code would pass a rate > 1 to autodp here).
    """
    if epochs == 0 or n_train == 0:
        return 0.0, 0
    if batch_size >= n_train:
        return 1.0, epochs
    return batch_size / n_train, (epochs * n_train) // batch_size


def node_rdp(orders, sigma: float, hops: int, rate: float, steps_em: int, steps_cm: int
             ) -> dict[str, np.ndarray]:
    """RDP curves of GAP-NDP's three modules with one shared noise multiplier σ."""
    def sgd(steps: int) -> np.ndarray:
        if steps == 0:
            return np.zeros(len(orders))
        if rate >= 1.0:
            return gaussian_rdp(orders, sigma, steps)
        absl = logging.getLogger("absl")  # dp-accounting logs each order it cannot bound (kept as ∞)
        level = absl.level
        absl.setLevel(logging.ERROR)
        try:
            return subsampled_gaussian_rdp(orders, rate, sigma, steps)
        finally:
            absl.setLevel(level)

    return {"encoder": sgd(steps_em), "pma": gaussian_rdp(orders, sigma, hops), "classifier": sgd(steps_cm)}


#: GAP-NDP's calibration (Brent on log σ: each RDP evaluation under Poisson sampling is costly),
#: falling back to bisection if no bracket is found
NODE_CALIBRATION: dict[str, Any] = {
    "method": "brent", "lo": 0.05, "hi": 2.0, "grow": 4.0, "limits": (1e-6, 1e6), "rtol": 1e-9, "nudge": 1e-8,
    "fallback": {"lo": 0.1, "hi": 10.0, "rtol": 1e-7},
}


def edge_epsilon(sigma: float, hops: int, delta: float) -> float:
    """ε of GAP-EDP's PMA: K exactly composed Gaussians = μ-GDP with μ = √K/σ (autodp ComposeGaussian)."""
    if sigma <= 0:
        return math.inf
    return gdp_epsilon(math.sqrt(hops) / sigma, delta)


# ---------------------------------------------------------------------------------------------
# graph helpers
# ---------------------------------------------------------------------------------------------
def rownorm(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x, p=2, dim=-1)


def sum_aggregate(h: torch.Tensor, edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Aᵀ h: row v = Σ over edges u→v of h[u]."""
    src, dst = edge_index[0], edge_index[1]
    out = torch.zeros(num_nodes, h.size(1), dtype=h.dtype, device=h.device)
    return out.index_add_(0, dst, h[src])


def bound_out_degree(edge_index: torch.Tensor, num_nodes: int, max_degree: int, seed: int) -> torch.Tensor:
    """Keep at most `max_degree` out-edges u→· per node u, sampled without replacement (seeded)."""
    if edge_index.size(1) == 0:
        return edge_index
    g = torch.Generator().manual_seed(seed)
    src = edge_index[0].cpu()
    key = torch.rand(src.numel(), generator=g, dtype=torch.float64)
    order = torch.argsort(src.double() * 2.0 + key)  # group by source, random order within
    sorted_src = src[order]
    counts = torch.bincount(sorted_src, minlength=num_nodes)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(src.numel()) - starts[sorted_src]
    keep = order[rank < max_degree]
    keep, _ = torch.sort(keep)
    return edge_index[:, keep.to(edge_index.device)]


def transposed_adjacency(edge_index: torch.Tensor, num_nodes: int, dtype: torch.dtype = torch.float32
                         ) -> torch.Tensor:
    """Aᵀ as a sparse CSR matrix (row v: the sources u of the edges u→v, in increasing u).

    ``transposed_adjacency(ei, n) @ h`` equals :func:`sum_aggregate` ``(h, ei, n)`` and, for a
    coalesced ``edge_index``, adds each row's terms in the same order; it is ~10× faster.
    """
    src, dst = edge_index[0], edge_index[1]
    order = torch.argsort(dst * max(num_nodes, 1) + src, stable=True)
    crow = torch.zeros(num_nodes + 1, dtype=torch.long, device=edge_index.device)
    crow[1:] = torch.cumsum(torch.bincount(dst, minlength=num_nodes), 0)
    values = torch.ones(src.numel(), dtype=dtype, device=edge_index.device)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(crow, src[order], values, (num_nodes, num_nodes), check_invariants=False)


class _ByIdentity:
    """A small cache of values computed from tensors, hit only by the very same (unmodified) objects.

    Keeps a reference to each key tensor, so an id is never reused while its entry lives.
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._items: list[tuple[tuple[torch.Tensor, ...], tuple[int, ...], Any]] = []

    def get(self, key: tuple[torch.Tensor, ...], compute: Callable[[], Any]) -> Any:
        for tensors, versions, value in self._items:
            if len(tensors) == len(key) and all(a is b and a._version == v
                                                for a, b, v in zip(key, tensors, versions)):
                return value
        value = compute()
        self._items.append((key, tuple(k._version for k in key), value))
        if len(self._items) > self.size:
            self._items.pop(0)
        return value


# ---------------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------------
class _MLP(nn.Module):
    """Linear layers with (BatchNorm →) dropout → activation between them; the last is plain."""

    def __init__(self, d_in: int, hidden: int, d_out: int, layers: int, act, dropout: float, bn: bool):
        super().__init__()
        dims = [d_in] + [hidden] * (layers - 1) + [d_out]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.bns = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(layers - 1)) if bn else None
        self.act, self.dropout = act, nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self.bns[i](x) if self.bns is not None else x
                x = self.act(self.dropout(x))
        return x


class _Encoder(nn.Module):
    """EM: encoder MLP → rownorm → (BN) → dropout → act → head (training only)."""

    def __init__(self, d_in: int, cfg: GAPConfig, classes: int):
        super().__init__()
        act, bn, h = _ACTIVATIONS[cfg.activation], cfg.use_batch_norm, cfg.hidden_dim
        self.encoder_mlp = _MLP(d_in, h, h, cfg.encoder_layers, act, cfg.dropout, bn)
        self.bn = nn.BatchNorm1d(h) if bn else None
        self.head = _MLP(h, h, classes, cfg.head_layers, act, cfg.dropout, bn)
        self.act, self.dropout = act, nn.Dropout(cfg.dropout)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return rownorm(self.encoder_mlp(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.encode(x)
        z = self.bn(z) if self.bn is not None else z
        return self.head(self.act(self.dropout(z)))


class _Classifier(nn.Module):
    """CM: one base MLP per hop channel → combine → rownorm → (BN) → dropout → act → head."""

    def __init__(self, d_in: int, cfg: GAPConfig, classes: int):
        super().__init__()
        act, bn, h, k = _ACTIVATIONS[cfg.activation], cfg.use_batch_norm, cfg.hidden_dim, cfg.hops + 1
        self.base = nn.ModuleList(_MLP(d_in, h, h, cfg.base_layers, act, cfg.dropout, bn) for _ in range(k))
        width = h * k if cfg.combine == "cat" else h
        self.bn = nn.BatchNorm1d(width) if bn else None
        self.head = _MLP(width, h, classes, cfg.head_layers, act, cfg.dropout, bn)
        self.combine, self.act, self.dropout = cfg.combine, act, nn.Dropout(cfg.dropout)

    def forward(self, stack: torch.Tensor) -> torch.Tensor:  # stack: n × h × (K+1)
        hs = [mlp(stack[..., i]) for i, mlp in enumerate(self.base)]
        if self.combine == "cat":
            z = torch.cat(hs, dim=-1)
        else:
            z = torch.stack(hs, 0)
            if self.combine == "sum":
                z = z.sum(0)
            elif self.combine == "mean":
                z = z.mean(0)
            else:
                z = z.max(0).values
        z = rownorm(z)
        z = self.bn(z) if self.bn is not None else z
        return self.head(self.act(self.dropout(z)))


def _per_example_flat_grads(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """B × P per-example gradients of the cross-entropy (vmap; dropout draws differ per example)."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def one(p, b, xi, yi):
        out = functional_call(model, (p, b), (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    grads = vmap(grad(one), in_dims=(None, None, 0, 0), randomness="different")(params, buffers, x, y)
    return torch.cat([grads[k].reshape(x.size(0), -1) for k, _ in model.named_parameters()], dim=1)


def _flat_params(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()


@torch.no_grad()
def _accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    if y.numel() == 0:
        return float("nan")
    model.eval()
    return float((model(x).argmax(-1) == y).float().mean())


# ---------------------------------------------------------------------------------------------
# the node-level trace
# ---------------------------------------------------------------------------------------------
@dataclass
class GAPTraceStep(TraceStep):
    """One DP-SGD step of GAP: the shared :class:`TraceStep` fields, the module that took it, its
    index in the trace and the module's flat parameters before it.

    ``step[key]`` reads the earlier per-step records by their old keys (``noisy_sum``, ``batch``,
    ``module``, ``step``, ``params``).
    """

    module: str = ""
    step: int = 0
    params: torch.Tensor | None = None

    _KEYS: ClassVar[dict[str, str]] = {"noisy_sum": "noisy", "batch": "central", "module": "module",
                                       "step": "step", "params": "params"}

    def __getitem__(self, key: str) -> Any:
        return getattr(self, self._KEYS[key])


def side_generator(rng: torch.Generator) -> torch.Generator:
    """A generator seeded from a hash of `rng`'s state; `rng` itself is not drawn from, so the
    draws every other part of a fit reads stay where they were."""
    digest = hashlib.sha256(rng.get_state().numpy().tobytes() + b"gap canary coins").digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


class _Recorder:
    """Records a fit's DP-SGD steps into its trace and adds the gradient canary to the traced
    module's clipped sums.

    ``module`` ``all`` records every step (no canary); ``encoder``/``classifier`` records that
    module's steps only, and for each draws the canary's Poisson(rate) coin from `coins`, whether
    or not a canary is present (so both worlds draw the same coins).
    """

    def __init__(self, trace: HeterPoissonTrace, module: str, canary: torch.Tensor | None,
                 coins: torch.Generator | None) -> None:
        self.trace, self.module, self.canary, self.coins = trace, module, canary, coins

    def records(self, name: str) -> bool:
        return self.module in ("all", name)

    def coin(self, name: str, rate: float) -> bool | None:
        """Whether the canary joins this step's sum (None: no canary in this module or world)."""
        if self.module != name:
            return None
        up = bool(torch.rand(1, generator=self.coins).item() < rate)
        return up if self.canary is not None else None

    def add(self, name: str, model: nn.Module, batch: torch.Tensor, rows: torch.Tensor,
            noisy: torch.Tensor, canary_in: bool | None) -> None:
        """One step: `rows` are the clipped gradients summed (canary row included), `noisy` the
        released sum."""
        clean = rows.sum(0) if rows.numel() else torch.zeros_like(noisy)
        if self.module != "all" and not self.trace.shapes:
            self.trace.shapes = {k: tuple(v.shape) for k, v in model.named_parameters()}
        self.trace.steps.append(GAPTraceStep(
            noisy=noisy.detach().cpu(), central=batch.cpu(), canary_in=canary_in, clean=clean.detach().cpu(),
            module=name, step=len(self.trace.steps), params=_flat_params(model)))


#: claims by (config without bug/device, count): the accountant is pure, and calibration under
#: Poisson sampling costs seconds, so targets rebuilt for every trial share it.
_CLAIMS: dict[tuple[str, int], Claim] = {}


# ---------------------------------------------------------------------------------------------
# target
# ---------------------------------------------------------------------------------------------
class GAP(Target):
    """GAP (aggregation perturbation) at edge or node level; see the module docstring."""

    name: ClassVar[str] = "gap"
    Config: ClassVar[type[TargetConfig]] = GAPConfig
    #: the views some configuration offers (``trace``: node level only); an instance's ``levels``
    #: are its unit's
    levels: ClassVar[tuple[str, ...]] = ("api", "weights", "mechanism", "trace")
    bugs: ClassVar[dict[str, str]] = {
        "no-noise": "PMA (and, at node level, DP-SGD) adds no noise while claiming the calibrated ε",
        "fresh-inference-noise": "every api query re-runs encoder + PMA over the private graph with "
                                 "fresh noise, unaccounted (GAP's predict on a new Data object, spec §3.5/P4)",
        "poisson-loader-steps": "node level: DP-SGD runs epochs·⌈N/B⌉ Poisson steps (the reference "
                                "loader's loop) while the accountant charges ⌊epochs·N/B⌋",
        "no-degree-bound": "node level: the out-degree is not bounded to D although PMA charges √D",
    }
    #: (dataset, setting, ε) → test accuracy %. "edge"/"node": GAP paper (README table, spec §6) for
    #: facebook/reddit/amazon, CARIBOU Table 3 (first table, edge level) for the others; "node" on
    #: PyG datasets and "edge (DPDGC)" from DPDGC Table 2; "none" = non-private GAP (ε = ∞).
    published_accuracy: ClassVar[dict[tuple[str, str, float], float]] = {
        ("facebook", "none", math.inf): 80.0, ("reddit", "none", math.inf): 99.4,
        ("amazon", "none", math.inf): 91.2,
        ("facebook", "edge", 4): 76.3, ("reddit", "edge", 4): 98.7, ("amazon", "edge", 4): 83.8,
        ("facebook", "node", 8): 63.2, ("reddit", "node", 8): 94.0, ("amazon", "node", 8): 77.4,
        # CARIBOU Table 3, GAP row (edge level, ε = 1, 2, 4, 8, 16, 32)
        **{("cora", "edge", e): a for e, a in zip((1, 2, 4, 8, 16, 32), (77.1, 77.5, 77.1, 79.0, 81.7, 82.5))},
        **{("computers", "edge", e): a for e, a in zip((1, 2, 4, 8, 16, 32), (87.2, 88.3, 87.2, 90.1, 90.1, 90.6))},
        **{("photo", "edge", e): a for e, a in zip((1, 2, 4, 8, 16, 32), (93.0, 93.4, 93.0, 94.6, 94.6, 94.8))},
        **{("pubmed", "edge", e): a for e, a in zip((1, 2, 4, 8, 16, 32), (87.4, 87.5, 87.4, 88.1, 88.5, 88.8))},
        **{("chain-s", "edge", e): a for e, a in zip((1, 2, 4, 8, 16, 32), (65.6, 65.6, 65.6, 65.6, 62.5, 59.4))},
        **{("chain-m", "edge", e): a for e, a in zip((1, 2, 4, 8, 16, 32), (67.5, 67.5, 67.5, 60.0, 70.0, 65.0))},
        **{("chain-l", "edge", e): a for e, a in zip((1, 2, 4, 8, 16, 32), (61.7,) * 6)},
        **{("chain-x", "edge", e): a for e, a in zip((1, 2, 4, 8, 16, 32), (67.0, 68.0, 67.0, 67.0, 68.0, 68.0))},
        # DPDGC Table 2: GAP under edge GDP (ε = 1) and node GDP (ε = 16)
        ("squirrel", "edge (DPDGC)", 1): 35.15, ("chameleon", "edge (DPDGC)", 1): 49.47,
        ("pubmed", "edge (DPDGC)", 1): 87.79, ("computers", "edge (DPDGC)", 1): 87.74,
        ("cora", "edge (DPDGC)", 1): 76.95, ("photo", "edge (DPDGC)", 1): 92.94,
        ("squirrel", "node", 16): 33.82, ("chameleon", "node", 16): 38.68, ("pubmed", "node", 16): 85.28,
        ("computers", "node", 16): 77.50, ("cora", "node", 16): 54.36, ("photo", "node", 16): 81.27,
    }

    def __init__(self, config: TargetConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        if not self.config.node_level:  # type: ignore[attr-defined]
            self.levels = ("api", "weights", "mechanism")  # type: ignore[misc]
        self._prepared: dict[str, Any] | None = None
        self._adjacencies = _ByIdentity(8)  # Aᵀ per graph (edge level)

    # ------------------------------------------------------------------ accounting
    def claim(self, graph: Any) -> Claim:
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        n_train = int(graph.train_mask.sum())
        n_edges = int(graph.edge_index.size(1))
        # the claim depends on the config (never on the bug, device or traced module) and on these
        # two counts only
        key = (repr(dataclasses.replace(cfg, bug=None, device="cpu", trace_module="all")),
               n_train if cfg.node_level else n_edges)
        if key not in _CLAIMS:
            if len(_CLAIMS) > 256:
                _CLAIMS.clear()
            _CLAIMS[key] = self._node_claim(n_train) if cfg.node_level else self._edge_claim(n_edges)
        return _CLAIMS[key]

    def _edge_claim(self, n_edges: int) -> Claim:
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        delta = cfg.delta if cfg.delta is not None else gap_delta(n_edges)
        k = cfg.hops
        if math.isinf(cfg.epsilon):
            sigma = 0.0
        else:
            sigma = calibrate_decreasing(lambda s: edge_epsilon(s, k, delta), cfg.epsilon,
                                         lo=0.1, hi=10.0, rtol=1e-10)
        mu = math.sqrt(k) / sigma if sigma > 0 else math.inf
        unit = ("edge (one undirected edge: both directions)" if cfg.edge_unit == "undirected"
                else "edge (one directed edge u→v)")
        return Claim(
            epsilon=edge_epsilon(sigma, k, delta), delta=delta,
            accountant="GAP-EDP: K exactly composed Gaussian mechanisms (autodp ComposeGaussian) = μ-GDP, μ = √K/σ",
            unit=unit, gdp_mu=mu,
            details={
                "level": "edge", "noise_multiplier": sigma, "sensitivity": cfg.sensitivity,
                "noise_std": sigma * cfg.sensitivity, "hops": k, "mu": mu, "edge_unit": cfg.edge_unit,
                "delta_rule": "10^-digits(directed edges)" if cfg.delta is None else "given",
                "num_directed_edges": n_edges,
            },
        )

    def _node_claim(self, n_train: int) -> Claim:
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        delta = cfg.delta if cfg.delta is not None else gap_delta(n_train)
        rate_em, steps_em = dpsgd_schedule(n_train, cfg.node_batch_size, cfg.em_epochs)
        rate_cm, steps_cm = dpsgd_schedule(n_train, cfg.node_batch_size, cfg.cm_epochs)
        rate = max(rate_em, rate_cm)  # one loader rate; a module with no epochs reports 0
        orders = DEFAULT_ORDERS

        def eps_of(s: float) -> float:
            curves = node_rdp(orders, s, cfg.hops, rate, steps_em, steps_cm)
            return rdp_to_dp(orders, sum(curves.values()), delta)[0]

        if math.isinf(cfg.epsilon):
            sigma = 0.0
            eps, order, curves = math.inf, float("nan"), {}
        else:
            sigma = calibrate_decreasing(eps_of, cfg.epsilon, **NODE_CALIBRATION)
            curves = node_rdp(orders, sigma, cfg.hops, rate, steps_em, steps_cm)
            eps, order = rdp_to_dp(orders, sum(curves.values()), delta)
        at = {name: float(np.interp(order, orders, c)) for name, c in curves.items()}
        return Claim(
            epsilon=eps, delta=delta,
            accountant="GAP-NDP: RDP composition of DP-SGD (encoder) + K Gaussians (PMA, Δ=√D) + "
                       "DP-SGD (classifier), Poisson-subsampled Gaussian RDP via dp-accounting, "
                       "improved RDP→DP conversion",
            unit="node (add/remove with features, label and incident edges; out-degree bounded to D)",
            details={
                "level": "node", "noise_multiplier": sigma, "sensitivity": cfg.sensitivity,
                "noise_std": sigma * cfg.sensitivity, "dpsgd_noise_std": sigma * cfg.max_grad_norm,
                # the trace's law for the gradient canary (canaries.gradient reads these first)
                "trace_noise_std": sigma * cfg.max_grad_norm, "canary_norm": cfg.max_grad_norm,
                "hops": cfg.hops, "max_degree": cfg.max_degree, "max_grad_norm": cfg.max_grad_norm,
                "batch_size": cfg.node_batch_size, "num_train": n_train, "sampling_rate": rate,
                "steps_encoder": steps_em, "steps_classifier": steps_cm,
                "epochs_encoder": cfg.em_epochs, "epochs_classifier": cfg.cm_epochs,
                "best_order": order, "rdp_at_best_order": at,
                "orders": f"accounting.DEFAULT_ORDERS ({len(orders)} orders, {orders[0]}…{orders[-1]})",
                "delta_rule": "10^-digits(training nodes)" if cfg.delta is None else "given",
            },
        )

    # ------------------------------------------------------------------ encoder
    def _graph_tensors(self, graph: Any) -> dict[str, torch.Tensor]:
        dev = self.device
        return {"x": graph.x.to(dev), "y": graph.y.to(dev),
                "train": graph.train_mask.nonzero().view(-1).to(dev),
                "val": graph.val_mask.nonzero().view(-1).to(dev),
                "test": graph.test_mask.nonzero().view(-1).to(dev)}

    def _new_encoder(self, d_in: int, classes: int) -> _Encoder | None:
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        return _Encoder(d_in, cfg, classes).to(self.device) if cfg.encoder_layers > 0 else None

    def _encode(self, encoder: _Encoder | None, x: torch.Tensor) -> torch.Tensor:
        if encoder is None:
            return rownorm(x)
        encoder.eval()
        with torch.no_grad():
            return encoder.encode(x)

    def _fingerprint(self, graph: Any) -> tuple[torch.Tensor, ...]:
        return (graph.x, graph.y, graph.train_mask, graph.val_mask)

    def prepare(self, graph: Any) -> None:
        """Cache the edge-free encoder and its embeddings X0 (EDP only: they never read edges;
        no-op at node level)."""
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        if cfg.node_level:
            return
        rng = torch.Generator().manual_seed(0)
        t = self._graph_tensors(graph)
        classes = int(graph.y.max()) + 1
        with seeded(rng):
            encoder = self._new_encoder(t["x"].size(1), classes)
            if encoder is not None:
                self._train(encoder, t["x"], t, cfg.em_epochs, rng, trace=None, name="encoder")
        self._prepared = {"key": tuple(v.clone() for v in self._fingerprint(graph)), "encoder": encoder,
                          "seen": _ByIdentity(), "embeddings": _ByIdentity(4), "token": object()}
        self._embeddings(encoder, graph.x)

    def cached_work(self) -> str | None:
        """What :meth:`prepare` computes once per worker and every trial reuses."""
        if self.config.node_level:  # type: ignore[attr-defined]
            return None
        return ("edge-free encoder trained once per worker, with its node embeddings X0 "
                "(depend on features, labels and masks only, never on edges)")

    def _cached_encoder(self, graph: Any) -> tuple[bool, _Encoder | None]:
        if self._prepared is None or self.config.node_level:  # type: ignore[attr-defined]
            return False, None
        key = self._fingerprint(graph)

        def same() -> bool:
            return all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(self._prepared["key"], key))

        hit = self._prepared["seen"].get(key, same)  # compared once per graph object
        return hit, self._prepared["encoder"] if hit else None

    def _embeddings(self, encoder: _Encoder | None, x: torch.Tensor) -> torch.Tensor:
        """rownorm(X0) of features `x` with the prepared encoder, cached by tensor (edge level)."""
        if self._prepared is not None and encoder is self._prepared["encoder"]:
            return self._prepared["embeddings"].get((x,), lambda: rownorm(self._encode(encoder, x.to(self.device))))
        return rownorm(self._encode(encoder, x.to(self.device)))

    def _aggregator(self, graph: Any, edges: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
        """h ↦ Aᵀh over the private edge set `edges` of `graph`.

        Edge level (the edge set is the graph's own): a sparse Aᵀ cached per graph, which sums in
        :func:`sum_aggregate`'s order. Node level (a per-trial sampled edge set): sum_aggregate.
        """
        n = int(graph.num_nodes)
        if self.config.node_level:  # type: ignore[attr-defined]
            return lambda h: sum_aggregate(h, edges, n)
        adj = self._adjacencies.get((graph.edge_index,), lambda: transposed_adjacency(edges, n))

        def aggregate(h: torch.Tensor) -> torch.Tensor:
            return (adj if adj.dtype == h.dtype else adj.to(h.dtype)) @ h

        return aggregate

    # ------------------------------------------------------------------ training
    def _train(self, model: nn.Module, inputs: torch.Tensor, t: dict[str, torch.Tensor], epochs: int,
               rng: torch.Generator, trace: _Recorder | None, name: str) -> None:
        """Train `model` on the training rows; keep the best-validation-accuracy checkpoint.

        Edge level: ordinary (Adam) training, full batch unless ``batch_size`` is set. Node level:
        DP-SGD with Poisson sampling, per-example clipping and one shared noise multiplier.
        """
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        if epochs == 0:
            return
        opt_cls = torch.optim.Adam if cfg.optimizer == "adam" else torch.optim.SGD
        opt = opt_cls(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
        y, tr, va = t["y"], t["train"], t["val"]
        best, best_state = -1.0, None
        if cfg.node_level:
            schedule = self._dp_schedule(tr.numel(), epochs)
        for epoch in range(epochs):
            if cfg.node_level:
                for _ in range(schedule[epoch]):
                    self._dp_step(model, opt, inputs, y, tr, rng, trace, name)
            else:
                model.train()
                if cfg.batch_size is None or cfg.batch_size >= tr.numel():
                    batches = [tr]
                else:
                    perm = torch.randperm(tr.numel(), generator=rng).to(tr.device)
                    batches = list(tr[perm].split(cfg.batch_size))
                for b in batches:
                    opt.zero_grad()
                    F.cross_entropy(model(inputs[b]), y[b]).backward()
                    opt.step()
            acc = _accuracy(model, inputs[va], y[va])
            if acc > best or best_state is None:
                best, best_state = acc, copy.deepcopy(model.state_dict())
        model.load_state_dict(best_state)
        model.eval()

    def _dp_schedule(self, n_train: int, epochs: int) -> list[int]:
        """DP-SGD steps per epoch: the accounted ⌊epochs·N/B⌋ spread evenly (or the loader's ⌈N/B⌉)."""
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        b = cfg.node_batch_size
        if self.bug("poisson-loader-steps"):
            return [max(1, -(-n_train // b))] * epochs
        _, total = dpsgd_schedule(n_train, b, epochs)
        return [(e + 1) * total // epochs - e * total // epochs for e in range(epochs)]

    def _dp_step(self, model: nn.Module, opt: torch.optim.Optimizer, inputs: torch.Tensor, y: torch.Tensor,
                 tr: torch.Tensor, rng: torch.Generator, trace: _Recorder | None, name: str) -> None:
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        n = tr.numel()
        rate = min(1.0, cfg.node_batch_size / n)
        sigma = self._sigma
        std = 0.0 if self.bug("no-noise") else sigma * cfg.max_grad_norm
        picked = poisson_sample(n, rate, rng).to(tr.device)
        batch = tr[picked]
        model.train()
        if batch.numel():
            clipped = clip_rows(_per_example_flat_grads(model, inputs[batch], y[batch]), cfg.max_grad_norm)
        else:
            size = sum(p.numel() for p in model.parameters())
            clipped = torch.zeros(0, size, device=inputs.device)
        canary_in = trace.coin(name, rate) if trace is not None else None
        if canary_in:  # the virtual example's clipped gradient joins the sum
            clipped = torch.cat([clipped, trace.canary.to(clipped)[None]])
        total = noisy_sum(clipped, std, rng)
        if trace is not None and trace.records(name):
            trace.add(name, model, batch, clipped, total, canary_in)
        opt.zero_grad()
        assign_flat_grad(model, total / (rate * n))
        opt.step()

    # ------------------------------------------------------------------ aggregation
    def _private_edges(self, graph: Any, seed: int) -> torch.Tensor:
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        ei = graph.edge_index.to(self.device)
        if cfg.node_level and not self.bug("no-degree-bound"):
            ei = bound_out_degree(ei, graph.num_nodes, cfg.max_degree, seed)
        return ei

    def _pma(self, x0: torch.Tensor, edges: torch.Tensor, std: float, rng: torch.Generator | None
             ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Noisy K-hop aggregation; returns the stack (N × h × (K+1)) and the noisy sums S_1..S_K."""
        n = x0.size(0)
        h = rownorm(x0)
        hs, sums = [h], []
        for _ in range(self.config.hops):  # type: ignore[attr-defined]
            s = sum_aggregate(h, edges, n)
            if rng is not None:
                noise = torch.randn(s.shape, generator=rng, dtype=s.dtype).to(s.device)
                s = s + std * noise
            sums.append(s)
            h = rownorm(s)
            hs.append(h)
        return torch.stack(hs, dim=-1), sums

    # ------------------------------------------------------------------ fit
    batched: ClassVar[bool] = True

    def fit(self, graph: Any, rng: torch.Generator) -> Release:
        """One trial. Edge level: the batched path with one trial (so ``fit`` and :meth:`fit_batch`
        share their code); node level: one DP-SGD run."""
        if self.config.node_level:  # type: ignore[attr-defined]
            return self._fit_one(graph, rng)
        return self._fit_edge(graph, [rng])[0]

    def fit_batch(self, graph: Any, rngs: list[torch.Generator]) -> list[Release]:
        """len(rngs) independent trials on `graph`; trial j uses only rngs[j], drawing from it
        exactly as ``fit(graph, rngs[j])`` does, and its release equals that one.

        Edge level: one PMA over all trials (noise drawn per trial, in fit's order and shape; hop
        1's aggregate of the cached X0 computed once) and, on first use of any classifier view,
        all the trials' classifiers trained together (:class:`ClassifierBatch`). Node level: a
        loop over ``fit`` (each trial's DP-SGD run is its own trace).
        """
        rngs = list(rngs)
        if self.config.node_level:  # type: ignore[attr-defined]
            return [self._fit_one(graph, r) for r in rngs]
        return self._fit_edge(graph, rngs) if rngs else []

    def _noise(self, graph: Any) -> tuple[Claim, float, float]:
        """The claim, the PMA noise std actually added (0 under ``no-noise``) and the claimed one."""
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        claim = self.claim(graph)
        self._sigma = float(claim.details["noise_multiplier"])
        claimed_std = self._sigma * cfg.sensitivity
        return claim, 0.0 if self.bug("no-noise") else claimed_std, claimed_std

    def _fit_one(self, graph: Any, rng: torch.Generator) -> Release:
        """The per-trial path (node level)."""
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        claim, std, claimed_std = self._noise(graph)
        t = self._graph_tensors(graph)
        n, classes = int(graph.num_nodes), int(graph.y.max()) + 1
        trace = self._recorder(graph, rng, claim)

        # 1. encoder (edge-free)
        cached, encoder = self._cached_encoder(graph)
        if not cached:
            with seeded(rng):
                encoder = self._new_encoder(t["x"].size(1), classes)
                if encoder is not None:
                    self._train(encoder, t["x"], t, cfg.em_epochs, rng, trace, "encoder")
        x0 = self._encode(encoder, t["x"])

        # 2. PMA (cached stack)
        bound_seed = int(torch.randint(0, 2**62, (1,), generator=rng).item())
        edges = self._private_edges(graph, bound_seed)
        stack, sums = self._pma(x0, edges, std, rng)

        # 3. classifier on the cached stack, trained now: its DP-SGD steps are in the trace
        cls_rng = child_generator(rng)
        state: dict[str, Any] = {}

        def classifier_fn() -> Any:
            if "classifier" not in state:
                with seeded(cls_rng):
                    model = _Classifier(stack.size(1), cfg, classes).to(self.device)
                    self._train(model, stack, t, cfg.cm_epochs, cls_rng, trace, "classifier")
                model.eval()
                with torch.no_grad():
                    state["posteriors"] = torch.softmax(model(stack), dim=-1).cpu()
                state["classifier"] = model
            return state["classifier"]

        classifier_fn()

        def accuracy() -> dict[str, float]:
            model = classifier_fn()
            return {split: _accuracy(model, stack[t[split]], t["y"][t[split]]) for split in ("train", "val", "test")}

        fresh = self.bug("fresh-inference-noise")
        query_rng = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,), generator=rng).item()))

        def predict(query_graph: Any = None, nodes: Any = None) -> torch.Tensor:
            classifier = classifier_fn()
            if fresh:
                x = t["x"]
                if query_graph is not None and int(query_graph.num_nodes) == n:
                    x = query_graph.x.to(self.device)
                s_new, _ = self._pma(self._encode(encoder, x), edges, std, query_rng)
                with torch.no_grad():
                    probs = torch.softmax(classifier(s_new), dim=-1).cpu()
            else:
                probs = state["posteriors"]
            return probs if nodes is None else probs[torch.as_tensor(nodes, dtype=torch.long)]

        hs = [stack[..., k] for k in range(cfg.hops + 1)]
        # The out-degree bound's sampling seed is internal randomness, never released: where the
        # bound is applied, the auditor's mean uses a fixed public seed and the step is no exact
        # Gaussian LLR (noise_std None: a projection statistic, threshold held out). Conditioning
        # on the run's own seed would test the claim against something no adversary sees.
        bounded = not self.bug("no-degree-bound")
        mechanism = [
            MechanismStep(output=sums[k].detach().cpu(),
                          mean=self._mean_fn(k, hs, encoder, 0 if bounded else bound_seed),
                          noise_std=None if bounded else claimed_std,
                          name=f"hop {k + 1}" + (" (mean with a public degree-bound seed)" if bounded else ""))
            for k in range(cfg.hops)
        ]
        def weights() -> dict[str, torch.Tensor]:
            out = {f"classifier.{k}": v.detach().cpu() for k, v in classifier_fn().state_dict().items()}
            if encoder is not None:
                out.update({f"encoder.{k}": v.detach().cpu() for k, v in encoder.state_dict().items()})
            return out

        info = {
            "accuracy": Lazy(accuracy), "noise_multiplier": self._sigma, "noise_std": claimed_std,
            "fresh_noise_per_query": fresh, "unit": claim.unit, "stack_shape": tuple(stack.shape),
            "encoder_cached": cached, "private_edges": int(edges.size(1)),
            "graph_edges": int(graph.edge_index.size(1)), "trace_module": cfg.trace_module,
        }
        return Release(api=predict, weights=Lazy(weights), mechanism=mechanism, trace=trace.trace, info=info)

    def takes_gradient_canary(self, graph: Any = None) -> bool:
        """At node level with one traced module (``trace_module`` encoder or classifier)."""
        return self.config.node_level and self.config.trace_module != "all"  # type: ignore[attr-defined]

    def dimension(self, graph: Any) -> int:
        """Parameters of the traced DP-SGD module: the length of a gradient canary (node level,
        ``trace_module`` encoder or classifier)."""
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        if not cfg.node_level or cfg.trace_module == "all":
            raise ValueError("a gradient canary joins one of GAP's DP-SGD modules: set unit=node and "
                             "trace_module=encoder or trace_module=classifier")
        classes, d_in = int(graph.y.max()) + 1, int(graph.x.size(1))
        with seeded(torch.Generator().manual_seed(0)):  # initialisation only; the global RNG is restored
            if cfg.trace_module == "encoder":
                model: nn.Module = _Encoder(d_in, cfg, classes)
            else:
                model = _Classifier(cfg.hidden_dim if cfg.encoder_layers > 0 else d_in, cfg, classes)
        return sum(p.numel() for p in model.parameters())

    def _recorder(self, graph: Any, rng: torch.Generator, claim: Claim) -> _Recorder:
        """The trace of one node-level fit, with the graph's gradient canary (if any) and its coins."""
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        module, det = cfg.trace_module, claim.details
        canary, canary_node = canary_from(graph)
        if canary_node is not None:
            raise ValueError("GAP takes a virtual gradient canary (canary_gradient), not a canary node")
        if canary is not None:
            d = self.dimension(graph)
            canary = torch.as_tensor(canary, dtype=torch.float32).to(self.device)
            if tuple(canary.shape) != (d,):
                raise ValueError(f"canary_gradient must have shape ({d},) (the {module}'s parameters), "
                                 f"got {tuple(canary.shape)}")
        n_train = int(det["num_train"])
        rate = min(1.0, cfg.node_batch_size / n_train) if n_train else 0.0
        accounted = det["steps_encoder"] + det["steps_classifier"] if module == "all" else det[f"steps_{module}"]
        std = 0.0 if self.bug("no-noise") else self._sigma * cfg.max_grad_norm
        trace = HeterPoissonTrace(noise="gaussian", noise_std=std, clip_norm=cfg.max_grad_norm, sampling_rate=rate,
                                  expected_batch=rate * n_train, accounted_steps=int(accounted))
        return _Recorder(trace, module, canary, None if module == "all" else side_generator(rng))

    def _fit_edge(self, graph: Any, rngs: list[torch.Generator]) -> list[Release]:
        """Edge-level trials, one per generator, computed together (see :meth:`fit_batch`)."""
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        claim, std, claimed_std = self._noise(graph)
        t = self._graph_tensors(graph)
        n, classes, b = int(graph.num_nodes), int(graph.y.max()) + 1, len(rngs)

        # 1. encoder (edge-free): the prepared one, or each trial's own, drawn from its generator
        cached, encoder = self._cached_encoder(graph)
        if cached:
            encoders = [encoder] * b
            h0 = self._embeddings(encoder, graph.x)  # N × h, the same for every trial
        else:
            encoders = []
            for r in rngs:
                with seeded(r):
                    enc = self._new_encoder(t["x"].size(1), classes)
                    if enc is not None:
                        self._train(enc, t["x"], t, cfg.em_epochs, r, None, "encoder")
                encoders.append(enc)
            h0 = [rownorm(self._encode(e, t["x"])) for e in encoders]

        # 2. PMA, trial by trial (each generator draws its bound seed, then one N × h noise per
        # hop, as fit does); what all trials share is computed once: A_graphᵀ and, with the
        # prepared encoder, hop 1's aggregate Aᵀ·H0
        bound_seeds = [int(torch.randint(0, 2**62, (1,), generator=r).item()) for r in rngs]
        edges = self._private_edges(graph, bound_seeds[0])  # edge level: the graph's own edges
        aggregate = self._aggregator(graph, edges)
        first = aggregate(h0) if cached else None
        trial_hs, trial_sums = [], []
        for j, r in enumerate(rngs):
            h = h0 if cached else h0[j]
            hs, sums = [h], []
            for k in range(cfg.hops):
                agg = first if k == 0 and cached else aggregate(h)
                noise = torch.randn(agg.shape, generator=r, dtype=agg.dtype).to(agg.device)
                s_k = agg + std * noise
                sums.append(s_k.detach().cpu())
                h = rownorm(s_k)
                hs.append(h)
            trial_hs.append(hs)
            trial_sums.append(sums)

        # 3. the classifiers: trained together on first use of any trial's classifier view
        cls_rngs = [child_generator(r) for r in rngs]
        query_seeds = [int(torch.randint(0, 2**62, (1,), generator=r).item()) for r in rngs]
        batch = ClassifierBatch(self, trial_hs, t, classes, cls_rngs)
        mean_key = ("gap hop 1", self._prepared["token"]) if cached else None
        return [self._edge_release(j, batch, trial_hs[j], trial_sums[j], encoders[j], bound_seeds[j],
                                   query_seeds[j], mean_key, graph, t, edges, std, claimed_std, claim, cached)
                for j in range(b)]

    def _edge_release(self, j: int, batch: ClassifierBatch, hs: list[torch.Tensor], sums: list[torch.Tensor],
                      encoder: _Encoder | None, bound_seed: int, query_seed: int, mean_key: Any, graph: Any,
                      t: dict[str, torch.Tensor], edges: torch.Tensor, std: float, claimed_std: float,
                      claim: Claim, cached: bool) -> Release:
        cfg: GAPConfig = self.config  # type: ignore[assignment]
        n = int(graph.num_nodes)
        fresh = self.bug("fresh-inference-noise")
        query_rng = torch.Generator().manual_seed(query_seed)
        memo: dict[str, torch.Tensor] = {}

        def predict(query_graph: Any = None, nodes: Any = None) -> torch.Tensor:
            if fresh:
                batch.ensure()
                x = t["x"]
                if query_graph is not None and int(query_graph.num_nodes) == n:
                    x = query_graph.x.to(self.device)
                s_new, _ = self._pma(self._encode(encoder, x), edges, std, query_rng)
                probs = torch.softmax(batch.forward(j, s_new), dim=-1).cpu()
            else:
                if "posteriors" not in memo:
                    memo["posteriors"] = batch.posteriors(j)
                probs = memo["posteriors"]
            return probs if nodes is None else probs[torch.as_tensor(nodes, dtype=torch.long)]

        def weights() -> dict[str, torch.Tensor]:
            out = {f"classifier.{k}": v for k, v in batch.state_dict(j).items()}
            if encoder is not None:
                out.update({f"encoder.{k}": v.detach().cpu() for k, v in encoder.state_dict().items()})
            return out

        mechanism = [
            MechanismStep(output=sums[k], mean=self._mean_fn(k, hs, encoder, bound_seed), noise_std=claimed_std,
                          name=f"hop {k + 1}", mean_key=mean_key if k == 0 else None)
            for k in range(cfg.hops)
        ]
        info = {
            "accuracy": Lazy(lambda: batch.accuracy(j)), "noise_multiplier": self._sigma,
            "noise_std": claimed_std, "fresh_noise_per_query": fresh, "unit": claim.unit,
            "stack_shape": (n, hs[0].size(-1), cfg.hops + 1), "encoder_cached": cached,
            "private_edges": int(edges.size(1)), "graph_edges": int(graph.edge_index.size(1)),
        }
        return Release(api=predict, weights=Lazy(weights), mechanism=mechanism, trace=None, info=info)

    def _mean_fn(self, k: int, hs: list[torch.Tensor], encoder: _Encoder | None, bound_seed: int):
        """mean(graph) of hop k+1: A_graphᵀ · (released H_k), H_0 from the released encoder."""

        def mean(graph: Any) -> torch.Tensor:
            n = int(graph.num_nodes)
            aggregate = self._aggregator(graph, self._private_edges(graph, bound_seed))
            if k == 0:
                prev = self._embeddings(encoder, graph.x)
            else:
                released = hs[k]
                prev = released[:n]
                if n > released.size(0):  # rows the release lacks: that graph's noiseless embedding
                    h = self._embeddings(encoder, graph.x)
                    for _ in range(k):
                        h = rownorm(aggregate(h))
                    prev = torch.cat([prev, h[released.size(0):]], 0)
            return aggregate(prev).cpu()

        return mean

    def noiseless(self, graph: Any) -> torch.Tensor | None:
        """Noiseless hop sums S_1..S_K (K × N × h) with the prepared (or a seed-0, non-private) encoder.

        For canary search only; under NDP the encoder here is a non-private proxy.
        """
        cached, encoder = self._cached_encoder(graph)
        if not cached:
            if not self.config.node_level:  # type: ignore[attr-defined]
                self.prepare(graph)
                _, encoder = self._cached_encoder(graph)
            else:
                proxy = GAP(self.config, unit="edge", trace_module="all")
                proxy.prepare(graph)
                _, encoder = proxy._cached_encoder(graph)
        x0 = self._encode(encoder, graph.x.to(self.device))
        _, sums = self._pma(x0, self._private_edges(graph, 0), 0.0, None)
        return torch.stack(sums, 0).cpu()
