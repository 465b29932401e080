"""EdgeRand: randomised response on the adjacency, then a non-private GCN (LinkTeller's DP defence).

Wu, Long, Zhang & Li, "LinkTeller", IEEE S&P 2022; spec ``shared/specs/linkteller.md`` §7.1.

The graph is perturbed ONCE, and a normal 2-layer GCN (:class:`targets.gcn.NonPrivateGCN`, by
composition) is trained and queried on the perturbed graph; every API query is post-processing of
the perturbed adjacency, so queries cost no privacy. Two variants (``variant``):

* ``rr`` (default, the paper's EdgeRand): with ``s = 2 / (e^ε + 1)``, every unordered pair i < j
  is, with probability s, replaced by a fair coin, else kept; the upper triangle is then mirrored.
  So ``P[Ã=1 | A=1] = 1 − s/2`` and ``P[Ã=1 | A=0] = s/2``, a ratio of exactly e^ε: pure ε-edge-DP
  (one undirected edge = one upper-triangular entry). The graph gets about ``(s/2)·n(n−1)/2``
  spurious edges (dense for sparse graphs at small ε).
* ``density`` (the density-preserving randomised response used for "RandEdge" baselines, spec
  ``dpdgc.md`` §5): ``ε_link = (1 − density_share)·ε``, ``ε_density = density_share·ε``; a noisy
  density ``d̃ = |E| / M + Lap(1 / (M·ε_density))`` over the M = n(n−1)/2 pairs (one edge moves the
  density by 1/M), ``p = sigmoid(ε_link)``, ``q = min(1, d̃ / (2p·d̃ − p − d̃ + 1))``; an edge stays with
  probability ``p·q`` and a non-edge becomes an edge with probability ``(1 − p)·q``. The likelihood
  ratios are ``p/(1−p) = e^{ε_link}`` and ``(1 − (1−p)q)/(1 − pq) ≤ e^{ε_link}``, so by sequential
  composition the release is pure ε-edge-DP and the expected density stays ≈ d̃. (The reference
  code's density is nnz/n² with sensitivity 1/n²; here it is the upper-triangle density with its
  exact sensitivity 1/M.)

Claim: pure ε-DP. The ``delta`` field is formal only (our claims need δ > 0; default 1e-5); the
accountant string says so. Calibration from ε is direct (no root finding).

Views: ``mechanism`` (the released adjacency Ã, the perturbation's output, with its exact
log-density, so ``mechanism-lrt``'s score is the exact likelihood ratio: ±ε at the canary pair for
``rr``; for ``density`` a first step, the noisy edge count M·d̃, with its Laplace density), ``api``
(the GCN's ``predict``; same-size queries use the query's features and the *perturbed* private
edges; an inductive query graph of another size is itself perturbed once per query with the same
mechanism and fresh randomness split off at fit time) and ``weights``. The GCN is trained the first
time ``api`` or ``weights`` is read (a batch's runs together), from a generator split off at fit
time, so a release is the same whether or not it is: a mechanism-level audit trains no GCN.

Cost: the perturbation draws one uniform per unordered pair, O(n²) time and memory (n = 600 csbm:
179,700 pairs, milliseconds; Cora 2,708 nodes: 3.7 M pairs, fine; beyond ~50k nodes the dense
draw is impractical, as in the reference code). At small ε the perturbed graph is dense
(``rr``: ≈ s/2 of all pairs), and GCN training then costs O(|Ẽ|) per epoch (csbm at ε = 1:
≈ 48 k undirected edges, 27 % of the pairs, against 2.4 k in the graph: the two 16-wide sparse
products of an epoch are most of a trial). ``fit_batch`` perturbs once per run, each run with its
own generator, and trains the K GCNs stacked (:meth:`targets.gcn.NonPrivateGCN.fit_graphs`).

Bugs: ``no-noise`` — the adjacency is released unperturbed while the claim is kept.

:meth:`noiseless` returns the upper-triangular 0/1 adjacency (the deterministic input of the
mechanism): every edge changes it by exactly 1, so canary search has nothing to choose here.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import torch
from torch_geometric.data import Data

from targets.base import Claim, Lazy, NoiseStep, Unstated, LazyDict, Level, MechanismStep, Release, Target, TargetConfig, child_generator
from targets.gcn import GCNConfig, NonPrivateGCN
from targets.common.catalogue import Entry

DEFAULT_DELTA = 1e-5


# ---------------------------------------------------------------------------------------------
# shared helpers (also used by targets.lapgraph)
# ---------------------------------------------------------------------------------------------
def upper_pairs(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column indices of the M = n(n−1)/2 pairs i < j (row-major order)."""
    iu = torch.triu_indices(n, n, offset=1)
    return iu[0], iu[1]


def upper_index(graph: Data) -> torch.Tensor:
    """The positions (pair order of :func:`upper_pairs`) of the graph's undirected edges, each once, sorted."""
    n = int(graph.num_nodes)
    ei = graph.edge_index.cpu()
    a, b = torch.minimum(ei[0], ei[1]), torch.maximum(ei[0], ei[1])
    keep = a != b
    a, b = a[keep], b[keep]
    # linear index of (a, b), a < b, in row-major upper-triangular order
    return torch.unique(a * n - a * (a + 1) // 2 + (b - a - 1))


def upper_adjacency(graph: Data) -> torch.Tensor:
    """The 0/1 upper-triangular adjacency as a length-M bool vector (pair order of :func:`upper_pairs`)."""
    n = int(graph.num_nodes)
    out = torch.zeros(n * (n - 1) // 2, dtype=torch.bool)
    out[upper_index(graph)] = True
    return out


def graph_from_upper(graph: Data, kept: torch.Tensor) -> Data:
    """A copy of `graph` whose edges are the pairs flagged in the length-M vector `kept` (both directions)."""
    n = int(graph.num_nodes)
    rows, cols = upper_pairs(n)
    r, c = rows[kept], cols[kept]
    new = graph.clone()
    ei = torch.stack([torch.cat([r, c]), torch.cat([c, r])])
    order = torch.argsort(ei[0] * n + ei[1])
    new.edge_index = ei[:, order].contiguous()
    return new


def _kept_step(kept: torch.Tensor, mean: Callable[[Data], torch.Tensor], on_kept: float, on_dropped: float
               ) -> MechanismStep:
    """The released adjacency Ã (length-M bool) of a per-pair randomised response, with its exact
    log-density: ``log P(Ã | A) = const + Σ_{edges e of A} (on_kept if Ã_e else on_dropped)``, where
    ``on_kept = log P(Ã_e=1 | A_e=1)/P(Ã_e=1 | A_e=0)`` and ``on_dropped`` the same for Ã_e = 0 (the
    pairs outside A add a term that does not depend on A)."""

    def log_density(g: Data) -> float:
        e = upper_index(g)
        k = int(kept[e].sum())
        return k * on_kept + (e.numel() - k) * on_dropped

    return MechanismStep(output=kept, mean=mean, name="perturbed adjacency (upper triangle)", log_density=log_density)


def laplace(shape: Any, scale: float, rng: torch.Generator, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Laplace(0, scale) samples by inverse CDF from `rng`."""
    u = torch.rand(shape, generator=rng, dtype=dtype) - 0.5
    return -scale * torch.sign(u) * torch.log1p(-2.0 * u.abs().clamp_max(0.5 - 1e-16))


@dataclass
class PerturbedGCNConfig(GCNConfig):
    """What an input-perturbation target shares: the GCN's hyperparameters (``targets.gcn.GCNConfig``,
    LinkTeller's defaults, spec §6), at the edge unit.

    Args:
        unit (str): ``edge`` (one undirected edge; the only unit these mechanisms protect).
    """

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("unit", self.unit == "edge", "'edge'")

    def gcn_config(self) -> GCNConfig:
        """The GCN's own config (a planted bug is the perturbation's, never the GCN's)."""
        return GCNConfig(**{f.name: getattr(self, f.name) for f in dataclasses.fields(GCNConfig) if f.name != "bug"})


@dataclass
class EdgeRandConfig(PerturbedGCNConfig):
    """EdgeRand hyperparameters (spec linkteller.md §7.1).

    Args:
        variant (str): ``rr`` (the paper's randomised response) or ``density`` (density-preserving RR).
        density_share (float): share of ε spent on the noisy density in the ``density`` variant.
    """

    variant: str = "rr"
    density_share: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_all([("variant", self.variant in ("rr", "density"), "'rr' or 'density'"),
                          ("density_share", 0 < self.density_share < 1, "in (0, 1)")])


@dataclass
class Perturbation:
    """One run's perturbation of the adjacency.

    ``kept()`` is the perturbed upper-triangular adjacency (length-M bool) the GCN trains on,
    computed on first call where it is post-processing of ``steps`` (LapGraph's top-T); ``steps``
    are the noisy values the DP proof is about, each with its exact log-density (the white-box view).
    """

    kept: Callable[[], torch.Tensor]
    steps: list[MechanismStep]
    stats: dict[str, Any]
    edges: int  # undirected edges of the perturbed graph


class PerturbedGraphGCN(Target[PerturbedGCNConfig]):
    """Input perturbation of the adjacency + a non-private GCN; subclasses implement :meth:`perturb`.

    Views: ``mechanism`` (the perturbation's noisy values with their exact log-densities: the
    strongest audit, and no GCN is trained for it), ``api`` and ``weights`` (the GCN, trained on the
    perturbed graph the first time either is read; a batch's GCNs train stacked).
    """

    #: reference-machine seconds (benchmarks/calibrate_costs.py, default config on csbm)
    trial_costs = {Level.MECHANISM: 0.004, Level.API: 0.16, Level.WEIGHTS: 0.16}
    setup_seconds = 0.5
    levels: tuple[Level, ...] = (Level.MECHANISM, Level.API, Level.WEIGHTS)
    batched: ClassVar[bool] = True
    bugs: ClassVar[dict[str, str]] = {
        "no-noise": "trains on the true adjacency (no perturbation) while claiming the calibrated ε",
    }
    accountant: ClassVar[str] = ""

    def __init__(self, config: TargetConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self._gcn = NonPrivateGCN(self.config.gcn_config())

    def perturb(self, graph: Data, rng: torch.Generator, noise: bool = True) -> Perturbation:
        """The mechanism run on `graph` with `rng`; ``noise=False`` (the ``no-noise`` bug) releases
        the noiseless values in the same steps, declared with the same law."""
        raise NotImplementedError

    def mechanism_details(self, graph: Data) -> dict[str, Any]:
        raise NotImplementedError

    def claim(self, graph: Data) -> Claim:
        cfg = self.config
        delta = cfg.delta if cfg.delta is not None else DEFAULT_DELTA
        notes = {"pure_dp": True, "delta_note": "pure ε-DP mechanism: δ is formal only", **self.mechanism_details(graph)}
        return Claim(epsilon=float(cfg.epsilon), delta=delta, accountant=self.accountant, unit="edge",
                     step=NoiseStep(sensitivity=1.0), composition=Unstated(f"{self.accountant}: one release"), notes=notes)

    def public_params(self, graph: Data) -> dict[str, Any]:
        return {}

    def noiseless(self, graph: Data) -> torch.Tensor:
        """The deterministic input of the mechanism: the upper-triangular 0/1 adjacency (float)."""
        return upper_adjacency(graph).float()

    def release(self, graph: Data, rng: torch.Generator) -> Perturbation:
        """The mechanism's run (the noiseless values where the ``no-noise`` bug is planted)."""
        run = self.perturb(graph, rng, noise=not self.bug("no-noise"))
        run.stats["perturbed"] = not self.bug("no-noise")
        return run

    def release_graph(self, graph: Data, rng: torch.Generator) -> tuple[Data, dict[str, Any]]:
        """The graph the GCN is trained on (perturbed unless the ``no-noise`` bug is planted)."""
        run = self.release(graph, rng)
        return self._trained_graph(graph, run), run.stats

    def _trained_graph(self, graph: Data, run: Perturbation) -> Data:
        """`run`'s perturbed graph; under the ``no-noise`` bug `graph` itself (the same object, so a
        batch's runs share its normalised adjacency)."""
        return graph if self.bug("no-noise") else graph_from_upper(graph, run.kept())

    def fit(self, graph: Data, rng: torch.Generator) -> Release:
        return self.fit_batch(graph, [rng])[0]

    def fit_batch(self, graph: Data, rngs: list[torch.Generator]) -> list[Release]:
        """``len(rngs)`` runs, run k perturbing `graph` with ``rngs[k]`` only. The GCNs are trained
        when an ``api`` or ``weights`` view is first read, all the batch's together, stacked
        (:meth:`targets.gcn.NonPrivateGCN.fit_graphs`), each from its own generator split off here:
        bitwise ``fit(graph, rngs[k])`` on CPU, whether or not a view is read."""
        children = [(child_generator(rng), child_generator(rng), child_generator(rng)) for rng in rngs]
        runs = [self.release(graph, perturb_rng) for perturb_rng, _, _ in children]

        def train() -> list[Release]:
            return self._gcn.fit_graphs([self._trained_graph(graph, run) for run in runs],
                                        [train_rng for _, _, train_rng in children])

        stack = Lazy(train)
        return [self._wrap(graph, run, stack, k, query_rng)
                for k, (run, (_, query_rng, _)) in enumerate(zip(runs, children))]

    def _wrap(self, graph: Data, run: Perturbation, stack: Lazy, k: int, query_rng: torch.Generator) -> Release:
        n = int(graph.num_nodes)

        def gcn() -> Release:
            return stack.get()[k]

        def predict(query_graph: Any = None, nodes: Any = None) -> torch.Tensor:
            """GCN posteriors on the perturbed graph; an inductive query graph is perturbed first."""
            if query_graph is None or query_graph is graph:
                return gcn().api(None, nodes)
            if int(query_graph.num_nodes) == n:
                return gcn().api(query_graph, nodes)
            q_noisy, _ = self.release_graph(query_graph, query_rng)
            return gcn().api(q_noisy, nodes)

        features, classes, hidden = int(graph.x.size(1)), int(graph.y.max()) + 1, self.config.hidden
        shapes = {"conv1.weight": (hidden, features), "conv1.bias": (hidden,),
                  "conv2.weight": (classes, hidden), "conv2.bias": (classes,)}
        info: dict[str, Any] = {
            "mechanism": self.name, "noisy_edges": run.edges, "perturbation": run.stats,
            "inference": "query features + perturbed private edges", "fresh_noise_per_query": False}
        for key in ("accuracy", "best_val_accuracy", "query_count"):
            info[key] = Lazy(lambda key=key: gcn().info[key])
        return Release(api=predict, weights=LazyDict({}, Lazy(lambda: gcn().weights), shapes),
                       mechanism=[dataclasses.replace(s, output=s.output.to(self.device)) for s in run.steps],
                       info=info)


#: this target's entries in the bug catalogue (``python -m audit regress``)
CATALOGUE = (
    Entry("edgerand", "VIOLATION", bug="no-noise", attack="linkteller", trials=100, quick=False),
    # ... and on their mechanism view (the released adjacency and its exact log-density; no GCN trained)
    Entry("edgerand", "VIOLATION", bug="no-noise", trials=200, quick=False,
          why="the released adjacency is the true one: the exact RR likelihood ratio names the world every time"),
    Entry("edgerand", "CONSISTENT", trials=1000, quick=False,
          why="exact randomised response: the score is ±ε at the canary pair (ε_lb 0.80 of 1 at 1,000 trials, cp breaking the ties at random)"),
)


class EdgeRand(PerturbedGraphGCN):
    """EdgeRand (randomised response on every unordered pair) + GCN; see the module docstring."""

    name: ClassVar[str] = "edgerand"
    Config: ClassVar[type[TargetConfig]] = EdgeRandConfig
    catalogue: ClassVar[tuple[Entry, ...]] = CATALOGUE
    accountant: ClassVar[str] = "randomised response (pure ε-DP; δ formal)"

    def flip_probability(self) -> float:
        """s = 2 / (e^ε + 1): the probability that a pair is replaced by a fair coin."""
        return 2.0 / (math.exp(self.config.epsilon) + 1.0)

    def density_split(self) -> tuple[float, float]:
        cfg = self.config
        return (1.0 - cfg.density_share) * cfg.epsilon, cfg.density_share * cfg.epsilon

    def mechanism_details(self, graph: Data) -> dict[str, Any]:
        cfg = self.config
        if cfg.variant == "rr":
            s = self.flip_probability()
            return {"variant": "rr", "s": s, "p_keep_edge": 1 - s / 2, "p_add_non_edge": s / 2,
                    "likelihood_ratio": (1 - s / 2) / (s / 2)}
        eps_link, eps_density = self.density_split()
        n = int(graph.num_nodes)
        pairs = n * (n - 1) // 2
        return {"variant": "density", "eps_link": eps_link, "eps_density": eps_density,
                "p": 1.0 / (1.0 + math.exp(-eps_link)), "density_laplace_scale": 1.0 / (pairs * eps_density),
                "pairs": pairs}

    def perturb(self, graph: Data, rng: torch.Generator, noise: bool = True) -> Perturbation:
        cfg = self.config
        a = upper_adjacency(graph)
        m = a.numel()
        if cfg.variant == "rr":
            s = self.flip_probability()
            if noise:
                replaced = torch.rand(m, generator=rng, dtype=torch.float64) < s
                coin = torch.rand(m, generator=rng, dtype=torch.float64) < 0.5
                kept = torch.where(replaced, coin, a)
            else:
                kept = a
            # log P(Ã | A) = const + Σ_{edges e of A} log(P(Ã_e | 1) / P(Ã_e | 0)): ±log((1 − s/2)/(s/2)) = ±ε
            log_ratio = math.log((1 - s / 2) / (s / 2))
            step = _kept_step(kept, lambda g: s / 2 + (1 - s) * upper_adjacency(g).double(), log_ratio, -log_ratio)
            return Perturbation(lambda: kept, [step], {"s": s}, int(kept.sum()))
        eps_link, eps_density = self.density_split()
        edges = float(a.sum())
        noisy_edges = edges + (float(laplace((), 1.0 / eps_density, rng)) if noise else 0.0)  # = M·d̃
        d_noisy = noisy_edges / m
        p = 1.0 / (1.0 + math.exp(-eps_link))
        d_c = min(max(d_noisy, 0.0), 1.0)
        denom = 2 * p * d_c - p - d_c + 1
        q = min(1.0, d_c / denom) if denom > 0 else 1.0
        if noise:
            u = torch.rand(m, generator=rng, dtype=torch.float64)
            kept = torch.where(a, u < p * q, u < (1 - p) * q)
        else:
            kept = a
        density = MechanismStep(
            output=torch.tensor(noisy_edges, dtype=torch.float64), name="noisy edge count (M·d̃)",
            mean=lambda g: torch.tensor(float(upper_index(g).numel()), dtype=torch.float64),
            # Lap(1/(M·ε_density)) on the density is Lap(1/ε_density) on the count M·d
            log_density=lambda g: -eps_density * abs(noisy_edges - upper_index(g).numel()))
        # given q (from the released d̃): P(Ã=1 | A=1) = pq, P(Ã=1 | A=0) = (1 − p)q
        step = _kept_step(kept, lambda g: (1 - p) * q + (2 * p - 1) * q * upper_adjacency(g).double(),
                          math.log(p / (1 - p)), math.log((1 - p * q) / (1 - (1 - p) * q)))
        return Perturbation(lambda: kept, [density, step], {"noisy_density": d_noisy, "p": p, "q": q},
                            int(kept.sum()))
