"""The HeterPoisson target: sampling, DP-SGD fit and release views (see :mod:`targets.heterpoisson`)."""
from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from targets.accounting import calibrate_decreasing
from targets.base import Claim, Release, Target, TargetConfig, child_generator, seeded
from targets.dpsgd import assign_flat_grad, canary_from, clip_rows, flatten, per_example_gradients
from targets.heterpoisson.accountant import heterpoisson_epsilon, sml_sample
from targets.heterpoisson.config import HeterPoissonConfig
from targets.heterpoisson.model import Batch, StarNet
from targets.trace import HeterPoissonTrace, TraceStep

_CHUNK = 512  # per-example gradients are computed in chunks of this many sub-graphs


# ---------------------------------------------------------------------------------------------
# target
# ---------------------------------------------------------------------------------------------
class HeterPoisson(Target[HeterPoissonConfig]):
    """HeterPoisson + SML node-level DP-SGD (see :mod:`targets.heterpoisson`)."""

    name: ClassVar[str] = "heterpoisson"
    Config: ClassVar[type[TargetConfig]] = HeterPoissonConfig
    levels: tuple[str, ...] = ("api", "weights", "trace")
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
        details = {
            "noise_multiplier": p["noise_multiplier"],
            "noise_std": p["noise_std"],
            "noise": cfg.noise,
            "noise_law": ("SML: sqrt(W)*noise_std*N(0,I), one W~Exp(1) per step" if cfg.noise == "sml"
                          else "Gaussian N(0, noise_std^2 I)"),
            "laplace_scale": p["noise_std"] / math.sqrt(2) if cfg.noise == "sml" else None,
            "sensitivity": 2 * cfg.clip_norm,
            "sensitivity_note": "k units of 2c per affected sub-graph, c (k=0.5) when the node is central",
            "clip_norm": cfg.clip_norm,
            "sampling_rate": p["sampling_rate"],
            "neighbors": cfg.neighbors,
            "steps": p["steps"],
            "steps_run": p["run_steps"],
            "expected_batch": p["expected_batch"],
            "n_train": p["n_train"],
            "accountant_variant": cfg.accountant,
            "rho": ("q*delta_0.5 + (1-q)*Poisson(q*M)" if cfg.noise == "sml"
                    else f"q*delta_0.5 + (1-q)*Bin(D={p['max_degree']}, q*min(1,M/D))"),
            "remove_overlap": cfg.remove_overlap,
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
                     gdp_mu=None, details=details)

    # ------------------------------------------------------------------ sampler
    @staticmethod
    def outdegrees(graph: Any) -> torch.Tensor:
        deg = getattr(graph, "public_outdeg", None)
        if deg is not None:
            return torch.as_tensor(deg).long().cpu()
        return torch.bincount(graph.edge_index[0].cpu(), minlength=graph.num_nodes)

    def sample_batch(self, graph: Any, rng: torch.Generator, sampling_rate: float | None = None,
                     *, _cache: dict | None = None) -> Batch:
        """One Heter-Poisson batch (CPU tensors): central ids and kept peripheral edges src → dst."""
        cache = _cache if _cache is not None else self._sampler_cache(graph)
        q = self.plan(graph)["sampling_rate"] if sampling_rate is None else float(sampling_rate)
        n, train_idx, src, dst, keep_p = cache["n"], cache["train_idx"], cache["src"], cache["dst"], cache["keep_p"]
        coins = torch.rand(train_idx.numel(), generator=rng)
        central = train_idx[coins < q]
        is_central = torch.zeros(n, dtype=torch.bool)
        is_central[central] = True
        sel = is_central[dst]
        e_src, e_dst, p = src[sel], dst[sel], keep_p[sel]
        kept = torch.rand(e_src.numel(), generator=rng) < p
        e_src, e_dst = e_src[kept], e_dst[kept]
        if self.bug("isolated-fallback"):
            iso = central[cache["indeg"][central] == 0]
            if iso.numel():
                m = self.config.neighbors
                extra = torch.randint(0, n, (iso.numel() * m,), generator=rng)
                e_src = torch.cat([e_src, extra])
                e_dst = torch.cat([e_dst, iso.repeat_interleave(m)])
        if self.bug("order-overlap"):
            pos = torch.full((n,), -1, dtype=torch.long)
            pos[central[torch.randperm(central.numel(), generator=rng)]] = torch.arange(central.numel())
            drop = is_central[e_src] & (pos[e_src] < pos[e_dst])
        else:
            drop = is_central[e_src]
        keep = ~drop
        return Batch(central=central, src=e_src[keep], dst=e_dst[keep])

    def _sampler_cache(self, graph: Any) -> dict:
        src, dst = graph.edge_index[0].cpu(), graph.edge_index[1].cpu()
        outdeg = self.outdegrees(graph)
        keep_p = torch.clamp(self.config.neighbors / outdeg[src].clamp(min=1).double(), max=1.0)
        return dict(n=int(graph.num_nodes), src=src, dst=dst, keep_p=keep_p,
                    train_idx=graph.train_mask.cpu().nonzero().view(-1),
                    indeg=torch.bincount(dst, minlength=graph.num_nodes))

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

    def _predict_fn(self, model: StarNet, seed: int, train_mask: torch.Tensor):
        device = self.device

        @torch.no_grad()
        def predict(graph: Any, nodes=None) -> torch.Tensor:
            nodes = (torch.arange(graph.num_nodes) if nodes is None
                     else torch.as_tensor(nodes, dtype=torch.long).view(-1).cpu())
            gen = torch.Generator().manual_seed(seed)
            tm = train_mask if train_mask.numel() == graph.num_nodes else graph.train_mask.cpu()
            uniq, inv = torch.unique(nodes, return_inverse=True)
            src, dst = self._inference_edges(graph, uniq, gen, tm)
            x = graph.x.float().to(device)
            packed = self._pack(x, uniq, src, dst)
            model.eval()
            return F.softmax(model(packed), dim=1).float().cpu()[inv]

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
        cfg = self.config
        p = self.plan(graph)
        q, T_run = p["sampling_rate"], p["run_steps"]
        std = 0.0 if self.bug("no-noise") else p["noise_std"]
        device = self.device
        canary_gradient, canary_node = canary_from(graph, canary_gradient, canary_node)
        if canary_whole_node is None:
            canary_whole_node = bool(getattr(graph, "canary_whole_node", False))
        if canary_whole_node:
            if canary_node is None:
                raise ValueError("canary_whole_node needs canary_node")
            if not bool(graph.train_mask[int(canary_node)]):
                raise ValueError(f"canary_node {canary_node} is not a training node")
        cache = self._sampler_cache(graph)
        train_mask = graph.train_mask.cpu()
        x = graph.x.float().to(device)
        y = graph.y.long().to(device)
        classes = int(graph.y.max()) + 1
        with seeded(rng):
            model = StarNet(x.size(1), cfg.hidden, classes, cfg.backbone).to(device)
        canary_rng = child_generator(rng)  # always split, so worlds with and without canary align
        infer_seed = int(torch.randint(0, 2**62, (1,), generator=rng).item())
        shapes = {k: tuple(v.shape) for k, v in model.named_parameters()}
        d = sum(v.numel() for v in model.parameters())
        gc = None
        if canary_gradient is not None:
            gc = torch.as_tensor(canary_gradient, dtype=torch.float32).to(device)
            if gc.shape[-1] != d or gc.dim() not in (1, 2) or (gc.dim() == 2 and gc.size(0) < T_run):
                raise ValueError(f"canary_gradient must have shape ({d},) or ({T_run}, {d}), got {tuple(gc.shape)}")
            if canary_node is not None and not bool(train_mask[int(canary_node)]):
                raise ValueError(f"canary_node {canary_node} is not a training node")
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        expected_batch = max(q * int(train_mask.sum()), 1e-12)
        trace = HeterPoissonTrace(noise=cfg.noise, noise_std=std, clip_norm=cfg.clip_norm, sampling_rate=q,
                                  expected_batch=expected_batch, accounted_steps=p["steps"], shapes=shapes)
        predict = self._predict_fn(model, infer_seed, train_mask)
        eval_every = cfg.eval_every or max(1, T_run // 10)
        val_idx = graph.val_mask.cpu().nonzero().view(-1)
        best = (-1.0, None)

        def loss_of(out, target):
            return F.cross_entropy(out.unsqueeze(0), target.unsqueeze(0))

        for t in range(T_run):
            batch = self.sample_batch(graph, rng, q, _cache=cache)
            model.train()
            total = torch.zeros(d, device=device)
            if batch.central.numel():
                packed = self._pack(x, batch.central, batch.src, batch.dst)
                yc = y[batch.central.to(device)]
                for i in range(0, packed.size(0), _CHUNK):
                    grads = per_example_gradients(model, loss_of, packed[i:i + _CHUNK], yc[i:i + _CHUNK])
                    total += clip_rows(flatten(grads), cfg.clip_norm).sum(0)
            canary_in = None
            scale = self.node_canary_scale(batch, int(canary_node)) if canary_whole_node else None
            if gc is not None:
                coin = bool(torch.rand(1, generator=canary_rng).item() < q)
                if scale is not None:
                    canary_in = scale > 0
                else:
                    canary_in = bool((batch.central == int(canary_node)).any()) if canary_node is not None else coin
                if canary_in:
                    g = gc[t] if gc.dim() == 2 else gc
                    total = total + (g if scale is None else scale * g)
            if cfg.noise == "sml":
                noise = sml_sample(d, std, rng, per_coordinate=self.bug("per-coordinate-scale"))
            else:
                noise = std * torch.randn(d, generator=rng, dtype=torch.float64).float()
            noisy = total + noise.to(device)
            trace.steps.append(TraceStep(noisy=noisy.detach().cpu(), central=batch.central.clone(),
                                         canary_in=canary_in, clean=total.detach().cpu(), canary_scale=scale))
            assign_flat_grad(model, noisy / expected_batch)
            opt.step()
            opt.zero_grad(set_to_none=True)
            if (t + 1) % eval_every == 0 or t == T_run - 1:
                if val_idx.numel():
                    pred = predict(graph, val_idx).argmax(1)
                    acc = float((pred == graph.y.cpu()[val_idx]).float().mean())
                else:
                    acc = 0.0
                if acc >= best[0]:
                    best = (acc, {k: v.detach().clone() for k, v in model.state_dict().items()})
        if best[1] is not None:
            model.load_state_dict(best[1])
        accuracy = {}
        with torch.no_grad():
            probs = predict(graph)
        pred = probs.argmax(1)
        ycpu = graph.y.cpu()
        for split in ("train", "val", "test"):
            mask = getattr(graph, f"{split}_mask").cpu()
            accuracy[split] = float((pred[mask] == ycpu[mask]).float().mean()) if mask.any() else float("nan")
        weights = {k: v.detach().cpu().clone() for k, v in model.named_parameters()}
        info = {
            "accuracy": accuracy,
            "steps_run": T_run,
            "steps_accounted": p["steps"],
            "sampling_rate": q,
            "noise_multiplier": p["noise_multiplier"],
            "noise_std": std,
            "mean_batch": float(np.mean([s.central.numel() for s in trace.steps])) if trace.steps else 0.0,
            "fresh_noise_per_query": False,
            "randomised_inference": "neighbour sampling with a seed fixed at fit time",
            "dimension": d,
        }
        return Release(api=predict, weights=weights, mechanism=None, trace=trace, info=info)

