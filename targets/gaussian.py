"""Exact Gaussian reference mechanism (edge level, one undirected edge).

Releases ``R = A·X̂ + N(0, s²)`` entrywise, where A is the 0/1 adjacency matrix (no self-loops)
and X̂ the features with rows scaled to unit ℓ2 norm. Adding or removing the undirected edge
{u, v} changes row u by ±X̂_v and row v by ±X̂_u, so the ℓ2 sensitivity is exactly Δ = √2 and
the release is μ-GDP with μ = Δ/s = 1/σ for noise multiplier σ = s/Δ (Dong, Roth & Su 2019).
The claim is exact: a correct audit can approach it and never exceed it.

With ``normalize=False`` the raw features are aggregated: the change of an undirected edge {u, v}
is sqrt(‖x_u‖² + ‖x_v‖²), edge-dependent, and the exact worst case over this graph's neighbours is
Δ = sqrt(r₁² + r₂²) for the two largest row norms (features are public under edge-level DP). The
claim stays exact for the worst edge, so canary choice matters: this variant is how the harness
shows that a worst-case canary certifies more than a random one.

Views: ``mechanism`` (one step: R, its mean under any graph, the noise std), ``api`` (R's rows as
"posteriors" of a softmax readout, for black-box attacks). Shapes: R is n × f.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch_geometric.data import Data

from targets.common.accounting import gdp_epsilon, gdp_mu
from targets.base import Claim, GaussianStep, Level, MechanismStep, Release, Target, TargetConfig, noise_generator
from targets.common.probe import StepMap
from targets.common.catalogue import Entry

SENSITIVITY = math.sqrt(2.0)


@dataclass
class GaussianConfig(TargetConfig):
    """Exact Gaussian mechanism settings.

    Args:
        delta (float, optional): δ; None uses 1e-5.
        unit (str): always ``edge`` (one undirected edge).
        normalize (bool): aggregate unit-norm feature rows (Δ = √2); False aggregates raw features.
    """

    unit: str = "edge"
    normalize: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("unit", self.unit == "edge", "'edge'")


def _unit_rows(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)


def aggregate(graph: Data, features: torch.Tensor) -> torch.Tensor:
    """A·X: sum of neighbours' rows."""
    out = torch.zeros_like(features)
    src, dst = graph.edge_index.to(features.device)
    out.index_add_(0, dst, features[src])
    return out


#: this target's entries in the bug catalogue (``python -m audit regress``)
CATALOGUE = (
    # exact reference: the estimators' calibration
    Entry("gaussian", "CONSISTENT", epsilon=2, trials=2000, why="exact μ-GDP claim"),
    Entry("gaussian", "VIOLATION", bug="no-noise", trials=200),
    Entry("gaussian", "VIOLATION", bug="half-noise", epsilon=2, trials=2000, why="true ε 4.39 vs claimed 2"),
    Entry("gaussian", "CONSISTENT", epsilon=2, trials=300, mode="one-run"),
    Entry("gaussian", "VIOLATION", bug="no-noise", epsilon=2, trials=300, mode="one-run"),
)


class GaussianMechanism(Target[GaussianConfig]):
    name = "gaussian"
    #: reference-machine seconds (benchmarks/calibrate_costs.py, default config on csbm)
    trial_costs = {Level.MECHANISM: 0.0002, Level.API: 0.001}
    setup_seconds = 0.5
    Config = GaussianConfig
    levels = (Level.MECHANISM, Level.API)
    batched = True
    bugs: ClassVar[dict[str, str]] = {
        "no-noise": "adds no noise while claiming the calibrated ε",
        "half-noise": "adds noise of std σΔ/2 while claiming σΔ",
    }
    catalogue: ClassVar[tuple[Entry, ...]] = CATALOGUE
    #: small audits where this target fixtures an attack's contract check: attack → (params, canary)
    attack_fixtures: ClassVar[dict[str, tuple[dict[str, str], str]]] = {
        "mechanism-lrt": ({}, "auto"), "linkteller": ({}, "random-edge"), "fresh-query": ({}, "random-edge"),
        "learned-mechanism": ({}, "auto"), "learned-api": ({}, "random-edge"), "exact-rows": ({}, "auto"),
        "measured-law": ({}, "auto"), "measured-scale": ({}, "auto")}

    #: one aggregation A·X
    receptive_hops = 1

    def delta_for(self, graph: Data) -> float:
        return self.config.delta if self.config.delta is not None else 1e-5

    def claim(self, graph: Data) -> Claim:
        delta = self.delta_for(graph)
        mu = gdp_mu(self.config.epsilon, delta)
        sigma = 1.0 / mu
        sens = self.sensitivity(graph)
        return Claim(
            epsilon=gdp_epsilon(mu, delta), delta=delta, accountant="gdp (exact)",
            unit="edge (one undirected edge)", gdp_mu=mu,
            step=GaussianStep(sigma, sens), composition=GaussianStep(sigma, sens), notes={"mu": mu},
        )

    def sensitivity(self, graph: Data) -> float:
        if self.config.normalize:
            return SENSITIVITY
        top = torch.topk(graph.x.norm(dim=1), 2).values
        return float(torch.sqrt((top**2).sum()))

    def noise_std(self, graph: Data) -> float:
        std = self.claim(graph).noise_std
        if self.bug("no-noise"):
            return 0.0
        if self.bug("half-noise"):
            return std / 2.0
        return std

    def noiseless(self, graph: Data) -> torch.Tensor:
        """A·X̂, summed on the CPU (in edge order: CUDA's index_add_ adds in no fixed order), then
        moved to the run's device."""
        x = graph.x.cpu()
        return aggregate(graph, _unit_rows(x) if self.config.normalize else x).to(self.device)

    def cached_work(self) -> str | None:
        return "noiseless A·X̂ and the claim, computed once per world graph per worker"

    def step_maps(self, graph: Data) -> list[StepMap]:
        """A·X over X̂ (unit rows) or, with ``normalize=False``, the raw features (the claim reads
        their norms). A witness is not played: every edge of any graph moves A·X̂ by exactly √2,
        so the given graph is already a worst case."""
        normalize = self.config.normalize

        def realised(g: Data) -> torch.Tensor:
            x = g.x.double()
            return _unit_rows(x) if normalize else x

        return [StepMap(name="A·X", norm="l2", kinds=("edge",), extra_kinds=("directed",),
                        apply=lambda g, x: aggregate(g, x.double()),
                        claimed=lambda g0, g1: max(self.sensitivity(g0), self.sensitivity(g1)),
                        radius=1.0 if normalize else None, width=0, realised=realised, covers=["A·X + noise"],
                        note="rows of X̂ unit-norm" if normalize else "raw features (claim reads their norms)")]

    def _world(self, graph: Data) -> tuple[torch.Tensor, float, float]:
        """(noiseless mean, released noise std, claimed noise std) of `graph`, cached per graph
        object (the cache holds the graph, so its id cannot be reused while cached)."""
        cache = self.__dict__.setdefault("_worlds", {})
        hit = cache.get(id(graph))
        if hit is None or hit[0] is not graph:
            if len(cache) >= 4:
                cache.pop(next(iter(cache)))
            hit = cache[id(graph)] = (graph, self.noiseless(graph), self.noise_std(graph),
                                      self.claim(graph).noise_std)
        return hit[1], hit[2], hit[3]

    def fit(self, graph: Data, rng: torch.Generator) -> Release:
        return self.fit_batch(graph, [rng])[0]

    def fit_batch(self, graph: Data, rngs: list[torch.Generator]) -> list[Release]:
        """One noiseless A·X̂ for the batch; per trial, its own N(0, 1) draw (n × f, on the run's
        device, from :func:`targets.base.noise_generator` of its generator) scaled and added in
        place: the floats of ``mean + std·noise``."""
        mean, std, claimed_std = self._world(graph)
        key = ("gaussian: A·X", self.config.normalize, str(self.device))
        releases = []
        for rng in rngs:
            released = torch.randn(mean.shape, generator=noise_generator(rng, mean.device), dtype=mean.dtype,
                                   device=mean.device)
            released.mul_(std).add_(mean)
            step = MechanismStep(output=released, mean=self.noiseless, noise_std=claimed_std, name="A·X + noise", mean_key=key)
            releases.append(Release(api=_predictor(released), mechanism=[step],
                                    info={"fresh_noise_per_query": False}))
        return releases


def _predictor(released: torch.Tensor):
    def predict(query: Data | None = None, nodes: torch.Tensor | None = None) -> torch.Tensor:
        rows = released if nodes is None else released[nodes]  # softmax is row-wise: the queried rows only
        return torch.softmax(rows, dim=1).cpu()

    return predict
