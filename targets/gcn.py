"""A plain, non-private 2-layer GCN: the reference point every edge-level attack is measured on.

Model (Kipf & Welling 2017): ``Z = Â · dropout(ReLU(Â X W1 + b1)) W2 + b2`` with the symmetric
normalisation ``Â = (D + I)^-½ (A + I) (D + I)^-½`` (``normalization="aug"``, PyG's ``GCNConv``) or
LinkTeller's ``FirstOrderGCN`` ``Â = I + D^-½ A D^-½`` (``normalization="first-order"``). Trained
full-batch with Adam and cross-entropy on the training nodes, keeping the parameters of the epoch with
the best validation accuracy. No noise anywhere: :meth:`NonPrivateGCN.claim` says ε = ∞.

Inference API (specs/linkteller.md §1, the vertical split): the server (Alice) holds the private
edges; the client (Bob) supplies features. ``predict(query_graph=None, nodes=None)``:

* ``query_graph=None``: the trained model on the training graph;
* a query graph with as many nodes as the training graph (transductive): the model runs on the
  query's **features** and the server's **private training edges** (the query's own edges are ignored);
* a query graph of another size (inductive): the model runs on the query graph (its features and
  edges, which then stand for the server's inference graph).

Posteriors are softmax outputs, computed in float64 on CPU so that finite differences of tiny feature
perturbations are not lost to float32 rounding. The API is deterministic (``fresh_noise_per_query``
is False); ``Release.info["query_count"]["queries"]`` counts calls that carried a query graph.

Batched trials: ``fit_batch(graph, rngs)`` (and ``fit_graphs``, one graph per run, for the
input-perturbation targets) trains K runs stacked (:mod:`targets.common.stacked_gcn`); run k's release is
bitwise ``fit(graph, rngs[k])`` on CPU, and ``fit`` is the stack of one. The inference copy uses CSR
products. The model, epochs, optimiser and kept-epoch rule are those above; the floats of a run are
not those of the earlier module loop (dropout masks drawn from random words, CSR summation order,
the gradient written out: see :mod:`targets.common.stacked_gcn`).

Views: ``api`` and ``weights`` (``conv1.weight``, ``conv1.bias``, ``conv2.weight``, ``conv2.bias``).
Shapes: ``x`` N × d; hidden N × ``hidden``; posteriors n_query × classes.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from targets.common import stacked_gcn, stacked_mlp
from targets.base import Claim, Level, Unstated, Release, Target, TargetConfig, child_generator

DEFAULT_DELTA = 1e-5


@dataclass
class GCNConfig(TargetConfig):
    """Non-private GCN hyperparameters (LinkTeller's defaults, specs/linkteller.md §6).

    ``epsilon`` is accepted (the CLI always passes one) and ignored: the claim is ε = ∞.

    Args:
        unit (str): ``edge`` or ``node``, what the reference claim would protect (there is no protection here).
        hidden (int): hidden width of the 2-layer GCN.
        epochs (int): full-batch Adam epochs; the best-validation-accuracy epoch is kept.
        lr (float): Adam learning rate.
        dropout (float): dropout rate on the input of both layers.
        weight_decay (float): Adam L2 penalty.
        normalization (str): ``aug`` ((D+I)^-½(A+I)(D+I)^-½, GCNConv) or ``first-order`` (I + D^-½AD^-½).
    """

    unit: str = "edge"
    hidden: int = 16
    epochs: int = 200
    lr: float = 0.01
    dropout: float = 0.5
    weight_decay: float = 5e-4
    normalization: str = "aug"

    def __post_init__(self) -> None:
        super().__post_init__()
        checks = [
            ("unit", self.unit in ("edge", "node"), "'edge' or 'node'"),
            ("hidden", isinstance(self.hidden, int) and self.hidden >= 1, "an int >= 1"),
            ("epochs", isinstance(self.epochs, int) and self.epochs >= 1, "an int >= 1"),
            ("lr", self.lr > 0, "a float > 0"),
            ("dropout", 0 <= self.dropout < 1, "a float in [0, 1)"),
            ("weight_decay", self.weight_decay >= 0, "a float >= 0"),
            ("normalization", self.normalization in ("aug", "first-order"), "'aug' or 'first-order'"),
        ]
        self.require_all(checks)


def csr(adj: torch.Tensor) -> torch.Tensor:
    """A coalesced COO matrix as CSR (its products are ~10× faster than COO's on CPU)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return adj.to_sparse_csr()


def normalized_adjacency(edge_index: torch.Tensor, num_nodes: int, kind: str = "aug",
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Â as a sparse (COO, coalesced) N × N tensor; ``edge_index`` holds both directions, no self-loops."""
    row, col = edge_index[0].long(), edge_index[1].long()
    ones = torch.ones(row.numel(), dtype=dtype)
    deg = torch.zeros(num_nodes, dtype=dtype).index_add_(0, row, ones)
    loops = torch.arange(num_nodes)
    if kind == "aug":
        inv = (deg + 1).pow(-0.5)
        rows = torch.cat([row, loops])
        cols = torch.cat([col, loops])
        vals = inv[rows] * inv[cols]
    else:  # first-order: I + D^-1/2 A D^-1/2 (isolated nodes keep only the identity)
        inv = torch.where(deg > 0, deg.clamp_min(1).pow(-0.5), torch.zeros_like(deg))
        rows = torch.cat([row, loops])
        cols = torch.cat([col, loops])
        vals = torch.cat([inv[row] * inv[col], torch.ones(num_nodes, dtype=dtype)])
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, (num_nodes, num_nodes),
                                   check_invariants=False).coalesce()


class GCN(nn.Module):
    """Two graph convolutions with a ReLU between them; ``adj`` is the normalised Â."""

    def __init__(self, features: int, hidden: int, classes: int, dropout: float) -> None:
        super().__init__()
        self.conv1 = nn.Linear(features, hidden)
        self.conv2 = nn.Linear(hidden, classes)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        if x.is_sparse:  # sparse features (bag of words): dropout on the stored entries, as Kipf's code
            x = x.coalesce()
            vals = F.dropout(x.values(), self.dropout, self.training)
            x = torch.sparse_coo_tensor(x.indices(), vals, x.shape, check_invariants=False)
            xw = torch.sparse.mm(x, self.conv1.weight.t())
        else:
            xw = F.dropout(x, self.dropout, self.training) @ self.conv1.weight.t()
        h = F.relu(torch.sparse.mm(adj, xw) + self.conv1.bias)
        h = F.dropout(h, self.dropout, self.training)
        return torch.sparse.mm(adj, h @ self.conv2.weight.t()) + self.conv2.bias


def _accuracy(logits: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> float:
    if not bool(mask.any()):
        return float("nan")
    return float((logits[mask].argmax(1) == y[mask]).float().mean())


class NonPrivateGCN(Target[GCNConfig]):
    """A non-private 2-layer GCN (ε = ∞); see the module docstring."""

    name: ClassVar[str] = "gcn"
    #: reference-machine seconds (benchmarks/calibrate_costs.py, default config on csbm)
    trial_costs = {Level.API: 0.07, Level.WEIGHTS: 0.07}
    setup_seconds = 0.5
    Config: ClassVar[type[TargetConfig]] = GCNConfig
    levels: tuple[Level, ...] = (Level.API, Level.WEIGHTS)
    batched: ClassVar[bool] = True
    bugs: ClassVar[dict[str, str]] = {}
    #: (dataset, setting, ε) → test accuracy %: Kipf & Welling 2017 (GCN, Cora public split).
    published_accuracy: ClassVar[dict[tuple[str, str, float], float]] = {("cora", "none", math.inf): 81.5}

    def claim(self, graph: Any) -> Claim:
        cfg = self.config
        delta = cfg.delta if cfg.delta is not None else DEFAULT_DELTA
        return Claim(epsilon=math.inf, delta=delta, accountant="none (non-private)", unit=cfg.unit,
                     composition=Unstated("no DP mechanism: the claim is ε = ∞"), notes={"noise_multiplier": 0.0})

    def fit(self, graph: Any, rng: torch.Generator) -> Release:
        return self.fit_graphs([graph], [rng])[0]

    def fit_batch(self, graph: Any, rngs: list[torch.Generator]) -> list[Release]:
        """``len(rngs)`` runs on `graph`, trained stacked (:mod:`targets.common.stacked_gcn`); run k draws
        only from ``rngs[k]`` and releases bitwise what ``fit(graph, rngs[k])`` does on CPU."""
        return self.fit_graphs([graph] * len(rngs), rngs)

    def fit_graphs(self, graphs: list[Any], rngs: list[torch.Generator]) -> list[Release]:
        """Run k trained on ``graphs[k]``'s edges (the graphs share nodes, features, labels and
        masks: those of ``graphs[0]``), with randomness from ``rngs[k]`` only."""
        cfg = self.config
        graph = graphs[0]
        n = int(graph.num_nodes)
        x = graph.x.float().cpu()
        if float((x != 0).float().mean()) < 0.1:  # mostly-zero features: train on a sparse copy (faster)
            x = x.to_sparse().coalesce()
        select = graph.val_mask if bool(graph.val_mask.any()) else graph.train_mask
        exact: dict[int, torch.Tensor] = {}  # Â in float64, once per distinct graph
        for g in graphs:
            if id(g) not in exact:
                exact[id(g)] = normalized_adjacency(g.edge_index.cpu(), n, cfg.normalization, torch.float64)
        # training's Â: the float64 one rounded (the same indices, no second coalesce)
        single = {key: torch.sparse_coo_tensor(a.indices(), a.values().float(), a.shape, is_coalesced=True,
                                               check_invariants=False)
                  for key, a in exact.items()}
        adjs = [single[id(g)] for g in graphs]
        inference = {key: csr(a) for key, a in exact.items()}
        run_bytes = stacked_gcn.run_bytes(n, x.size(1), cfg.hidden, max(a._nnz() for a in adjs),
                                          x._nnz() if x.is_sparse else None)

        def fit_stack(idx: list[int]) -> list[Release]:
            # each run's generator seeds its own torch generator, as seeded(rng) seeds the global one
            gens = [child_generator(rngs[i]) for i in idx]
            rows, best, lay = stacked_gcn.train(
                x, graph.y.cpu(), graph.train_mask.cpu(), select.cpu(), [adjs[i] for i in idx], gens,
                hidden=cfg.hidden, epochs=cfg.epochs, lr=cfg.lr, dropout=cfg.dropout,
                weight_decay=cfg.weight_decay, device=self.device)
            return [self._release(graphs[i], inference[id(graphs[i])], lay.weights(rows[j]), best[j])
                    for j, i in enumerate(idx)]

        return stacked_mlp.fit_in_stacks(list(range(len(rngs))), run_bytes, fit_stack)

    def _release(self, graph: Any, adj64: torch.Tensor, weights: dict[str, torch.Tensor], best: float) -> Release:
        """One run's release: the kept weights, the float64 inference copy (on `adj64`, its graph's Â as
        CSR) behind the API."""
        cfg = self.config
        n = int(graph.num_nodes)
        infer = GCN(graph.x.size(1), cfg.hidden, int(graph.y.max()) + 1, cfg.dropout).double().eval()
        infer.load_state_dict({k: v.double() for k, v in weights.items()})
        x64 = graph.x.double().cpu()
        with torch.no_grad():
            base = torch.softmax(infer(x64, adj64), dim=1)
        accuracy = {s: _accuracy(base, graph.y.cpu(), getattr(graph, f"{s}_mask").cpu())
                    for s in ("train", "val", "test")}
        state: dict[str, Any] = {"queries": 0}

        def predict(query_graph: Any = None, nodes: Any = None) -> torch.Tensor:
            """Softmax posteriors (float64, CPU); a same-size query runs on its features and the
            private training edges, another-size query on its own features and edges."""
            if query_graph is None or query_graph is graph:
                probs = base
            else:
                state["queries"] += 1
                qx = query_graph.x.double().cpu()
                if int(query_graph.num_nodes) == n:
                    q_adj = adj64
                else:
                    q_adj = csr(normalized_adjacency(query_graph.edge_index.cpu(), int(query_graph.num_nodes),
                                                     cfg.normalization, torch.float64))
                with torch.no_grad():
                    probs = torch.softmax(infer(qx, q_adj), dim=1)
            return probs if nodes is None else probs[torch.as_tensor(nodes, dtype=torch.long)]

        info = {"accuracy": accuracy, "fresh_noise_per_query": False, "query_count": state,
                "best_val_accuracy": best, "inference": "query features + private training edges"}
        return Release(api=predict, weights=weights, info=info)
