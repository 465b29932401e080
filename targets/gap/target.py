"""The GAP target: fit and release views (see :mod:`targets.gap`)."""
from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from graphs.ops import drop_isolated_with_notice, fingerprint
from targets.base import (Claim, Lazy, Level, MechanismStep, Release, Target, TargetConfig, child_generator,
                          noise_generator, seeded)
from targets.common.buffer_pool import BufferPool
from targets.common.runtime import shuffled_batches
from targets.common.sparse import as_ordered_coo, ordered_spmm
from targets.common.dpsgd import assign_flat_grad, canary_from, clip_rows, noisy_sum, poisson_sample
from targets.gap.accountant import dpsgd_schedule, gap_claim
from targets.gap.config import GAPConfig
from targets.gap.model import (_accuracy, _ByIdentity, _Classifier, _Encoder, _per_example_flat_grads,
                               aggregate_together, bound_out_degree, csr_rows, differing_rows, narrow_columns,
                               rownorm, sum_aggregate, transposed_adjacency, unit_rows)
from targets.gap.recorder import _Recorder, side_generator
from targets.gap.stacked import ClassifierBatch
from targets.common.trace import DPSGDTrace
from targets.gap import probe
from targets.gap.catalogue import CATALOGUE
from targets.common.catalogue import Entry

#: what the edge-free encoder reads of a graph: :meth:`GAP.prepare`'s cache key (by content)
_ENCODER_INPUTS = ("x", "y", "train_mask", "val_mask")
#: :meth:`GAP.prepare`'s results in this process, by (config, device, threads, inputs' fingerprint)
_PREPARED: dict[tuple, dict[str, Any]] = {}
_PREPARED_SIZE = 4
#: the fingerprint of encoder inputs already hashed (the very same tensors)
_input_fingerprints = _ByIdentity(4)


# ---------------------------------------------------------------------------------------------
# target
# ---------------------------------------------------------------------------------------------
class GAP(Target[GAPConfig]):
    """GAP (aggregation perturbation) at edge or node level; see :mod:`targets.gap`."""

    name: ClassVar[str] = "gap"
    #: reference-machine seconds (benchmarks/calibrate_costs.py, default config on csbm)
    trial_costs = {Level.MECHANISM: 0.001, Level.API: 0.08, Level.WEIGHTS: 0.08}
    setup_seconds = 1.0
    Config: ClassVar[type[TargetConfig]] = GAPConfig
    #: the views some configuration offers (``trace``: node level only); an instance's ``levels``
    #: are its unit's
    levels: tuple[Level, ...] = (Level.API, Level.WEIGHTS, Level.MECHANISM, Level.TRACE)
    bugs: ClassVar[dict[str, str]] = {
        "no-noise": "PMA (and, at node level, DP-SGD) adds no noise while claiming the calibrated ε",
        "fresh-inference-noise": "every api query re-runs encoder + PMA over the private graph with "
                                 "fresh noise, unaccounted (GAP's predict on a new Data object, spec §3.5/P4)",
        "poisson-loader-steps": "node level: DP-SGD runs epochs·⌈N/B⌉ Poisson steps (the reference "
                                "loader's loop) while the accountant charges ⌊epochs·N/B⌋",
        "no-degree-bound": "node level: the out-degree is not bounded to D although PMA charges √D",
    }
    #: this target's entries in the bug catalogue (``python -m audit regress``)
    catalogue: ClassVar[tuple[Entry, ...]] = CATALOGUE
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

    #: node level: the encoder trains with DP-SGD in every trial (measured with hops 1-2, 1-8 epochs)
    node_trial_costs = {Level.MECHANISM: 0.12, Level.TRACE: 0.12, Level.API: 0.15, Level.WEIGHTS: 0.15}

    def trial_cost(self, level: str) -> float:
        if self.config.unit == "node":
            return self.node_trial_costs[level]
        return super().trial_cost(level)

    def __init__(self, config: TargetConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        if not self.config.node_level:
            self.levels = (Level.API, Level.WEIGHTS, Level.MECHANISM)
        self._prepared: dict[str, Any] | None = None
        self._adjacencies = _ByIdentity(8)  # Aᵀ per graph (edge level), CSR
        self._coo_adjacencies = _ByIdentity(8)  # the same Aᵀ as COO, for ordered_spmm
        self._supports = _ByIdentity(4)  # rows where two graphs' Aᵀ differ
        self._row_blocks = _ByIdentity(8)  # those rows of Aᵀ
        self._first_hops = _ByIdentity(4)  # Aᵀ·H0 per graph with the prepared encoder (edge level)
        self._buffers = BufferPool()  # the edge-level batch's per-trial N × h tensors

    def preprocess(self, graph: Any) -> tuple[Any, str | None]:
        """The paper's pre-processing (GAP's loader; spec §5): isolated nodes dropped, with a notice."""
        return drop_isolated_with_notice(graph, "gap")

    # ------------------------------------------------------------------ accounting
    def claim(self, graph: Any) -> Claim:
        """The accountant's claim; it reads the config and one count of `graph` (training nodes
        at node level, directed edges at edge level), and is computed once per pair
        (:func:`~targets.gap.accountant.gap_claim`)."""
        cfg = self.config
        count = int(graph.train_mask.sum()) if cfg.node_level else int(graph.edge_index.size(1))
        return gap_claim(cfg, count)

    # ------------------------------------------------------------------ encoder
    def _graph_tensors(self, graph: Any) -> dict[str, torch.Tensor]:
        dev = self.device
        return {"x": graph.x.to(dev), "y": graph.y.to(dev),
                "train": graph.train_mask.nonzero().view(-1).to(dev),
                "val": graph.val_mask.nonzero().view(-1).to(dev),
                "test": graph.test_mask.nonzero().view(-1).to(dev)}

    def _new_encoder(self, d_in: int, classes: int) -> _Encoder | None:
        cfg = self.config
        return _Encoder(d_in, cfg, classes).to(self.device) if cfg.encoder_layers > 0 else None

    def _encode(self, encoder: _Encoder | None, x: torch.Tensor) -> torch.Tensor:
        if encoder is None:
            return rownorm(x)
        encoder.eval()
        with torch.no_grad():
            return encoder.encode(x)

    @staticmethod
    def _encoder_inputs(graph: Any) -> tuple[torch.Tensor, ...]:
        """The tensors the edge-free encoder reads (its cache is keyed on their content)."""
        return tuple(getattr(graph, key) for key in _ENCODER_INPUTS)

    def prepare(self, graph: Any) -> None:
        """Cache the edge-free encoder and its embeddings X0 (EDP only: they never read edges;
        no-op at node level).

        The encoder is a function of (config, device, threads, encoder inputs) alone (seed 0), so
        it is kept per process (:data:`_PREPARED`): later chunks of a run in the same worker, and
        the canary search before them, reuse it instead of training it again.
        """
        cfg = self.config
        if cfg.node_level:
            return
        key = _input_fingerprints.get(self._encoder_inputs(graph),
                                      lambda: fingerprint(graph, keys=_ENCODER_INPUTS))
        cache_key = (repr(cfg), str(self.device), torch.get_num_threads(), key)
        if cache_key not in _PREPARED:
            _PREPARED[cache_key] = self._prepare(graph, key)
            while len(_PREPARED) > _PREPARED_SIZE:
                _PREPARED.pop(next(iter(_PREPARED)))
        self._prepared = _PREPARED[cache_key]
        self._embeddings(self._prepared["encoder"], graph.x)

    def _prepare(self, graph: Any, key: str) -> dict[str, Any]:
        """Train the edge-free encoder (seed 0) on `graph`; what :meth:`prepare` caches."""
        cfg = self.config
        rng = torch.Generator().manual_seed(0)
        t = self._graph_tensors(graph)
        classes = int(graph.y.max()) + 1
        with seeded(rng):
            encoder = self._new_encoder(t["x"].size(1), classes)
            if encoder is not None:
                self._train(encoder, t["x"], t, cfg.em_epochs, rng, trace=None, name="encoder")
        return {"key": key, "encoder": encoder, "seen": _ByIdentity(), "embeddings": _ByIdentity(4),
                "token": object()}

    def cached_work(self) -> str | None:
        """What :meth:`prepare` computes once per worker and every trial reuses."""
        if self.config.node_level:
            return None
        return ("edge-free encoder trained once per worker, with its node embeddings X0 "
                "(depend on features, labels and masks only, never on edges)")

    def step_maps(self, graph: Any) -> list[Any]:
        return probe.step_maps(self)

    def takes_witness(self) -> bool:
        return True

    @classmethod
    def witness_plan(cls, doc: dict[str, Any], params: dict[str, str]) -> Any:
        return probe.witness_plan(doc, params)

    def _cached_encoder(self, graph: Any) -> tuple[bool, _Encoder | None]:
        if self._prepared is None or self.config.node_level:
            return False, None
        key = self._encoder_inputs(graph)

        def same() -> bool:
            return _input_fingerprints.get(key, lambda: fingerprint(graph, keys=_ENCODER_INPUTS)) == self._prepared["key"]

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
        if self.config.node_level:
            return lambda h: sum_aggregate(h, edges, n)
        adj = self._coo_adjacencies.get((graph.edge_index,), lambda: as_ordered_coo(self._adjacencies.get(
            (graph.edge_index,), lambda: transposed_adjacency(edges, n))))

        def aggregate(h: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
            return ordered_spmm(adj, h, out=out)  # the same floats at any batch width

        return aggregate

    # ------------------------------------------------------------------ training
    def _train(self, model: nn.Module, inputs: torch.Tensor, t: dict[str, torch.Tensor], epochs: int,
               rng: torch.Generator, trace: _Recorder | None, name: str, dp_std: float = 0.0) -> None:
        """Train `model` on the training rows; keep the best-validation-accuracy checkpoint.

        Edge level: ordinary (Adam) training, full batch unless ``batch_size`` is set. Node level:
        DP-SGD with Poisson sampling, per-example clipping and Gaussian noise of std `dp_std` (σC
        with the one shared noise multiplier σ) on the clipped sums.
        """
        cfg = self.config
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
                    self._dp_step(model, opt, inputs, y, tr, rng, trace, name, dp_std)
            else:
                model.train()
                if cfg.batch_size is None or cfg.batch_size >= tr.numel():
                    batches = [tr]
                else:
                    batches = shuffled_batches(tr, cfg.batch_size, rng)
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
        cfg = self.config
        b = cfg.node_batch_size
        if self.bug("poisson-loader-steps"):
            return [max(1, -(-n_train // b))] * epochs
        _, total = dpsgd_schedule(n_train, b, epochs)
        return [(e + 1) * total // epochs - e * total // epochs for e in range(epochs)]

    def _dp_step(self, model: nn.Module, opt: torch.optim.Optimizer, inputs: torch.Tensor, y: torch.Tensor,
                 tr: torch.Tensor, rng: torch.Generator, trace: _Recorder | None, name: str, std: float) -> None:
        """One DP-SGD step: Poisson batch, clipped per-example gradients, N(0, std²) on their sum."""
        cfg = self.config
        n = tr.numel()
        rate = min(1.0, cfg.node_batch_size / n)
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
        cfg = self.config
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
        rng = noise_generator(rng, h.device) if rng is not None else None
        for _ in range(self.config.hops):
            s = sum_aggregate(h, edges, n)
            if rng is not None:
                noise = torch.randn(s.shape, generator=rng, dtype=s.dtype, device=s.device)
                s = s + std * noise
            sums.append(s)
            h = rownorm(s)
            hs.append(h)
        return torch.stack(hs, dim=-1), sums

    # ------------------------------------------------------------------ fit
    batched: ClassVar[bool] = True
    # the mechanism view's automatic batch: its hop products run over the whole batch side by side, and a
    # wider product amortises each edge's random row read (10⁶ nodes: 1.79× the draw floor at 32 trials, 2.02×
    # at 16; benchmarks/gap_1e6_audit.md); the memory plan lowers it where the free memory is short
    auto_batch: ClassVar[int] = 32

    def fit(self, graph: Any, rng: torch.Generator) -> Release:
        """One trial. Edge level: the batched path with one trial (so ``fit`` and :meth:`fit_batch`
        share their code); node level: one DP-SGD run."""
        if self.config.node_level:
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
        if self.config.node_level:
            return [self._fit_one(graph, r) for r in rngs]
        return self._fit_edge(graph, rngs) if rngs else []

    def _noise(self, graph: Any) -> tuple[Claim, float, float, float, float]:
        """The claim, its noise multiplier σ, the PMA noise std actually added (0 under
        ``no-noise``), the claimed one, and the DP-SGD noise std actually added (node level)."""
        cfg = self.config
        claim = self.claim(graph)
        sigma = claim.noise_multiplier
        claimed_std = sigma * cfg.sensitivity
        dp_std = 0.0 if self.bug("no-noise") else sigma * cfg.max_grad_norm
        return claim, sigma, 0.0 if self.bug("no-noise") else claimed_std, claimed_std, dp_std

    def _fit_one(self, graph: Any, rng: torch.Generator) -> Release:
        """The per-trial path (node level)."""
        cfg = self.config
        claim, sigma, std, claimed_std, dp_std = self._noise(graph)
        t = self._graph_tensors(graph)
        n, classes = int(graph.num_nodes), int(graph.y.max()) + 1
        trace = self._recorder(graph, rng, claim, dp_std)

        # 1. encoder (edge-free)
        cached, encoder = self._cached_encoder(graph)
        if not cached:
            with seeded(rng):
                encoder = self._new_encoder(t["x"].size(1), classes)
                if encoder is not None:
                    self._train(encoder, t["x"], t, cfg.em_epochs, rng, trace, "encoder", dp_std)
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
                    self._train(model, stack, t, cfg.cm_epochs, cls_rng, trace, "classifier", dp_std)
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
        query_rng = child_generator(rng)

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
            MechanismStep(output=sums[k].detach(),
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
            "accuracy": Lazy(accuracy), "noise_multiplier": sigma, "noise_std": claimed_std,
            "fresh_noise_per_query": fresh, "unit": claim.unit_text, "stack_shape": tuple(stack.shape),
            "encoder_cached": cached, "private_edges": int(edges.size(1)),
            "graph_edges": int(graph.edge_index.size(1)), "trace_module": cfg.trace_module,
        }
        return Release(api=predict, weights=Lazy(weights), mechanism=mechanism, trace=trace.trace, info=info)

    def takes_gradient_canary(self, graph: Any = None) -> bool:
        """At node level with one traced module (``trace_module`` encoder or classifier)."""
        return self.config.node_level and self.config.trace_module != "all"

    def dimension(self, graph: Any) -> int:
        """Parameters of the traced DP-SGD module: the length of a gradient canary (node level,
        ``trace_module`` encoder or classifier)."""
        cfg = self.config
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

    def _recorder(self, graph: Any, rng: torch.Generator, claim: Claim, std: float) -> _Recorder:
        """The trace of one node-level fit, with the graph's gradient canary (if any) and its coins."""
        cfg = self.config
        module, note = cfg.trace_module, claim.note
        canary, canary_node = canary_from(graph)
        if canary_node is not None:
            raise ValueError("GAP takes a virtual gradient canary (canary_gradient), not a canary node")
        if canary is not None:
            d = self.dimension(graph)
            canary = torch.as_tensor(canary, dtype=torch.float32).to(self.device)
            if tuple(canary.shape) != (d,):
                raise ValueError(f"canary_gradient must have shape ({d},) (the {module}'s parameters), "
                                 f"got {tuple(canary.shape)}")
        n_train = int(note("num_train"))
        rate = min(1.0, cfg.node_batch_size / n_train) if n_train else 0.0
        accounted = note("steps_encoder") + note("steps_classifier") if module == "all" else note(f"steps_{module}")
        trace = DPSGDTrace(noise="gaussian", noise_std=std, clip_norm=cfg.max_grad_norm, sampling_rate=rate,
                                  expected_batch=rate * n_train, accounted_steps=int(accounted))
        return _Recorder(trace, module, canary, None if module == "all" else side_generator(rng))

    def _fit_edge(self, graph: Any, rngs: list[torch.Generator]) -> list[Release]:
        """Edge-level trials, one per generator, computed together (see :meth:`fit_batch`)."""
        cfg = self.config
        claim, sigma, std, claimed_std, _ = self._noise(graph)
        t = self._graph_tensors(graph)
        classes, b = int(graph.y.max()) + 1, len(rngs)

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
        # prepared encoder, hop 1's aggregate Aᵀ·H0 (cached per graph and embedding)
        bound_seeds = [int(torch.randint(0, 2**62, (1,), generator=r).item()) for r in rngs]
        edges = self._private_edges(graph, bound_seeds[0])  # edge level: the graph's own edges
        aggregate = self._aggregator(graph, edges)
        first = self._first_hops.get((graph.edge_index, h0), lambda: aggregate(h0)) if cached else None
        # hop by hop over the trials: each trial's generator still draws its hops in order, and a
        # hop's aggregates of all the trials are one product over their H side by side
        # (:func:`aggregate_together`: the same floats as one product per trial, fewer passes over
        # the edges); every N × h tensor comes from the pool (the last batch's, once it is dropped)
        ref, pool = h0 if cached else h0[0], self._buffers
        one = torch.ones((), dtype=ref.dtype, device=ref.device)
        gens, wide_shape = [noise_generator(r, ref.device) for r in rngs], (ref.size(0), b * ref.size(1))
        trial_hs = [[h0 if cached else h0[j]] for j in range(b)]  # H_0..H_{K-1}
        trial_sums: list[list[torch.Tensor]] = [[] for _ in range(b)]  # S_1..S_K on the run's device
        for k in range(cfg.hops):  # H_{k+1} is written side by side (`side`) for the next product
            own = not (k == 0 and cached)  # the aggregates are this batch's own (not the shared first hop)
            aggs = aggregate_together(aggregate, [hs[-1] for hs in trial_hs], out=pool.empty(wide_shape, ref.dtype,
                                      ref.device)) if own else [first] * b
            side = pool.empty(wide_shape, ref.dtype, ref.device) if k + 1 < cfg.hops else None
            for j, (agg, g) in enumerate(zip(aggs, gens)):
                noise = torch.randn(agg.shape, generator=g, out=pool.empty(agg.shape, agg.dtype, agg.device))
                # agg + std·noise in one pass (addcmul rounds std·noise·1 = std·noise, then the sum): in
                # the product's buffer where it is the trial's own (the draw's is then free), else in the draw's
                s_k = agg.addcmul_(noise, one, value=std) if own else torch.addcmul(agg, noise, one, value=std, out=noise)
                del noise
                trial_sums[j].append(s_k.detach())  # on the run's device: the attack moves the rows it reads
                if side is not None:
                    width = s_k.size(1)
                    trial_hs[j].append(unit_rows(s_k, out=side[:, j * width:(j + 1) * width]))
        last_sums = [sums[-1] for sums in trial_sums]

        # 3. the classifiers: trained together on first use of any trial's classifier view (H_K,
        # which only they read, is normalised then)
        cls_rngs = [child_generator(r) for r in rngs]
        query_seeds = [int(torch.randint(0, 2**62, (1,), generator=r).item()) for r in rngs]
        batch = ClassifierBatch(cfg, self.device, lambda: [hs + [rownorm(s)] for hs, s in zip(trial_hs, last_sums)],
                                t, classes, cls_rngs)
        mean_key = ("gap hop 1", self._prepared["token"]) if cached else None
        n = int(graph.num_nodes)
        shared = {"noise_multiplier": claim.noise_multiplier, "noise_std": claimed_std,
                  "fresh_noise_per_query": self.bug("fresh-inference-noise"), "unit": claim.unit_text,
                  "stack_shape": (n, trial_hs[0][0].size(-1), cfg.hops + 1), "encoder_cached": cached,
                  "private_edges": int(edges.size(1)), "graph_edges": int(graph.edge_index.size(1))}
        # hops ≥ 2: one support function and one rows computation for the batch's trials
        support = self._support_fn(n)
        rows_fns = [None] + [self._mean_rows_fn([hs[k] for hs in trial_hs]) for k in range(1, cfg.hops)]
        return [self._edge_release(j, batch, trial_hs[j], trial_sums[j], encoders[j], bound_seeds[j],
                                   query_seeds[j], mean_key, support, rows_fns, graph, t, edges, std, shared)
                for j in range(b)]

    def _edge_release(self, j: int, batch: ClassifierBatch, hs: list[torch.Tensor], sums: list[torch.Tensor],
                      encoder: _Encoder | None, bound_seed: int, query_seed: int, mean_key: Any, support: Any, rows_fns: list[Any], graph: Any,
                      t: dict[str, torch.Tensor], edges: torch.Tensor, std: float, shared: dict[str, Any]
                      ) -> Release:
        """Trial j's release; `support`, `rows_fns`: its hops ≥ 2's support and (by trial) mean_rows
        functions; they, and `shared` (the batch's info entries), are the same for every trial."""
        cfg = self.config
        n, claimed_std = shared["stack_shape"][0], shared["noise_std"]
        fresh = shared["fresh_noise_per_query"]
        query_rng = torch.Generator().manual_seed(query_seed) if fresh else None
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
                          name=f"hop {k + 1}", mean_key=mean_key if k == 0 else None,
                          support=None if k == 0 else support,
                          mean_rows=None if k == 0 else rows_fns[k](j))
            for k in range(cfg.hops)
        ]
        info = {"accuracy": Lazy(lambda: batch.accuracy(j)), **shared}
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

    def _support_fn(self, released_rows: int) -> Callable[[Any, Any], torch.Tensor | None]:
        """support(g0, g1) of a hop k ≥ 2 (edge level): the rows whose in-edges differ, where the
        graphs have the release's node count (else None: the mean reads noiseless rows)."""

        def compute(g0: Any, g1: Any) -> tuple[int, torch.Tensor | None]:
            n = int(g0.num_nodes)
            return n, differing_rows(g0.edge_index, g1.edge_index, n) if n == int(g1.num_nodes) else None

        def support(g0: Any, g1: Any) -> torch.Tensor | None:
            n, rows = self._supports.get((g0.edge_index, g1.edge_index), lambda: compute(g0, g1))
            return rows if n == released_rows else None

        return support

    def _mean_rows_fn(self, released: list[torch.Tensor]) -> Callable[[int], Callable[[Any, torch.Tensor], torch.Tensor]]:
        """j ↦ mean_rows(graph, rows) of trial j's hop k ≥ 2 (edge level): rows of A_graphᵀ · (released
        H_k), where `released` holds the batch's H_k. The first call for a graph and rows computes
        every trial's rows in one product: the rows' block of Aᵀ, its columns narrowed to the
        sources it reads, times those sources' rows of the trials' H_k side by side. A CSR product
        adds each output entry's terms in the row's entry order whatever the other columns, so
        each trial's rows are those of its own product."""
        batch: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (edge_index, rows, B × rows × h)

        def block(graph: Any, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            n = int(graph.num_nodes)
            adj = self._adjacencies.get((graph.edge_index,),
                                        lambda: transposed_adjacency(self._private_edges(graph, 0), n))
            part, sources = narrow_columns(csr_rows(adj, rows))
            return as_ordered_coo(part), sources

        def together(graph: Any, rows: torch.Tensor) -> torch.Tensor:
            part, sources = self._row_blocks.get((graph.edge_index, rows), lambda: block(graph, rows))
            h = released[0].size(1)
            x = torch.cat([r.index_select(0, sources) for r in released], 1)  # sources × (B·h)
            out = ordered_spmm(part, x)
            return out.view(out.size(0), len(released), h).transpose(0, 1).cpu()

        def for_trial(j: int) -> Callable[[Any, torch.Tensor], torch.Tensor]:
            def mean_rows(graph: Any, rows: torch.Tensor) -> torch.Tensor:
                edges = graph.edge_index
                for e, r, value in batch:
                    if e is edges and r is rows:
                        return value[j]
                batch.append((edges, rows, together(graph, rows)))
                return batch[-1][2][j]

            return mean_rows

        return for_trial

    def noiseless(self, graph: Any) -> torch.Tensor | None:
        """Noiseless hop sums S_1..S_K (K × N × h) with the prepared (or a seed-0, non-private) encoder.

        For canary search only; under NDP the encoder here is a non-private proxy.
        """
        cached, encoder = self._cached_encoder(graph)
        if not cached:
            if not self.config.node_level:
                self.prepare(graph)
                _, encoder = self._cached_encoder(graph)
            else:
                proxy = GAP(self.config, unit="edge", trace_module="all")
                proxy.prepare(graph)
                _, encoder = proxy._cached_encoder(graph)
        x0 = self._encode(encoder, graph.x.to(self.device))
        _, sums = self._pma(x0, self._private_edges(graph, 0), 0.0, None)
        return torch.stack(sums, 0).cpu()

