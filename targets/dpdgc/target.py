"""The DPDGC target: fit and release views (see :mod:`targets.dpdgc`)."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from graphs import ops as graph_ops
from graphs.ops import drop_isolated_with_notice
from targets.common.accounting import gap_delta, gaussian_rdp, gdp_epsilon
from targets.base import Claim, Composed, GaussianStep, Lazy, NoiseLaw, Sampled, Series, TraceLaw, LazyDict, Level, MechanismStep, Release, Target, TargetConfig, seeded
from targets.dpdgc.accountant import ORDERS, calibrated_sigma, dpdgc_epsilon, dpdgc_rdp, lemma_f1_epsilon
from targets.dpdgc import dpemb
from targets.dpdgc.config import DPDGCConfig
from targets.dpdgc.model import _ce, _LinkX, bound_column_degree
from targets.common.dpsgd import assign_flat_grad, canary_from, clip_rows, flatten, noisy_sum, per_example_gradients
from targets.common.trace import DPSGDTrace
from targets.dpdgc import probe
from targets.dpdgc.catalogue import CATALOGUE
from targets.common.catalogue import Entry

#: The paper's 75/10/15 random split (spec §4.1), drawn once from this seed.
PAPER_SPLIT_SEED = 12345

# ---------------------------------------------------------------------------------------------
# target
# ---------------------------------------------------------------------------------------------
class DPDGC(Target[DPDGCConfig]):
    """DPDGC (see :mod:`targets.dpdgc`)."""

    name: ClassVar[str] = "dpdgc"
    #: reference-machine seconds (benchmarks/calibrate_costs.py, default config on csbm)
    trial_costs = {Level.MECHANISM: 0.13, Level.API: 0.65, Level.WEIGHTS: 0.65}
    setup_seconds = 2.0
    Config: ClassVar[type[TargetConfig]] = DPDGCConfig
    levels: tuple[Level, ...] = (Level.API, Level.WEIGHTS, Level.MECHANISM, Level.TRACE)
    batched: ClassVar[bool] = True
    #: fit_batch trains on one thread per core while the game's thread waits: it scores the
    #: previous batch meanwhile (audit.game.play_chunk's pipeline)
    score_alongside: ClassVar[bool] = True
    #: a mechanism trial trains DP-Emb, and a wide stack pays the per-step op calls for more runs:
    #: at 48 a default chunk's 50 trials a world are one batch, two stacks of 25 on two cores
    #: (measured on the whole default run: 3.6 % less CPU than 32, 6-8 % less than 16)
    auto_batch: ClassVar[int] = 48
    bugs: ClassVar[dict[str, str]] = {
        "no-noise": "every noise std is 0 (DP-Emb, Z, classifier) while the calibrated ε is claimed",
        "norm-noop": "W's rows are never projected to norm c (reference code's no-op normalisation) "
                     "while the Z noise stays σ·c·Δ: Z's true sensitivity is max‖W_j‖, ≫ c where c is "
                     "below the trained row norms (the paper's c = 1e-8)",
        "sqrt-group-noise": "DP-Emb noise scales with √g instead of the claimed g (reference code)",
    }
    #: this target's entries in the bug catalogue (``python -m audit regress``)
    catalogue: ClassVar[tuple[Entry, ...]] = CATALOGUE
    published_accuracy: ClassVar[dict] = {
        # paper Table 2 (spec §6.3): (dataset, setting, ε) → test accuracy %
        **{(d, "edge", 1.0): a for d, a in [("squirrel", 38.18), ("chameleon", 53.83), ("facebook", 62.04),
                                            ("pubmed", 88.59), ("computers", 87.74), ("cora", 77.71),
                                            ("photo", 92.59)]},
        **{(d, "k=1", 16.0): a for d, a in [("squirrel", 42.71), ("chameleon", 48.63), ("facebook", 80.94),
                                            ("pubmed", 84.33), ("computers", 83.49), ("cora", 59.98),
                                            ("photo", 88.38)]},
        **{(d, "k=5", 16.0): a for d, a in [("squirrel", 41.00), ("chameleon", 47.22), ("facebook", 76.84),
                                            ("pubmed", 84.31), ("computers", 80.60), ("cora", 59.56),
                                            ("photo", 87.02)]},
        **{(d, "k=25", 16.0): a for d, a in [("squirrel", 40.51), ("chameleon", 46.32), ("facebook", 68.66),
                                             ("pubmed", 84.27), ("computers", 78.25), ("cora", 59.26),
                                             ("photo", 84.82)]},
        **{(d, "node", 16.0): a for d, a in [("squirrel", 36.17), ("chameleon", 46.43), ("facebook", 56.65),
                                             ("pubmed", 84.55), ("computers", 76.62), ("cora", 58.97),
                                             ("photo", 82.15)]},
        **{(d, "non-private", math.inf): a for d, a in [("squirrel", 79.92), ("chameleon", 79.24),
                                                         ("facebook", 86.06), ("pubmed", 88.34),
                                                         ("computers", 92.27), ("cora", 82.44),
                                                         ("photo", 94.98)]},
    }

    #: node level (k-neighbour, DP-Adam trace), measured at k 25, batch 1000, 4 + 1 epochs
    node_trial_costs = {Level.MECHANISM: 0.006, Level.TRACE: 0.02, Level.API: 0.13, Level.WEIGHTS: 0.13}

    def trial_cost(self, level: str) -> float:
        """The default configuration's cost, scaled by the epochs a trial trains (DP-Emb's for the
        mechanism and trace, both models' for the weights and api); the node level's own table."""
        c, default = self.config, type(self.config)()
        if c.unit == "node":
            return self.node_trial_costs[level]
        if level in (Level.MECHANISM, Level.TRACE):
            scale = c.epochs_encoder / default.epochs_encoder
        else:
            scale = (c.epochs_encoder + c.epochs_classifier) / (default.epochs_encoder + default.epochs_classifier)
        return max(0.002, super().trial_cost(level) * scale)

    def __init__(self, config: TargetConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        if not self.offers_trace():  # the edge level releases no trace: no attack may be offered one
            self.levels = (Level.API, Level.WEIGHTS, Level.MECHANISM)
        self._claims: dict[tuple, Claim] = {}
        self._last: tuple[torch.Tensor, torch.Tensor, int] | None = None
        self._adj_cache: dict[tuple, dpemb.Adjacency] = {}
        self._adj64_cache: dict[tuple, torch.Tensor] = {}
        self._clf_shapes: dict[tuple[int, int], dict[str, tuple[int, ...]] | None] = {}

    # ------------------------------------------------------------------ structure
    def _masks(self, graph: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.config.split == "graph":
            return graph.train_mask.cpu(), graph.val_mask.cpu(), graph.test_mask.cpu()
        n = graph.num_nodes
        perm = torch.as_tensor(np.random.default_rng(PAPER_SPLIT_SEED).permutation(n))
        n_val, n_test = round(0.1 * n), round(0.15 * n)
        masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
        masks[1][perm[:n_val]] = True
        masks[2][perm[n_val:n_val + n_test]] = True
        masks[0][perm[n_val + n_test:]] = True
        return masks[0], masks[1], masks[2]

    def group_size(self) -> int:
        """g: DP-Emb examples one neighbouring relation can change (spec §3.3, §9.4–9.5)."""
        cfg = self.config
        if cfg.level == "edge":
            return 2 if cfg.undirected_edge else 1
        if cfg.level == "kneighbour":
            return cfg.k + 1
        return 2 * cfg.max_degree + 1 if cfg.node_group == "sound" else cfg.max_degree + 1

    def z_sensitivity(self) -> float:
        """Δ_Z: L2 sensitivity of [A·W]_{\\r} with rows of W at norm c (spec §3.1)."""
        cfg = self.config
        c = cfg.norm_scale
        if cfg.level == "edge":
            return c * (math.sqrt(2.0) if cfg.undirected_edge else 1.0)
        if cfg.level == "kneighbour":
            return c * math.sqrt(cfg.k)
        return c * math.sqrt(2 * cfg.max_degree)

    def offers_trace(self) -> bool:
        """DP-Emb's trace is released where its DP-SGD carries a node-level claim (N_k and node)."""
        return self.config.level != "edge"

    def takes_gradient_canary(self, graph: Any = None) -> bool:
        """Under k-neighbour/node GDP with full-batch DP-Emb (q = 1) on `graph` (see :meth:`_canary`)."""
        return self.offers_trace() and graph is not None and self.claim(graph).note("sampling_rate") >= 1.0

    def step_maps(self, graph: Any) -> list[Any]:
        return probe.step_maps(self, graph)

    def dimension(self, graph: Any) -> int:
        """d of DP-Emb's flattened gradient [grad_W (n×h, row-major), grad_b (h)]."""
        return graph.num_nodes * self.config.hidden + self.config.hidden

    def canary_norm(self) -> float:
        """Norm of the Dirac canary's gradient: g·C.

        One neighbouring change touches g DP-Emb examples (spec §3.3), each clipped to C, and their
        gradients can all point the same way (spec §10, "DP-SGD parts"): g·C is within the
        replace-one sensitivity 2·g·C that the linear group scaling calibrates the noise to.
        """
        return self.group_size() * self.config.clip

    def _schedule(self, m: int) -> tuple[int, int, int]:
        """(B, T_enc, T_clf): batch capped at m, T = ⌊epochs·m/B⌋ per module (spec §3.3)."""
        cfg = self.config
        b = min(cfg.batch_size, m)
        return b, (cfg.epochs_encoder * m) // b, (cfg.epochs_classifier * m) // b

    def preprocess(self, graph: Any) -> tuple[Any, str | None]:
        """The paper's pre-processing (GAP's loader; spec §4.1): isolated nodes dropped, with a notice."""
        return drop_isolated_with_notice(graph, "dpdgc")

    # ------------------------------------------------------------------ accountant
    def _rdp(self, sigma: float, q: float, t_enc: int, t_clf: int) -> np.ndarray:
        return dpdgc_rdp(sigma, q, t_enc, t_clf, self.z_sensitivity() > 0, self.config.level)

    def claim(self, graph: Any) -> Claim:
        cfg = self.config
        m_graph = int(self._masks(graph)[0].sum())
        m = cfg.num_train if cfg.num_train is not None else m_graph
        n_edges = cfg.num_edges if cfg.num_edges is not None else int(graph.edge_index.size(1))
        if cfg.delta is not None:
            delta, delta_rule = cfg.delta, "given"
        elif cfg.level == "edge":
            delta, delta_rule = gap_delta(n_edges), "10^-digits(#directed edges)"
        else:
            delta, delta_rule = gap_delta(m), "10^-digits(#training nodes)"
        key = (m, delta)
        if key in self._claims:
            return self._claims[key]
        batch, t_enc, t_clf = self._schedule(m)
        q = batch / m
        sigma = calibrated_sigma(cfg.epsilon, delta, q, t_enc, t_clf, cfg.level, self.z_sensitivity() > 0)
        eps, order = dpdgc_epsilon(sigma, q, t_enc, t_clf, self.z_sensitivity() > 0, cfg.level, delta)
        g = self.group_size()
        f_g = g if cfg.group_scaling == "linear" else math.sqrt(g)
        dz = self.z_sensitivity()
        eps_z = lemma_f1_epsilon(ORDERS, gaussian_rdp(ORDERS, sigma), delta)[0] if dz > 0 else 0.0
        components = ["SGD_enc(wor)"] + (["Gaussian(Z)"] if dz > 0 else []) + \
                     (["SGD_clf(wor)"] if cfg.level != "edge" else [])
        unit = {"edge": "edge (one directed entry A[r,j])" if not cfg.undirected_edge
                else "edge (one undirected edge, both entries)",
                "kneighbour": f"node (k-neighbour, k={cfg.k}: X_r, Y_r, ≤k row and ≤k column entries)",
                "node": f"node (replace node r; out-degree bounded by D={cfg.max_degree})"}[cfg.level]
        notes = {
            "norm_scale": cfg.norm_scale,
            "level": cfg.level,
            "group_size": g,
            "group_scaling": cfg.group_scaling,
            "encoder_noise_std": 2.0 * sigma * f_g * cfg.clip,
            "encoder_noise_multiplier": 2.0 * sigma * f_g,
            "classifier_noise_std": 2.0 * sigma * cfg.clip if cfg.level != "edge" else None,
            "clip": cfg.clip,
            "num_train": m,
            "batch_size": batch,
            "sampling_rate": q,
            "sampling": "fixed-size without replacement (replace-one, WBK19 Thm 27)",
            "steps_encoder": t_enc,
            "steps_classifier": t_clf if cfg.level != "edge" else 0,
            "components": components,
            "order": order,
            "epsilon_z_only": eps_z,
            "epsilon_z_only_exact": gdp_epsilon(1.0 / sigma, delta) if dz > 0 else 0.0,
            "conversion": "Lemma F.1 (improved RDP→DP)",
            "delta_rule": delta_rule,
            "num_directed_edges": n_edges,
        }
        # the noise law of the trace (DP-Emb's DP-Adam sums), as claimed, for gradient canaries
        trace = TraceLaw(NoiseLaw.GAUSSIAN.value, notes["encoder_noise_std"], cfg.clip, self.canary_norm(), q) \
            if self.offers_trace() else None
        enc = Composed(Sampled(q, GaussianStep(notes["encoder_noise_multiplier"], cfg.clip), notes["sampling"]), t_enc)
        parts = (enc,) + ((GaussianStep(sigma, dz),) if dz > 0 else ()) + \
            ((Composed(Sampled(q, GaussianStep(2.0 * sigma, cfg.clip), notes["sampling"]), t_clf),)
             if cfg.level != "edge" else ())
        claim = Claim(epsilon=eps, delta=delta, accountant="rdp-wor (DPDGC, one shared σ, Lemma F.1)",
                      unit=unit, step=GaussianStep(sigma, dz), trace=trace, composition=Series(parts), notes=notes)
        self._claims[key] = claim
        return claim

    # ------------------------------------------------------------------ graph pieces
    def _edges(self, graph: Any, seed: int) -> torch.Tensor:
        ei = graph.edge_index.cpu()
        if self.config.level == "node":
            ei = bound_column_degree(ei, graph.num_nodes, self.config.max_degree, seed)
        return ei

    def _adjacency(self, edge_index: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
        values = torch.ones(edge_index.size(1), dtype=dtype)
        return torch.sparse_coo_tensor(edge_index, values, (n, n), check_invariants=False).coalesce().to(self.device)

    def _adjacency64(self, graph: Any, seed: int) -> torch.Tensor:
        """A of `graph` (float64, on the device) after the degree bound from `seed` (node GDP),
        cached per (edge set, seed): every release reads its own A and both worlds' means."""
        key = (graph.num_nodes, graph_ops.fingerprint(graph.edge_index),
               seed if self.config.level == "node" else None)
        hit = self._adj64_cache.get(key)
        if hit is None:
            hit = self._adjacency(self._edges(graph, seed), graph.num_nodes, torch.float64)
            if len(self._adj64_cache) >= 8:
                self._adj64_cache.clear()  # (atomic: the scoring thread may read it meanwhile)
            self._adj64_cache[key] = hit
        return hit

    def _adjacencies(self, edge_index: torch.Tensor, n: int) -> dpemb.Adjacency:
        """A in the forms DP-Emb reads (CSR on the device, row degrees; sparse matrices on CUDA),
        cached per edge set (the last two: the two worlds of a run alternate batch by batch)."""
        key = (n, graph_ops.fingerprint(edge_index))
        hit = self._adj_cache.get(key)
        if hit is None:
            adj = self._adjacency(edge_index, n, torch.float32).cpu()
            rows, cols = adj.indices()
            crow = torch.zeros(n + 1, dtype=torch.long)
            crow[1:] = torch.cumsum(torch.bincount(rows, minlength=n), 0)
            sparse = None
            if self.device.type != "cpu":  # sparse products there (index_add_ would be atomic: unordered)
                sparse = (adj.to(self.device), self._adjacency(edge_index.flip(0), n, torch.float32))
            vals = adj.values()
            factor = torch.sqrt(torch.bincount(edge_index[0].cpu(), minlength=n).float() + 1.0)
            hit = dpemb.Adjacency(crow=crow.to(self.device), deg=(crow[1:] - crow[:-1]).to(self.device),
                                  cols=cols.to(self.device), vals=vals.to(self.device),
                                  grad_factor=factor.to(self.device), unit=bool((vals == 1).all()), sparse=sparse)
            if len(self._adj_cache) >= 2:
                self._adj_cache.clear()  # (atomic: node-GDP runs train on parallel threads)
            self._adj_cache[key] = hit
        return hit

    def _project(self, w: torch.Tensor) -> None:
        """Rows of W to norm c (sphere) or ≤ c (ball), in place: post-processing (spec §9.1)."""
        if self.bug("norm-noop"):
            return  # the reference code assigns the normalised rows into a throw-away state_dict
        c = self.config.norm_scale
        norms = torch.linalg.vector_norm(w, dim=-1, keepdim=True).clamp_min(1e-300)  # (= w.norm(dim=-1))
        factor = c / norms if self.config.projection == "sphere" else torch.clamp(c / norms, max=1.0)
        w.mul_(factor)

    # ------------------------------------------------------------------ training
    def _encoder_noise_std(self, sigma: float) -> float:
        """The std DP-Emb's noise actually has: 2σ·f(g)·C (planted bugs included)."""
        cfg = self.config
        g = self.group_size()
        scaled_g = math.sqrt(g) if (cfg.group_scaling == "sqrt" or self.bug("sqrt-group-noise")) else float(g)
        return 0.0 if self.bug("no-noise") else 2.0 * sigma * scaled_g * cfg.clip

    def _train_encoder(self, edge_index: torch.Tensor, n: int, y: torch.Tensor, train_idx: torch.Tensor,
                       classes: int, sigma: float, rng: torch.Generator, canary: torch.Tensor | None = None,
                       trace: DPSGDTrace | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """DP-Emb for one run (:meth:`_train_encoders` with one generator)."""
        return self._train_encoders(edge_index, n, y, train_idx, classes, sigma, [rng], canary, trace)[0]

    def _train_encoders(self, edge_index: torch.Tensor, n: int, y: torch.Tensor, train_idx: torch.Tensor,
                        classes: int, sigma: float, rngs: list[torch.Generator],
                        canary: torch.Tensor | None = None, trace: DPSGDTrace | None = None,
                        then: Callable[[int, tuple], Any] | None = None) -> list:
        """DP-Emb's projected DP-Adam for K = ``len(rngs)`` independent runs on one adjacency, run k
        drawing only from ``rngs[k]`` (in the order one run draws) and giving back the (W, b, R) a
        lone run gives (tested bitwise): stacked K × (n + 1) × h, the batch rows gathered from A's
        CSR, the noisy sum built on the noise, one fused Adam, the runs split over the usable cores
        (:mod:`targets.dpdgc.dpemb`). `canary` (d or T×d, not clipped) joins every step's clipped
        sum; where `trace` is given (one run only), each step's noisy and clean sums are appended.
        `then(k, (W, b, R))` (run k's release) runs on run k's training thread.
        """
        cfg = self.config
        if classes > cfg.hidden:
            raise ValueError(f"DP-Emb's head needs hidden >= classes, got hidden={cfg.hidden} < {classes}")
        if trace is not None and len(rngs) != 1:
            raise ValueError("a trace records one run")
        batch, t_enc, _ = self._schedule(train_idx.numel())
        std = self._encoder_noise_std(sigma)
        self._encoder_std = std
        sched = dpemb.Schedule(n=n, hidden=cfg.hidden, batch=batch, steps=t_enc, std=std, lr=cfg.lr,
                               weight_decay=cfg.encoder_weight_decay, clip=cfg.clip, project=self._project)
        def checked(k: int, run: tuple) -> Any:
            if not self.bug("norm-noop"):
                assert float(run[0].norm(dim=1).max()) <= cfg.norm_scale * (1 + 1e-5), "W rows exceed c"
            return run if then is None else then(k, run)

        return dpemb.train(self._adjacencies(edge_index, n), sched, y, train_idx, classes, rngs, canary, trace,
                           threads=dpemb.threads_for(len(rngs)), then=checked)

    def _classifier(self, features: int, classes: int) -> _LinkX:
        """The untrained classifier (its initialisation draws from torch's global generator)."""
        cfg = self.config
        private = cfg.level != "edge"
        dropout = cfg.dropout if cfg.dropout is not None else (0.0 if private else 0.5)
        batch_norm = cfg.batch_norm if cfg.batch_norm is not None else not private
        if private and (batch_norm or dropout > 0):
            raise ValueError("DP-Adam needs per-example gradients: batch_norm=False and dropout=0 under node GDP")
        return _LinkX(features, cfg.hidden, classes, dropout, batch_norm)

    def _classifier_shapes(self, features: int, classes: int) -> dict[str, tuple[int, ...]] | None:
        """The ``weights`` view's classifier entries' shapes, without training (or drawing: the
        model is built on the meta device); None where the config admits no classifier."""
        key = (features, classes)
        if key not in self._clf_shapes:
            try:
                with torch.device("meta"):
                    model = self._classifier(features, classes)
                self._clf_shapes[key] = {f"clf.{k}": tuple(v.shape) for k, v in model.state_dict().items()}
            except ValueError:  # raised again where the classifier is trained
                self._clf_shapes[key] = None
        return self._clf_shapes[key]

    def _train_classifier(self, inputs: torch.Tensor, y: torch.Tensor, masks: tuple, classes: int,
                          sigma: float, rng: torch.Generator) -> tuple[nn.Module, dict[str, float]]:
        cfg, dev = self.config, self.device
        private = cfg.level != "edge"
        model = self._classifier(inputs.size(1) - cfg.hidden, classes).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        train_idx = torch.nonzero(masks[0]).view(-1)
        m = train_idx.numel()
        batch, _, t_clf = self._schedule(m)
        per_epoch = max(1, m // batch)
        steps = t_clf if private else cfg.epochs_classifier * per_epoch
        std = 0.0 if self.bug("no-noise") else 2.0 * sigma * cfg.clip
        y_dev = y.to(dev)
        best, best_val, best_state = None, -1.0, None
        perm = torch.randperm(m, generator=rng)
        for step in range(steps):
            model.train()
            if private:
                idx = train_idx[torch.randperm(m, generator=rng)[:batch]].to(dev)
                grads = per_example_gradients(model, _ce, inputs[idx], y_dev[idx])
                clipped = clip_rows(flatten(grads), cfg.clip)
                assign_flat_grad(model, noisy_sum(clipped, std, rng) / batch)
            else:
                pos = step % per_epoch
                if pos == 0:
                    perm = torch.randperm(m, generator=rng)
                idx = train_idx[perm[pos * batch:(pos + 1) * batch]].to(dev)
                opt.zero_grad()
                F.cross_entropy(model(inputs[idx]), y_dev[idx]).backward()
            opt.step()
            if (step + 1) % per_epoch == 0 or step + 1 == steps:
                acc = self._accuracy(model, inputs, y_dev, masks)
                if cfg.checkpoint == "last" or acc["val"] > best_val:
                    best_val, best = acc["val"], acc
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(best_state)
        model.eval()
        return model, best

    @staticmethod
    def _accuracy(model: nn.Module, inputs: torch.Tensor, y: torch.Tensor, masks: tuple) -> dict[str, float]:
        model.eval()
        with torch.no_grad():
            pred = model(inputs).argmax(1)
        out = {}
        for name, mask in zip(("train", "val", "test"), masks):
            mask = mask.to(pred.device)
            out[name] = float((pred[mask] == y[mask]).float().mean()) if int(mask.sum()) else float("nan")
        return out

    def _classifier_inputs(self, x: torch.Tensor, z: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        zin = (z - b.double()) / self.config.norm_scale if self.config.rescale_z else z
        if self.config.normalize_z:
            zin = F.normalize(zin, dim=1)
        return torch.cat([x.to(self.device).float(), zin.float()], dim=1)

    def fit(self, graph: Any, rng: torch.Generator) -> Release:
        return self.fit_batch(graph, [rng])[0]

    def fit_batch(self, graph: Any, rngs: list[torch.Generator]) -> list[Release]:
        """``len(rngs)`` runs on `graph`, run j drawing only from ``rngs[j]``: DP-Emb's K runs share
        every step's sparse products (one adjacency: edge and k-neighbour GDP; under node GDP each
        run's degree bound has its own hash seed, so its DP-Emb runs alone). Z is released at once;
        the classifier (the ``api`` view, the classifier's weights, the accuracy) is trained on
        first use, from a generator split off at fit time: a release is the same whether or not
        it is read, and mechanism-only audits never pay for it.
        """
        cfg = self.config
        masks = self._masks(graph)
        m = int(masks[0].sum())
        if cfg.num_train is not None and cfg.num_train != m:
            raise ValueError(f"num_train={cfg.num_train} is for accounting only; this graph has {m} "
                             "training nodes (unset num_train to fit it)")
        if m == 0:
            raise ValueError("DPDGC needs at least one training node")
        claim = self.claim(graph)
        sigma = claim.noise_multiplier
        n = graph.num_nodes
        y = graph.y.cpu()
        classes = int(y.max()) + 1
        train_idx = torch.nonzero(masks[0]).view(-1)
        canary = self._canary(graph, claim)
        hash_seeds = [int(torch.randint(0, 2**62, (1,), generator=rng)) for rng in rngs]
        states = [rng.get_state() for rng in rngs]  # the trace view replays DP-Emb from here (no draw)
        def release(j: int, enc: tuple) -> tuple[Release, tuple]:  # on run j's training thread
            return self._release(graph, claim, masks, canary, hash_seeds[j], states[j], enc, rngs[j]), enc

        if cfg.level == "node":  # one edge set per run: the runs train apart, one per usable core at a time
            def alone(j: int) -> tuple:
                edges = self._edges(graph, hash_seeds[j])
                return self._train_encoders(edges, n, y, train_idx, classes, sigma, [rngs[j]], canary,
                                            then=lambda _, enc: release(j, enc))[0]

            threads_before = torch.get_num_threads()
            try:
                workers = dpemb.threads_for(len(rngs), min_group=1)
                with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpemb") as pool:
                    done = list(pool.map(alone, range(len(rngs))))
            finally:
                torch.set_num_threads(threads_before)  # (each run sets its thread single-threaded)
        else:
            done = self._train_encoders(self._edges(graph, 0), n, y, train_idx, classes, sigma, rngs, canary,
                                        then=release)
        w, b, _ = done[-1][1]
        self._last = (w, b, hash_seeds[-1])
        return [rel for rel, _ in done]

    def _release(self, graph: Any, claim: Claim, masks: tuple, canary: torch.Tensor | None, hash_seed: int,
                 encoder_state: torch.Tensor, encoded: tuple, rng: torch.Generator) -> Release:
        """One run's release once its DP-Emb is trained: Z's noise, then the classifier's generator
        (both from `rng`, after DP-Emb's draws)."""
        cfg, dev = self.config, self.device
        sigma = claim.noise_multiplier
        n, y = graph.num_nodes, graph.y.cpu()
        classes = int(y.max()) + 1
        w, b, head = encoded
        w64, b64 = w.double(), b.double()
        edges = self._edges(graph, hash_seed)
        encoder_args = (edges, n, y, torch.nonzero(masks[0]).view(-1), classes, sigma)

        # The degree bound's hash seed is internal randomness, not released: under node GDP the
        # auditor's mean uses a fixed public seed instead, so the step is no exact Gaussian LLR
        # (noise_std None below: a projection statistic with a held-out threshold). Conditioning
        # on the run's own seed would test the bound on a quantity the adversary never sees.
        bounded = cfg.level == "node"
        mean_seed = 0 if bounded else hash_seed

        def mean(g: Any) -> torch.Tensor:
            return torch.sparse.mm(self._adjacency64(g, mean_seed), w64) + b64

        z_std = 0.0 if self.bug("no-noise") else claim.noise_std
        noise = torch.randn(n, cfg.hidden, generator=rng, dtype=torch.float64).to(dev)
        z = (torch.sparse.mm(self._adjacency64(graph, hash_seed), w64) + b64) + z_std * noise
        clf_seed = int(torch.randint(0, 2**62, (1,), generator=rng))

        def train() -> tuple[nn.Module, dict[str, float]]:
            gen = torch.Generator().manual_seed(clf_seed)
            inputs = self._classifier_inputs(graph.x, z, b)
            with seeded(gen):  # module init and dropout draw from torch's global RNG, seeded from gen
                return self._train_classifier(inputs, y, masks, classes, sigma, gen)

        classifier = Lazy(train)

        def predict(g: Any, nodes: Any = None) -> torch.Tensor:
            model = classifier.get()[0]
            with torch.no_grad():
                probs = F.softmax(model(self._classifier_inputs(g.x, z, b)), dim=1).cpu()
            return probs if nodes is None else probs[torch.as_tensor(nodes, dtype=torch.long)]

        weights = LazyDict({"emb.W": w.cpu(), "emb.b": b.cpu(), "emb.R": head.cpu()},
                           Lazy(lambda: {f"clf.{k}": v.detach().cpu()
                                         for k, v in classifier.get()[0].state_dict().items()}),
                           self._classifier_shapes(graph.x.size(1), classes))
        # noise_std is the algorithm's (claimed) std; planted bugs change the output, not this
        step = MechanismStep(output=z, mean=mean, noise_std=None if bounded else claim.noise_std,
                             name="Z = A·W + b + N" + (" (mean with a public degree-bound seed)" if bounded else ""))
        info = {
            "accuracy": Lazy(lambda: classifier.get()[1]),
            "fresh_noise_per_query": False,
            "max_row_norm": float(w.norm(dim=1).max()),
            "noise_multiplier": sigma,
            "z_noise_std": z_std,
            "encoder_noise_std": self._encoder_noise_std(sigma),
            "degree_hash_seed": hash_seed,
        }
        trace = None
        if self.offers_trace():
            trace = Lazy(lambda: self._replay_trace(encoder_state, encoder_args, canary, w))
        return Release(api=predict, weights=weights, mechanism=[step], trace=trace, info=info)

    def _canary(self, graph: Any, claim: Claim) -> torch.Tensor | None:
        """The Dirac gradient canary world 1 carries (``graph.canary_gradient``), checked."""
        gc, node = canary_from(graph)
        if gc is None:
            return None
        if node is not None:
            raise ValueError("DPDGC's gradient canary is a virtual example: canary_node is not supported")
        if not self.offers_trace():
            raise ValueError("DPDGC takes a gradient canary only under k-neighbour or node GDP (unit='node'), "
                             "where it releases DP-Emb's trace")
        if claim.note("sampling_rate") < 1.0:
            raise ValueError("DPDGC's gradient canary needs full-batch DP-Emb (batch_size >= #training nodes, "
                             "q = 1): its batches are fixed-size without replacement, so a virtual example has "
                             "no inclusion coin that the accountant covers")
        d, steps = self.dimension(graph), claim.note("steps_encoder")
        gc = torch.as_tensor(gc, dtype=torch.float32)
        if gc.shape[-1] != d or gc.dim() not in (1, 2) or (gc.dim() == 2 and gc.size(0) < steps):
            raise ValueError(f"canary_gradient must have shape ({d},) or ({steps}, {d}), got {tuple(gc.shape)}")
        return gc.to(self.device)

    def _replay_trace(self, state: torch.Tensor, encoder_args: tuple, canary: torch.Tensor | None,
                      w: torch.Tensor) -> DPSGDTrace:
        """DP-Emb's trace: the encoder re-run from the generator state it started from, recording.

        Recording during fit would hold T×d×2 floats per release whether or not an attack reads
        them (GBs at the paper's settings); the replay is checked to give back the released W.
        """
        n, train_idx, sigma = encoder_args[1], encoder_args[3], encoder_args[5]
        m = train_idx.numel()
        batch, t_enc, _ = self._schedule(m)
        h = self.config.hidden
        trace = DPSGDTrace(noise="gaussian", noise_std=self._encoder_noise_std(sigma),
                                  clip_norm=self.config.clip, sampling_rate=batch / m, expected_batch=batch,
                                  accounted_steps=t_enc, shapes={"emb.W": (n, h), "emb.b": (h,)})
        gen = torch.Generator()
        gen.set_state(state)
        w_again, _, _ = self._train_encoder(*encoder_args, gen, canary, trace)
        # bitwise on CPU; on a GPU the sparse kernels of a K-run batch and of one run may round
        # differently, so the replay is held to float32 rounding there
        same = torch.equal(w_again, w) if w.device.type == "cpu" else torch.allclose(w_again, w, rtol=1e-4, atol=0.0)
        if not same:
            raise RuntimeError("replaying DP-Emb did not reproduce the released W (non-deterministic kernels?)")
        return trace

    def noiseless(self, graph: Any) -> torch.Tensor | None:
        """A·W + b with the last fit's W, b (or, before any fit, those of a reference fit, seed 0)."""
        if self._last is None:
            self.fit(graph, torch.Generator().manual_seed(0))
        w, b, hash_seed = self._last
        return torch.sparse.mm(self._adjacency64(graph, hash_seed), w.double()) + b.double()

