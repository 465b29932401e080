"""The HeterPoisson target: sampling, DP-SGD fit and release views (see :mod:`targets.heterpoisson`)."""
from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from targets.common.accounting import calibrate_decreasing
from targets.base import Claim, Composed, Lazy, NoiseStep, Sampled, TraceLaw, LazyDict, Level, Release, Target, TargetConfig, split_accuracies
from targets.common.dpsgd import canary_from
from targets.common import stacked_mlp
from targets.heterpoisson import stacked
from targets.heterpoisson.accountant import heterpoisson_epsilon
from targets.heterpoisson.config import HeterPoissonConfig
from targets.heterpoisson.model import Batch, star_forward
from targets.common.trace import DPSGDTrace, TraceStep
from targets.heterpoisson import probe
from targets.heterpoisson.catalogue import CATALOGUE
from targets.common.catalogue import Entry



def feature_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[code]'s standardisation constants: the per-column mean and sd of the training graph's X."""
    x = x.float().cpu()
    return x.mean(0), x.std(0).clamp_min(1e-12)


def features(graph: Any, stats: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
    """The model's input rows: X as stored, or standardised with the fit's constants."""
    x = graph.x.float()
    if stats is None:
        return x
    mean, sd = stats
    return (x - mean.to(x.device)) / sd.to(x.device)


# ---------------------------------------------------------------------------------------------
# target
# ---------------------------------------------------------------------------------------------
class HeterPoisson(Target[HeterPoissonConfig]):
    """HeterPoisson + SML node-level DP-SGD (see :mod:`targets.heterpoisson`)."""

    name: ClassVar[str] = "heterpoisson"
    #: reference-machine seconds (benchmarks/calibrate_costs.py, default config on csbm)
    trial_costs = {Level.TRACE: 0.006, Level.API: 0.035, Level.WEIGHTS: 0.035}
    setup_seconds = 0.5
    Config: ClassVar[type[TargetConfig]] = HeterPoissonConfig
    levels: tuple[Level, ...] = (Level.API, Level.WEIGHTS, Level.TRACE)
    batched: ClassVar[bool] = True
    bugs: ClassVar[dict[str, str]] = {
        "no-noise": "adds no noise to the summed gradients while claiming the calibrated epsilon",
        "order-overlap": "[code] drops a central node's peripheral copy only where that central node "
                         "comes earlier in the shuffled batch, so a node can be central and peripheral",
        "isolated-fallback": "[code] gives an isolated central node M uniformly drawn nodes (with "
                             "replacement) as peripherals, so any node enters unrelated sub-graphs",
        "extra-steps": "[code] runs whole epochs of ceil(1/q_b) batches (at least one step more) "
                       "while accounting ceil(epochs/q_b) steps",
        "per-coordinate-scale": "draws the Laplace scale W per coordinate (product of 1-D Laplaces, "
                                "l1-shaped) while accounting spherical SML noise",
    }
    #: this target's entries in the bug catalogue (``python -m audit regress``)
    catalogue: ClassVar[tuple[Entry, ...]] = CATALOGUE
    #: small audits where this target fixtures an attack's contract check: attack → (params, canary)
    attack_fixtures: ClassVar[dict[str, tuple[dict[str, str], str]]] = {
        "gradient-l1": ({"hidden": "32", "steps": "1", "sampling_rate": "1"}, "split-gradient")}
    #: (dataset, setting, ε) → accuracy %, spec §8 Table 2 (transductive, "ours"), M tuned by the authors.
    published_accuracy: ClassVar[dict] = {
        **{("facebook", "gin", 16): 76.5},
        **{("twitch", "gin", e): v for e, v in zip((2, 4, 8, 16), (65.3, 65.9, 66.1, 66.4))},
        **{("computers", "gin", e): v for e, v in zip((2, 4, 8, 16), (73.8, 79.1, 82.8, 84.2))},
        **{("pubmed", "gin", e): v for e, v in zip((2, 4, 8, 16), (81.4, 82.9, 84.4, 84.9))},
        **{("reddit", "gin", e): v for e, v in zip((2, 4, 8, 16), (65.4, 74.6, 80.6, 84.1))},
        **{("facebook", "sage", e): v for e, v in zip((2, 4, 8, 16), (74.2, 74.7, 75.2, 75.5))},
        **{("twitch", "sage", e): v for e, v in zip((2, 4, 8, 16), (65.5, 66.4, 66.9, 66.9))},
        **{("computers", "sage", e): v for e, v in zip((2, 4, 8, 16), (74.3, 79.2, 82.0, 83.8))},
        **{("pubmed", "sage", e): v for e, v in zip((2, 4, 8, 16), (79.8, 80.8, 81.6, 82.1))},
        **{("reddit", "sage", e): v for e, v in zip((2, 4, 8, 16), (69.2, 76.0, 81.1, 84.1))},
        # GCN, Amazon-Computers, from the inductive Table 4 (spec §8)
        ("computers", "gcn", 2): 74.8,
        ("computers", "gcn", 4): 79.6,
    }

    def __init__(self, config: TargetConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self._sigma_cache: dict[tuple, float] = {}

    # ------------------------------------------------------------------ plan and accountant
    def plan(self, graph: Any = None) -> dict[str, Any]:
        """Sampling rate, accounted/run steps, δ, Gaussian D, σ and the absolute noise std."""
        cfg = self.config
        n_train = int(graph.train_mask.sum()) if graph is not None else None
        if cfg.sampling_rate is not None:
            q = float(cfg.sampling_rate)
        else:
            if n_train is None:
                raise ValueError("sampling_rate=None needs a graph (q_b = batch_size / n_train)")
            q = min(1.0, cfg.batch_size / max(n_train, 1))
        steps = int(cfg.steps) if cfg.steps is not None else int(math.ceil(cfg.epochs / q - 1e-9))
        if cfg.delta is not None:
            delta = float(cfg.delta)
        else:
            if n_train is None:
                raise ValueError("delta=None needs a graph (delta = n_train^-1.1)")
            delta = float(max(n_train, 2)) ** -1.1
        max_degree = None
        if cfg.noise == "gaussian":
            if cfg.max_degree is not None:
                max_degree = int(cfg.max_degree)
            elif graph is not None:
                max_degree = int(graph.num_nodes) - 1
            else:
                raise ValueError("the Gaussian accountant needs max_degree or a graph")
        run_steps = steps
        if self.bug("extra-steps"):
            run_steps = max(steps + 1, int(math.ceil(steps * q - 1e-9)) * int(math.ceil(1.0 / q - 1e-9)))
        kw = dict(sampling_rate=q, steps=steps, delta=delta, neighbors=cfg.neighbors, noise=cfg.noise,
                  accountant=cfg.accountant, remove_overlap=cfg.remove_overlap, max_degree=max_degree)
        if cfg.noise_multiplier is not None:
            sigma = float(cfg.noise_multiplier)
        else:
            key = tuple(sorted(kw.items())) + (("epsilon", cfg.epsilon),)
            if key not in self._sigma_cache:
                self._sigma_cache[key] = calibrate_decreasing(
                    lambda s: heterpoisson_epsilon(s, **kw)[0], cfg.epsilon, lo=0.05, hi=1.0, rtol=1e-7)
            sigma = self._sigma_cache[key]
        eps, alpha = heterpoisson_epsilon(sigma, **kw)
        return dict(kw, n_train=n_train, run_steps=run_steps, noise_multiplier=sigma,
                    noise_std=sigma * 2 * cfg.clip_norm, epsilon=eps, order=alpha,
                    expected_batch=q * n_train if n_train is not None else None)

    def claim(self, graph: Any) -> Claim:
        p = self.plan(graph)
        cfg = self.config
        step = NoiseStep(law=cfg.noise, noise_std=p["noise_std"], sensitivity=2 * cfg.clip_norm,
                         noise_multiplier=p["noise_multiplier"],
                         laplace_scale=p["noise_std"] / math.sqrt(2) if cfg.noise == "sml" else None)
        trace = TraceLaw(cfg.noise, p["noise_std"], cfg.clip_norm, cfg.clip_norm, p["sampling_rate"])
        details = {
            "noise_law": ("SML: sqrt(W)*noise_std*N(0,I), one W~Exp(1) per step" if cfg.noise == "sml"
                          else "Gaussian N(0, noise_std^2 I)"),
            "sensitivity_note": "k units of 2c per affected sub-graph, c (k=0.5) when the node is central",
            "neighbors": cfg.neighbors,
            "steps": p["steps"],
            "steps_run": p["run_steps"],
            "expected_batch": p["expected_batch"],
            "n_train": p["n_train"],
            "accountant_variant": cfg.accountant,
            "rho": ("q*delta_0.5 + (1-q)*Poisson(q*M)" if cfg.noise == "sml"
                    else f"q*delta_0.5 + (1-q)*Bin(D={p['max_degree']}, q*min(1,M/D))"),
            "remove_overlap": cfg.remove_overlap,
            "standardize": ("[code]: X standardised with its own column mean/sd (data-dependent, "
                            "not accounted)" if cfg.standardize else False),
            "max_degree": p["max_degree"],
            "order": p["order"],
            "orders": "linspace(1.0001,10,100) + 11..256",
            "conversion": "Balle et al. 2020 (improved)",
            "target_epsilon": cfg.epsilon,
            "calibrated": cfg.noise_multiplier is None,
        }
        return Claim(epsilon=p["epsilon"], delta=p["delta"],
                     accountant=f"heterpoisson-theorem2-{cfg.accountant}-{cfg.noise}",
                     unit="node (add/remove a training node with features, label and incident edges; "
                          "degrees from the public graph)",
                     gdp_mu=None, step=step, trace=trace, notes=details,
                     composition=Composed(Sampled(p["sampling_rate"], step), p["steps"]))

    # ------------------------------------------------------------------ sampler
    def neighbour_sample_size(self) -> int:
        return self.config.neighbors

    def records_node_scale(self) -> bool:
        return True  # canary_whole_node: k_t injected and recorded; Theorem 2 charges k revealed

    def outdegrees(self, graph: Any) -> torch.Tensor:
        deg = getattr(graph, "public_outdeg", None)
        if deg is not None:
            return torch.as_tensor(deg).long().cpu()
        return torch.bincount(graph.edge_index[0].cpu(), minlength=graph.num_nodes)

    def sample_batch(self, graph: Any, rng: torch.Generator, sampling_rate: float | None = None,
                     *, _cache: dict | None = None) -> Batch:
        """One Heter-Poisson batch (CPU tensors): central ids and kept peripheral edges src → dst."""
        cache = _cache if _cache is not None else self._sampler_cache(graph)
        q = self.plan(graph)["sampling_rate"] if sampling_rate is None else float(sampling_rate)
        return self._sample(cache, [rng], q).batch_of(0, cache["train_idx"])

    def _sample(self, cache: dict, rngs: list[torch.Generator], q: float) -> stacked.Sampled:
        return stacked.sample(cache, rngs, q, self.config.neighbors, order_overlap=self.bug("order-overlap"),
                              isolated_fallback=self.bug("isolated-fallback"))

    def _sampler_cache(self, graph: Any) -> dict:
        src, dst = graph.edge_index[0].cpu(), graph.edge_index[1].cpu()
        outdeg = self.outdegrees(graph)
        keep_p = torch.clamp(self.config.neighbors / outdeg[src].clamp(min=1).double(), max=1.0)
        return dict(n=int(graph.num_nodes), src=src, dst=dst, keep_p=keep_p,
                    train_idx=graph.train_mask.cpu().nonzero().view(-1),
                    indeg=torch.bincount(dst, minlength=graph.num_nodes))

    def step_maps(self, graph: Any) -> list[Any]:
        return probe.step_maps(self)

    # ------------------------------------------------------------------ model helpers
    def dimension(self, graph: Any) -> int:
        f, c, h = graph.x.size(1), int(graph.y.max()) + 1, self.config.hidden
        return f * h + h + h * c + c + (1 if self.config.backbone == "gin" else 0)

    def _pack(self, x: torch.Tensor, centers: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        """Rows [x_i, Σ_{j→i kept} x_j, |N_i|] for the central nodes `centers` (on x's device)."""
        n = x.size(0)
        local = torch.full((n,), -1, dtype=torch.long)
        local[centers] = torch.arange(centers.numel())
        li = local[dst].to(x.device)
        s = torch.zeros(centers.numel(), x.size(1), device=x.device, dtype=x.dtype)
        s.index_add_(0, li, x[src.to(x.device)])
        cnt = torch.bincount(li, minlength=centers.numel()).to(x.dtype).unsqueeze(1)
        return torch.cat([x[centers.to(x.device)], s, cnt], dim=1)

    def _inference_edges(self, graph: Any, nodes: torch.Tensor, gen: torch.Generator,
                         train_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Up to N_test in-neighbours per query node, uniform without replacement among non-training nodes."""
        src, dst = graph.edge_index[0].cpu(), graph.edge_index[1].cpu()
        key = torch.rand(src.numel(), generator=gen, dtype=torch.float64)  # one key per edge: a node's
        is_query = torch.zeros(graph.num_nodes, dtype=torch.bool)          # sample ignores the query set
        is_query[nodes] = True
        sel = is_query[dst] & ~train_mask[src]
        src, dst, key = src[sel], dst[sel], key[sel]
        if src.numel() == 0:
            return src, dst
        order = torch.argsort(dst.double() * 2.0 + key)  # group by dst, random order inside a group
        src, dst = src[order], dst[order]
        first = torch.zeros(graph.num_nodes, dtype=torch.long)
        counts = torch.bincount(dst, minlength=graph.num_nodes)
        first[1:] = torch.cumsum(counts, 0)[:-1]
        rank = torch.arange(dst.numel()) - first[dst]
        keep = rank < self.config.test_neighbors
        return src[keep], dst[keep]

    def _predict_fn(self, weights: Lazy, seed: int, train_mask: torch.Tensor, stats: tuple | None = None):
        device = self.device
        backbone = self.config.backbone

        @torch.no_grad()
        def predict(graph: Any, nodes=None) -> torch.Tensor:
            nodes = (torch.arange(graph.num_nodes) if nodes is None
                     else torch.as_tensor(nodes, dtype=torch.long).view(-1).cpu())
            gen = torch.Generator().manual_seed(seed)
            tm = train_mask if train_mask.numel() == graph.num_nodes else graph.train_mask.cpu()
            uniq, inv = torch.unique(nodes, return_inverse=True)
            src, dst = self._inference_edges(graph, uniq, gen, tm)
            x = features(graph, stats).to(device)
            packed = self._pack(x, uniq, src, dst)
            on_device = {k: v.to(device) for k, v in weights.get().items()}
            return F.softmax(star_forward(on_device, packed, x.size(1), backbone), dim=1).float().cpu()[inv]

        return predict

    # ------------------------------------------------------------------ training
    @staticmethod
    def node_canary_scale(batch: Batch, node: int) -> float:
        """How many clip norms c node z can move this batch's clipped sum by: c for its own star
        when it is central, and 2c for every other star in which it survives as a peripheral."""
        central = bool((batch.central == node).any())
        stars = torch.unique(batch.dst[batch.src == node]).numel()
        return float(central) + 2.0 * stars

    def fit(self, graph: Any, rng: torch.Generator, *, canary_gradient: torch.Tensor | None = None,
            canary_node: int | None = None, canary_whole_node: bool | None = None) -> Release:
        return self.fit_batch(graph, [rng], canary_gradient=canary_gradient, canary_node=canary_node,
                              canary_whole_node=canary_whole_node)[0]

    def fit_batch(self, graph: Any, rngs: list[torch.Generator], *, canary_gradient: torch.Tensor | None = None,
                  canary_node: int | None = None, canary_whole_node: bool | None = None) -> list[Release]:
        """``len(rngs)`` runs on `graph`, run k drawing only from ``rngs[k]``, trained in stacks
        (:mod:`targets.heterpoisson.stacked`): run k's release is bitwise what ``fit(graph, rngs[k])``
        gives on CPU, whatever the stack."""
        cfg = self.config
        p = self.plan(graph)
        canary_gradient, canary_node = canary_from(graph, canary_gradient, canary_node)
        if canary_whole_node is None:
            canary_whole_node = bool(getattr(graph, "canary_whole_node", False))
        train_mask = graph.train_mask.cpu()
        if canary_whole_node:
            if canary_node is None:
                raise ValueError("canary_whole_node needs canary_node")
            if not bool(train_mask[int(canary_node)]):
                raise ValueError(f"canary_node {canary_node} is not a training node")
        lay = stacked.Layout(graph.x.size(1), cfg.hidden, int(graph.y.max()) + 1, cfg.backbone == "gin")
        d, T_run = lay.d, p["run_steps"]
        gc = None
        if canary_gradient is not None:
            gc = torch.as_tensor(canary_gradient, dtype=torch.float32).to(self.device)
            if gc.shape[-1] != d or gc.dim() not in (1, 2) or (gc.dim() == 2 and gc.size(0) < T_run):
                raise ValueError(f"canary_gradient must have shape ({d},) or ({T_run}, {d}), got {tuple(gc.shape)}")
            if canary_node is not None and not bool(train_mask[int(canary_node)]):
                raise ValueError(f"canary_node {canary_node} is not a training node")
        stats = feature_stats(graph.x) if cfg.standardize else None
        canary = (gc, None if canary_node is None else int(canary_node), canary_whole_node)
        run_bytes = stacked_mlp.stack_bytes(stacked_mlp.padded(int(train_mask.sum())), lay.features, lay.hidden,
                                            lay.classes, lay.width)  # csbm: ~19 runs a stack, measured best near there
        return stacked_mlp.fit_in_stacks(rngs, run_bytes,
                                         lambda stack: self._fit_stack(graph, stack, p, lay, canary, stats))

    def _fit_stack(self, graph: Any, rngs: list[torch.Generator], p: dict, lay: stacked.Layout,
                   canary: tuple, stats: tuple | None) -> list[Release]:
        """One stack of runs: per step each run's batch, closed-form clipped sum, canary, noise,
        trace and Adam; every ``eval_every`` steps a checkpoint, validated when a view needs the
        val-selected model (:meth:`_release`)."""
        cfg, dev = self.config, self.device
        gc, canary_node, whole = canary
        q, T_run, d, k_runs = p["sampling_rate"], p["run_steps"], lay.d, len(rngs)
        std = 0.0 if self.bug("no-noise") else p["noise_std"]
        cache = self._sampler_cache(graph)
        train_idx = cache["train_idx"]
        m = train_idx.numel()
        rows = stacked_mlp.padded(m)
        slot_of = torch.full((graph.num_nodes,), -1, dtype=torch.long)
        slot_of[train_idx] = torch.arange(m)
        x = features(graph, stats).to(dev)
        xs = stacked_mlp.pad_rows(x[train_idx.to(dev)], rows)
        onehot = stacked_mlp.pad_rows(F.one_hot(graph.y.cpu().long()[train_idx], lay.classes).float(), rows).to(dev)
        params, runs = stacked.init_runs(lay, rngs)
        params = params.to(dev)
        opt = stacked.Adam(params, cfg.lr)
        expected_batch = max(q * m, 1e-12)
        traces = [DPSGDTrace(noise=cfg.noise, noise_std=std, clip_norm=cfg.clip_norm, sampling_rate=q,
                                    expected_batch=expected_batch, accounted_steps=p["steps"], shapes=lay.shapes())
                  for _ in rngs]
        eval_every = cfg.eval_every or max(1, T_run // 10)
        checkpoints: list[list[torch.Tensor]] = [[] for _ in rngs]
        mask = torch.zeros(k_runs, rows)
        for t in range(T_run):
            sampled = self._sample(cache, rngs, q)
            s, cnt = stacked.star_inputs(x, slot_of, rows, k_runs, sampled.run, sampled.src, sampled.dst)
            mask[:, :m] = sampled.central
            total = stacked.clipped_sum(lay, params, xs, s, cnt, onehot, mask.to(dev), cfg.clip_norm, cfg.backbone)
            scales = self._node_scales(sampled, slot_of, canary_node, k_runs) if whole else [None] * k_runs
            canary_in: list[bool | None] = [None] * k_runs
            if gc is not None:
                g = gc[t] if gc.dim() == 2 else gc
                for k, run in enumerate(runs):
                    coin = bool(torch.rand(1, generator=run.canary_rng).item() < q)
                    if scales[k] is not None:
                        canary_in[k] = scales[k] > 0
                    else:
                        canary_in[k] = bool(sampled.central[k, slot_of[canary_node]]) if canary_node is not None else coin
                    if canary_in[k]:
                        total[k, :d] += g if scales[k] is None else scales[k] * g
            noisy = total + stacked.noise(d, lay.width, std, rngs, cfg.noise, self.bug("per-coordinate-scale")).to(dev)
            noisy_cpu, clean_cpu = noisy[:, :d].cpu(), total[:, :d].cpu()
            for k, trace in enumerate(traces):
                trace.steps.append(TraceStep(noisy=noisy_cpu[k].clone(), central=train_idx[sampled.central[k]],
                                             canary_in=canary_in[k], clean=clean_cpu[k].clone(),
                                             canary_scale=scales[k]))
            opt.step(noisy / expected_batch)
            if (t + 1) % eval_every == 0 or t == T_run - 1:
                snapshot = params.cpu()
                for k in range(k_runs):
                    checkpoints[k].append(snapshot[k].clone())
        return [self._release(graph, lay, checkpoints[k], run, trace, p, std, stats)
                for k, (run, trace) in enumerate(zip(runs, traces))]

    def _node_scales(self, sampled: stacked.Sampled, slot_of: torch.Tensor, node: int, k_runs: int) -> list[float]:
        """:meth:`node_canary_scale` of every run's batch."""
        hit = sampled.src == node
        stars = torch.zeros(k_runs, int(slot_of.numel()), dtype=torch.bool)
        stars[sampled.run[hit], sampled.dst[hit]] = True
        central = sampled.central[:, int(slot_of[node])]
        return [float(c) + 2.0 * s for c, s in zip(central.tolist(), stars.sum(1).tolist())]

    def _selected(self, graph: Any, lay: stacked.Layout, checkpoints: list[torch.Tensor], seed: int,
                  train_mask: torch.Tensor, stats: tuple | None) -> torch.Tensor:
        """The last checkpoint of best validation accuracy, judged on what the api would answer with
        it (every checkpoint ties at 0 without validation nodes)."""
        val_idx = graph.val_mask.cpu().nonzero().view(-1)
        if not val_idx.numel():
            return checkpoints[-1]
        x = features(graph, stats).to(self.device)
        src, dst = self._inference_edges(graph, val_idx, torch.Generator().manual_seed(seed), train_mask)
        packed = self._pack(x, val_idx, src, dst)
        y = graph.y.cpu()[val_idx]
        best, best_acc = checkpoints[-1], -1.0
        for flat in checkpoints:
            weights = {k: v.to(self.device) for k, v in lay.unflatten(flat).items()}
            with torch.no_grad():
                out = star_forward(weights, packed, x.size(1), self.config.backbone)
            acc = float((F.softmax(out, dim=1).argmax(1).cpu() == y).float().mean())
            if acc >= best_acc:
                best, best_acc = flat, acc
        return best

    def _release(self, graph: Any, lay: stacked.Layout, checkpoints: list[torch.Tensor], run: stacked.Run,
                 trace: DPSGDTrace, p: dict, std: float, stats: tuple | None) -> Release:
        """One run's release: the trace at once; the val-selected weights (and so the api and the
        accuracy) on first use, from the checkpoints and the inference seed fixed at fit time."""
        train_mask = graph.train_mask.cpu()
        weights = Lazy(lambda: lay.unflatten(self._selected(graph, lay, checkpoints, run.infer_seed, train_mask,
                                                                  stats)))
        predict = self._predict_fn(weights, run.infer_seed, train_mask, stats)

        info = {
            "accuracy": Lazy(lambda: split_accuracies(predict(graph).argmax(1), graph)),
            "steps_run": p["run_steps"],
            "steps_accounted": p["steps"],
            "sampling_rate": p["sampling_rate"],
            "noise_multiplier": p["noise_multiplier"],
            "noise_std": std,
            "mean_batch": float(np.mean([s.central.numel() for s in trace.steps])) if trace.steps else 0.0,
            "fresh_noise_per_query": False,
            "randomised_inference": "neighbour sampling with a seed fixed at fit time",
            "dimension": lay.d,
        }
        return Release(api=predict, weights=LazyDict({}, weights), mechanism=None, trace=trace, info=info)
