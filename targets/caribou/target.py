"""The CARIBOU target: accounting, training, PCMP and the release (see :mod:`targets.caribou`)."""
from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.data import Data

from graphs.ops import degrees, drop_isolated_with_notice
from targets.common import dpsgd
from targets.common.accounting import (
    DEFAULT_ORDERS, calibrate_decreasing, gap_delta, gaussian_rdp, gdp_epsilon, gdp_mu, rdp_to_dp,
    subsampled_gaussian_rdp)
from targets.base import (Claim, GaussianStep, Lazy, Unstated, Level, MechanismStep, Release, Target, TargetConfig, child_generator,
                          noise_generator, seeded, split_accuracies)
from targets.caribou.accountant import compositions, edge_sensitivity, node_sensitivity
from targets.caribou.config import CaribouConfig
from targets.caribou.model import (
    ClassificationModule, Encoder, _fit_best_val, bound_degree, cgl, feature_fingerprint, project)
from targets.caribou.stacked import CMBatch
from targets.caribou import probe
from targets.caribou.catalogue import CATALOGUE
from targets.common.catalogue import Entry


class Caribou(Target[CaribouConfig]):
    """CARIBOU (PCMP + two-channel classifier); see :mod:`targets.caribou`."""

    name: ClassVar[str] = "caribou"
    #: reference-machine seconds (benchmarks/calibrate_costs.py, default config on csbm)
    trial_costs = {Level.MECHANISM: 0.005, Level.API: 0.2, Level.WEIGHTS: 0.2}
    setup_seconds = 1.0
    Config: ClassVar[type[TargetConfig]] = CaribouConfig
    levels: tuple[Level, ...] = (Level.API, Level.WEIGHTS, Level.MECHANISM)
    batched: ClassVar[bool] = True
    bugs: ClassVar[dict[str, str]] = {
        "no-noise": "PCMP adds no noise while claiming the calibrated ε",
        "release-all-hops": "releases every hop X⁽¹⁾…X⁽ᴷ⁾ while claiming the convergent (hidden-state) bound "
                            "(a violation where K ≫ M(K, C_L), e.g. hops=20 contraction=0.3; at the defaults "
                            "K/M = 1.38 and a real edge moves a hop by about 0.55 of Eq. 6's bound, so the "
                            "released hops stay within the claim)",
        "no-projection": "skips the row projection to the unit ball that the sensitivity relies on",
    }
    #: this target's entries in the bug catalogue (``python -m audit regress``)
    catalogue: ClassVar[tuple[Entry, ...]] = CATALOGUE
    #: small audits where this target fixtures an attack's contract check: attack → (params, canary)
    attack_fixtures: ClassVar[dict[str, tuple[dict[str, str], str]]] = {
        "edge-correlation": ({"encoder_epochs": "10"}, "low-degree-edge")}
    published_accuracy: ClassVar[dict[tuple[str, str, float], float]] = {
        # Table 3 (EDP, top accuracy over 3 runs × grid) and Table 10 (NDP)
        **{("cora", "edge", e): a for e, a in [(1, 85.1), (2, 86.9), (4, 87.3), (8, 88.4), (16, 88.6), (32, 88.6)]},
        **{("computers", "edge", e): a for e, a in [(1, 92.0), (2, 92.1), (4, 92.2), (8, 92.2)]},
        **{("photo", "edge", e): a for e, a in [(1, 95.8), (2, 95.9), (4, 95.9), (8, 96.0)]},
        **{("chain-s", "edge", e): a for e, a in [(1, 84.4), (2, 90.6), (4, 90.6), (8, 93.8)]},
        **{("chain-m", "edge", e): a for e, a in [(1, 82.5), (2, 82.5), (4, 82.5), (8, 82.5)]},
        **{("chain-l", "edge", e): a for e, a in [(1, 70.0), (2, 73.3), (4, 73.3), (8, 75.0)]},
        **{("chain-x", "edge", e): a for e, a in [(1, 66.0), (2, 68.0), (4, 69.0), (8, 70.0)]},
        **{("cora", "node", e): a for e, a in [(1, 66.8), (2, 70.3), (4, 75.5), (8, 79.9)]},
        **{("photo", "node", e): a for e, a in [(1, 93.7), (2, 94.7), (4, 95.0), (8, 95.3)]},
    }

    def trial_cost(self, level: str) -> float:
        """The default configuration's cost, the mechanism's scaled by its hops."""
        cost = super().trial_cost(level)
        return cost * self.config.hops / type(self.config)().hops if level == Level.MECHANISM else cost

    def __init__(self, config: CaribouConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self._encoder_cache: dict[str, Encoder] = {}
        self._x0_cache: dict[str, torch.Tensor] = {}
        self._claims: dict[tuple, Claim] = {}

    # ----------------------------------------------------------------------------- accounting
    def delta_for(self, graph: Data) -> float:
        if self.config.delta is not None:
            return self.config.delta
        return gap_delta(graph.edge_index.size(1) if self.config.unit == "edge" else graph.num_nodes)

    def degree_bounds(self, graph: Data) -> tuple[int, int]:
        """(D_min, D_max): the config's public values, else read off the graph."""
        c = self.config
        deg = degrees(graph)
        d_min = c.d_min if c.d_min is not None else int(deg.min())
        if d_min < 1:
            raise ValueError(f"CARIBOU's sensitivity needs every node to have degree >= 1 (the paper removes "
                             f"isolated nodes: Caribou.preprocess); this graph has {int((deg == 0).sum())} "
                             f"isolated nodes")
        d_max = c.d_max if c.d_max is not None else min(int(deg.max()), c.degree_bound)
        return d_min, d_max

    def claim_assumptions(self, graph: Data) -> list[str]:
        """Eq. 6/8 bound a hop's change for graphs whose degrees lie in [D_min, D_max], D_min ≥ 1
        (the paper drops isolated nodes); a public D_min or D_max in the config is part of it."""
        deg = degrees(graph)
        c, out = self.config, []
        if bool((deg == 0).any()):
            out.append(f"{int((deg == 0).sum())} node(s) of degree 0: Eq. 6/8 need every degree >= 1 "
                       "(the paper drops isolated nodes)")
        if c.d_min is not None and bool((deg[deg > 0] < c.d_min).any()):
            out.append(f"a degree below the public D_min = {c.d_min}")
        if c.d_max is not None and c.unit == "edge" and bool((deg > c.d_max).any()):
            out.append(f"a degree above the public D_max = {c.d_max}")
        return out

    def public_params(self, graph: Data) -> dict[str, Any]:
        d_min, d_max = self.degree_bounds(graph)
        return {**super().public_params(graph), "d_min": d_min, "d_max": d_max}

    def sensitivity(self, graph: Data) -> float:
        c = self.config
        d_min, d_max = self.degree_bounds(graph)
        if c.unit == "edge":
            return edge_sensitivity(d_min, c.contraction, c.alpha1)
        return node_sensitivity(d_min, d_max, graph.num_nodes, c.contraction, c.alpha1)

    def _dpsgd_steps(self, graph: Data) -> tuple[float, int, int]:
        """(sampling rate, encoder steps, CM steps) of the node-level DP-SGD phases."""
        n_train = int(graph.train_mask.sum())
        q = min(1.0, self.config.batch_size / n_train)
        per_epoch = max(1, round(1 / q))
        return q, self.config.encoder_epochs * per_epoch, self.config.cm_epochs * per_epoch

    def _epsilon_at(self, sigma: float, graph: Data, delta: float) -> tuple[float, float | None, float]:
        """(ε, μ or None, best RDP order or nan) of the whole pipeline at multiplier σ."""
        c = self.config
        m = compositions(c.hops, c.contraction, c.pam) * c.queries
        if c.unit == "edge":
            if c.accountant == "gdp":
                mu = math.sqrt(m) / sigma
                return gdp_epsilon(mu, delta), mu, math.nan
            rho = m / (2 * sigma**2)  # Theorem 11 with ε_DAE = ε_CM = 0: min_α αρ + ln(1/δ)/(α−1)
            return rho + 2 * math.sqrt(rho * math.log(1 / delta)), None, 1 + math.sqrt(math.log(1 / delta) / rho)
        q, t_enc, t_cm = self._dpsgd_steps(graph)
        rdp = gaussian_rdp(DEFAULT_ORDERS, sigma) * m
        rdp = rdp + subsampled_gaussian_rdp(DEFAULT_ORDERS, q, sigma, t_enc + t_cm)
        conversion = "improved" if c.accountant == "gdp" else "classic"
        eps, order = rdp_to_dp(DEFAULT_ORDERS, rdp, delta, conversion=conversion)
        return eps, None, order

    def claim(self, graph: Data) -> Claim:
        key = (id(graph), graph.edge_index.size(1), graph.num_nodes)
        if key in self._claims:
            return self._claims[key]
        c = self.config
        delta = self.delta_for(graph)
        sens = self.sensitivity(graph)
        m = compositions(c.hops, c.contraction, c.pam)
        if c.noise_multiplier is not None:
            sigma = c.noise_multiplier
        elif c.unit == "edge" and c.accountant == "gdp":
            sigma = math.sqrt(m * c.queries) / gdp_mu(c.epsilon, delta)  # closed form, §3.4(a)
        elif c.unit == "edge":
            big_l = math.log(1 / delta)
            rho = (math.sqrt(big_l + c.epsilon) - math.sqrt(big_l)) ** 2  # §3.4(b)
            sigma = math.sqrt(m * c.queries / (2 * rho))
        else:
            sigma = calibrate_decreasing(lambda s: self._epsilon_at(s, graph, delta)[0], c.epsilon, lo=0.1, hi=2.0)
        eps, mu, order = self._epsilon_at(sigma, graph, delta)
        notes: dict[str, Any] = {
            "M": m,
            "hops": c.hops, "contraction": c.contraction, "alpha1": c.alpha1, "pam": c.pam,
            "d_min": self.degree_bounds(graph)[0], "queries": c.queries,
        }
        if mu is not None:
            notes["mu"] = mu
        if not math.isnan(order):
            notes["rdp_order"] = order
        if c.unit == "node":
            q, t_enc, t_cm = self._dpsgd_steps(graph)
            notes.update({"d_max": self.degree_bounds(graph)[1], "sampling_rate": q,
                            "encoder_steps": t_enc, "cm_steps": t_cm, "clip": c.clip})
        unit = "edge (one undirected edge)" if c.unit == "edge" else "node (add/remove with incident edges)"
        claim = Claim(epsilon=eps, delta=delta, accountant=c.accountant + ("" if c.unit == "edge" else " (rdp+dpsgd)"),
                      unit=unit, gdp_mu=mu, step=GaussianStep(sigma, sens), notes=notes, queries=c.queries,
                      composition=Unstated(f"M = {m:g} effective Gaussian hops (Theorem 1) per query, {c.queries} "
                                           "queries" + ("" if c.unit == "edge" else ", with the encoder's DP-SGD")))
        self._claims[key] = claim
        return claim

    # ----------------------------------------------------------------------------- training
    def _train_encoder(self, graph: Data, rng: torch.Generator, sigma: float | None = None) -> Encoder:
        """The pre-trained encoder (DP-SGD at node level); X⁽⁰⁾ = :meth:`embed`.

        Edge level: full-batch Adam with cross-entropy on the training nodes, keeping the epoch of
        best validation accuracy (GAP's trainer, ``checkpoint=True``, which CARIBOU reuses).
        """
        c = self.config
        x, y = graph.x.to(self.device), graph.y.to(self.device)
        classes = int(graph.y.max()) + 1
        train = graph.train_mask.to(self.device)
        edge = c.unit == "edge"
        with seeded(rng):
            enc = Encoder(x.size(1), c.hidden, classes, batch_norm=edge, dropout=c.dropout if edge else 0.0
                          ).to(self.device)
        opt = torch.optim.Adam(enc.parameters(), lr=c.lr, weight_decay=c.weight_decay)
        if edge:
            _fit_best_val(enc, x, graph, c.encoder_epochs, opt, child_generator(rng, x.device))
        else:
            sigma = self.claim(graph).noise_multiplier if sigma is None else sigma
            self._dp_train(enc, x[train], y[train], opt, sigma, self._dpsgd_steps(graph)[1], rng)
        enc.eval()
        return enc

    def embed(self, encoder: Encoder, graph: Data) -> torch.Tensor:
        """X⁽⁰⁾: the encoder's hidden embedding with rows scaled to unit norm."""
        encoder.eval()
        with torch.no_grad():
            return encoder.embed(graph.x.to(self.device))

    def _dp_train(self, model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor, opt: torch.optim.Optimizer,
                  sigma: float, steps: int, rng: torch.Generator) -> None:
        """DP-SGD (Adam on the noisy mean): Poisson sampling, per-example clipping, N(0, (σC)²)."""
        c = self.config
        q = min(1.0, c.batch_size / inputs.size(0))
        expected = q * inputs.size(0)
        noise_std = 0.0 if self.bug("no-noise") else sigma * c.clip

        def loss_of(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(out.unsqueeze(0), target.unsqueeze(0))

        model.train()
        for _ in range(steps):
            idx = dpsgd.poisson_sample(inputs.size(0), q, rng).to(inputs.device)
            if idx.numel():
                grads = dpsgd.flatten(dpsgd.per_example_gradients(model, loss_of, inputs[idx], labels[idx]))
                clipped = dpsgd.clip_rows(grads, c.clip)
            else:
                n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
                clipped = torch.zeros(0, n_params, device=inputs.device)
            noisy = dpsgd.noisy_sum(clipped, noise_std, rng)
            opt.zero_grad()
            dpsgd.assign_flat_grad(model, noisy / expected)
            opt.step()

    def _encoder_key(self, graph: Data) -> str:
        """What the edge-level encoder depends on: features, labels, the split, and its own
        hyper-parameters (so one cache can serve a grid of CGL settings)."""
        c = self.config
        return f"{feature_fingerprint(graph)}:{c.hidden}:{c.lr}:{c.weight_decay}:{c.dropout}:{c.encoder_epochs}"

    def prepare(self, graph: Data) -> None:
        """Cache X⁽⁰⁾ under edge-level DP: the encoder never sees edges, so both worlds share it.

        The cached encoder is one fixed draw of a computation that does not depend on the
        protected edge; auditing conditionally on it is sound. Not done at node level.
        """
        if self.config.unit == "edge":
            key = self._encoder_key(graph)
            if key not in self._encoder_cache:
                self._encoder_cache[key] = self._train_encoder(graph, torch.Generator().manual_seed(0x0E2C))

    def preprocess(self, graph: Data) -> tuple[Data, str | None]:
        """The paper's pre-processing (GAP's loader, specs/caribou.md §2.1): drop isolated nodes,
        so that D_min ≥ 1 as the sensitivities of Eq. 6/8 need. Returns the graph to train on and a
        one-line notice (None when nothing was dropped). Masks, features and labels follow the kept
        nodes; the graph is re-indexed."""
        return drop_isolated_with_notice(graph, "caribou")

    def cached_work(self) -> str | None:
        if self.config.unit == "edge":
            return ("edge-free encoder trained once per worker (depends on features and labels only), "
                    "with its embedding X⁽⁰⁾")
        return None

    def step_maps(self, graph: Data) -> list[Any]:
        return probe.step_maps(self)

    def takes_witness(self) -> bool:
        return probe.takes_witness(self.config)

    @classmethod
    def witness_plan(cls, doc: dict[str, Any], params: dict[str, str]) -> Any:
        return probe.witness_plan(doc, params)

    def _edge_encoder(self, graph: Data) -> tuple[str, Encoder, torch.Tensor]:
        """Edge level: (encoder key, cached encoder, cached X⁽⁰⁾), one fingerprint per call."""
        key = self._encoder_key(graph)
        if key not in self._encoder_cache:
            self._encoder_cache[key] = self._train_encoder(graph, torch.Generator().manual_seed(0x0E2C))
        if key not in self._x0_cache:
            self._x0_cache[key] = self.embed(self._encoder_cache[key], graph)
        return key, self._encoder_cache[key], self._x0_cache[key]

    def _encoder(self, graph: Data, rng: torch.Generator, sigma: float | None = None) -> Encoder:
        if self.config.unit == "edge":
            return self._edge_encoder(graph)[1]
        return self._train_encoder(graph, rng, sigma)

    def pcmp(self, graph: Data, x0: torch.Tensor, sigma_abs: float, rng: torch.Generator | None) -> list[torch.Tensor]:
        """Algorithm 1 (projecting the freshly noised X⁽ᵏ⁺¹⁾); returns every hop X⁽¹⁾…X⁽ᴷ⁾."""
        c = self.config
        x = x0
        hops = []
        noise_rng = noise_generator(rng, x0.device) if rng is not None and sigma_abs > 0 else None
        for _ in range(c.hops):
            x = cgl(graph, x, x0, c.contraction, c.alpha1, c.beta)
            if noise_rng is not None:
                x = x + sigma_abs * torch.randn(x.shape, generator=noise_rng, dtype=x.dtype, device=x.device)
            if not self.bug("no-projection"):
                x = project(x, c.projection)
            hops.append(x)
        return hops

    def _pcmp_batch(self, graph: Data, x0: torch.Tensor, sigma_abs: float, rngs: list[torch.Generator]
                    ) -> list[torch.Tensor]:
        """:meth:`pcmp` for ``len(rngs)`` trials at once on an n × B × h state: hop by hop, trial j's
        noise is drawn from ``rngs[j]`` with the shape, dtype and order of :meth:`pcmp`. Returns
        every hop, each n × B × h."""
        c = self.config
        n, h = x0.shape
        batch = len(rngs)
        base = x0.unsqueeze(1)
        x = base.expand(n, batch, h).contiguous()
        hops = []
        gens = [noise_generator(rng, x0.device) for rng in rngs] if sigma_abs > 0 else []
        for _ in range(c.hops):
            x = cgl(graph, x, base, c.contraction, c.alpha1, c.beta)
            if sigma_abs > 0:
                noise = torch.empty((batch, n, h), dtype=x.dtype, device=x.device)
                for j, g in enumerate(gens):
                    torch.randn((n, h), generator=g, dtype=x.dtype, device=x.device, out=noise[j])
                x.add_(noise.mul_(sigma_abs).transpose(0, 1))
            if not self.bug("no-projection"):
                x = project(x, c.projection, inplace=True)
            hops.append(x)
        return hops

    def noiseless(self, graph: Data) -> torch.Tensor:
        """Noiseless X⁽ᴷ⁾ from the cached (edge-level) encoder; used to search for canaries."""
        self.prepare(graph)
        encoder = self._encoder(graph, torch.Generator().manual_seed(0))
        return self.pcmp(graph, self.embed(encoder, graph), 0.0, None)[-1]

    def _train_cm(self, graph: Data, x0: torch.Tensor, xk: torch.Tensor, rng: torch.Generator,
                  sigma: float) -> nn.Module:
        """Node level: the CM on [X⁽⁰⁾, X⁽ᴷ⁾] by DP-SGD. (Edge level: full-batch Adam keeping the
        epoch of best validation accuracy, GAP's trainer, for a batch's CMs at once:
        :class:`~targets.caribou.stacked.CMBatch`.)"""
        c = self.config
        z = torch.cat([x0, xk], dim=1)
        y = graph.y.to(self.device)
        train = graph.train_mask.to(self.device)
        cm, _ = self._new_cm(graph, rng)
        opt = torch.optim.Adam(cm.parameters(), lr=c.lr, weight_decay=c.weight_decay)
        self._dp_train(cm, z[train], y[train], opt, sigma, self._dpsgd_steps(graph)[2], rng)
        cm.eval()
        return cm

    def _new_cm(self, graph: Data, rng: torch.Generator) -> tuple[ClassificationModule, torch.Generator | None]:
        """A freshly initialised CM (from `rng`) and, at edge level, its dropout generator (split
        off `rng` next: :func:`~targets.caribou.stacked.train` and ``_fit_best_val`` draw from it)."""
        c = self.config
        edge = c.unit == "edge"
        with seeded(rng):
            cm = ClassificationModule(c.hidden, int(graph.y.max()) + 1, batch_norm=edge,
                                      dropout=c.dropout if edge else 0.0,
                                      x0_dropout=c.x0_dropout if edge else 0.0).to(self.device)
        return cm, child_generator(rng, self.device) if edge else None

    def fit(self, graph: Data, rng: torch.Generator) -> Release:
        c = self.config
        if c.unit == "edge":
            return self.fit_batch(graph, [rng])[0]
        claim = self.claim(graph)
        sigma_abs = 0.0 if self.bug("no-noise") else claim.noise_std
        sigma = claim.noise_multiplier
        # Node level: the claim uses the public D_min/D_max of the input graph; bounding degrees can
        # leave a node isolated (D_min = 0), outside the paper's Eq. 8 assumptions (logged, not fixed).
        work = bound_degree(graph, c.degree_bound, rng)
        encoder = self._encoder(work, rng, sigma)
        x0 = self.embed(encoder, work)
        hops = self.pcmp(work, x0, sigma_abs, rng)
        return self._release(graph, work, encoder, x0, hops, rng, None)

    def fit_batch(self, graph: Data, rngs: list[torch.Generator]) -> list[Release]:
        """Edge level: the cached encoder and X⁽⁰⁾ once, then PCMP for every trial at once
        (:meth:`_pcmp_batch`); the trials' CMs are trained together when one is first needed
        (:class:`~targets.caribou.stacked.CMBatch`). Node level (per-trial degree bound and DP-SGD
        encoder): one :meth:`fit` per trial."""
        c = self.config
        if c.unit != "edge":
            return [self.fit(graph, rng) for rng in rngs]
        if not rngs:
            return []
        claim = self.claim(graph)
        sigma_abs = 0.0 if self.bug("no-noise") else claim.noise_std
        fingerprint, encoder, x0 = self._edge_encoder(graph)
        hops = self._pcmp_batch(graph, x0, sigma_abs, rngs)
        mean_key = ("caribou: noiseless PCMP", fingerprint, c.hops, c.contraction, c.alpha1, c.beta,
                    c.projection, self.bug("no-projection"), str(self.device))
        kept = hops if self.bug("release-all-hops") else hops[-1:]  # _release reads the last hop only
        cms = CMBatch(x0, graph.y.to(self.device), graph.train_mask.to(self.device), graph.val_mask.to(self.device),
                      c.cm_epochs, c.lr, c.weight_decay)
        return [self._release(graph, graph, encoder, x0, [x[:, j].contiguous() for x in kept], rng, mean_key, cms)
                for j, rng in enumerate(rngs)]

    def _release(self, graph: Data, work: Data, encoder: Encoder, x0: torch.Tensor, hops: list[torch.Tensor],
                 rng: torch.Generator, mean_key: Any, cms: CMBatch | None = None) -> Release:
        """The release of one trial whose PCMP hops are `hops`; splits the classifier's and the
        inference's generators off `rng` (after the PCMP noise, as in the paper's order). Edge
        level: the CM joins the batch `cms`, trained with the batch's other CMs when first needed."""
        c = self.config
        claim = self.claim(graph)
        sigma_abs = 0.0 if self.bug("no-noise") else claim.noise_std
        sigma = claim.noise_multiplier
        xk = hops[-1]
        cm_rng = child_generator(rng)
        inference_rng = child_generator(rng)
        state: dict[str, Any] = {"queries": 0}
        if cms is not None:
            index = cms.add(lambda: self._new_cm(graph, cm_rng), xk)

        def cm() -> nn.Module:
            if cms is not None:
                return cms.module(index)
            if "cm" not in state:
                state["cm"] = self._train_cm(work, x0, xk, cm_rng, sigma)
            return state["cm"]

        def predict(query: Data | None = None, nodes: torch.Tensor | None = None) -> torch.Tensor:
            """Posteriors. A query graph other than the training graph is a fresh PCMP release: with
            the training graph's node set, the query supplies features and the server propagates
            over its private edges (LinkTeller's inference setting); otherwise over the query's."""
            if query is None or query is graph:
                q0, qk = x0, xk
            else:
                state["queries"] += 1
                q0 = self.embed(encoder, query)  # the frozen encoder on the query's features
                edges = work if query.num_nodes == graph.num_nodes else query
                qk = self.pcmp(edges, q0, sigma_abs, inference_rng)[-1]
            model = cm()
            with torch.no_grad():
                probs = torch.softmax(model(torch.cat([q0, qk], dim=1)), dim=1).cpu()
            return probs if nodes is None else probs[nodes]

        def weights() -> dict[str, torch.Tensor]:
            return {k: v.detach().cpu() for k, v in cm().state_dict().items()}

        def accuracy() -> dict[str, float]:
            return split_accuracies(predict().argmax(1), graph)

        released = hops if self.bug("release-all-hops") else [xk]
        steps: list[MechanismStep] = []
        for k, out in enumerate(released):
            if self.bug("release-all-hops") or c.hops == 1:
                # X(k+1) = Π(CGL(X(k)) + N(0, s²)) given X(k): one hop's exact law (with hops=1 the
                # release itself), declared with the pre-projection mean
                prev = x0 if k == 0 else hops[k - 1]
                mean = (lambda g, prev=prev: cgl(g, prev, x0, c.contraction, c.alpha1, c.beta))
                projected = c.projection == "ball" if self.bug("release-all-hops") else not self.bug("no-projection")
                steps.append(MechanismStep(output=out, mean=mean, noise_std=claim.noise_std,
                                           name=f"X({k + 1}) given X({k})", row_projected=projected,
                                           mean_key=None if mean_key is None or k else (*mean_key, "X(1) given X(0)")))
            else:
                steps.append(MechanismStep(output=out, mean=lambda g: self.pcmp(g, x0, 0.0, None)[-1],
                                           name=f"X({c.hops}) (noiseless PCMP as mean)", mean_key=mean_key))
        isolated = int((degrees(work) == 0).sum())
        return Release(api=predict, weights=Lazy(weights), mechanism=steps,
                       info={"fresh_noise_per_query": True, "accuracy": Lazy(accuracy), "query_count": state,
                             "isolated_after_degree_bound": isolated})
