"""User targets that deviate from their own declarations (for tests/test_declared.py).

Each is the reference Gaussian mechanism ``R = A·X̂ + N(0, s²)`` of ``targets/gaussian.py`` in the
shape a user would write it (claim from the GDP helpers, ``fit`` returning a Release with one
MechanismStep), with ONE way a real implementation departs from what its step declares
(``mean``, ``noise_std``, a Gaussian law, fresh noise from the given generator). Load one as
``tests.deviants:ClassName``. :class:`Honest` declares what it does.

The trace deviants release a small DP-SGD-like trace (``targets.heterpoisson.DPSGDTrace``):
per step a "clean" sum (a deterministic function of the graph and the step) plus noise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from graphs.ops import degrees
from targets.common.accounting import gdp_epsilon, gdp_mu
from targets.base import Claim, MechanismStep, Release, Target, TargetConfig
from targets.heterpoisson import DPSGDTrace, TraceStep


@dataclass
class DeviantConfig(TargetConfig):
    unit: str = "edge"
    #: the public maximum degree the noise is calibrated on (pinned from the base graph)
    max_degree: int | None = None


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)


def aggregate(graph: Any, x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    src, dst = graph.edge_index
    out.index_add_(0, dst, x[src])
    return out


class Honest(Target):
    """A·X̂ + N(0, s²) with s = √2/μ: declares exactly what it does."""

    name = "deviant-honest"
    Config = DeviantConfig
    levels = ("mechanism", "api")
    bugs: ClassVar[dict[str, str]] = {}

    def claim(self, graph: Any) -> Claim:
        delta = self.config.delta or 1e-5
        mu = gdp_mu(self.config.epsilon, delta)
        return Claim(epsilon=gdp_epsilon(mu, delta), delta=delta, accountant="gdp", unit="edge (undirected)",
                     gdp_mu=mu, details={"noise_std": math.sqrt(2) / mu, "mu": mu})

    def declared_std(self, graph: Any) -> float:
        return self.claim(graph).details["noise_std"]

    # what the step declares
    def declared_mean(self, graph: Any) -> torch.Tensor:
        return aggregate(graph, unit_rows(graph.x))

    # what fit does (the deviants override one of these)
    def applied_mean(self, graph: Any) -> torch.Tensor:
        return self.declared_mean(graph)

    def noise(self, shape: torch.Size, std: float, graph: Any, rng: torch.Generator) -> torch.Tensor:
        return std * torch.randn(shape, generator=rng, dtype=torch.float32)

    def noiseless(self, graph: Any) -> torch.Tensor:
        return self.declared_mean(graph)

    def extra(self, graph: Any, mean: torch.Tensor) -> dict[str, Any]:
        return {}

    def fit(self, graph: Any, rng: torch.Generator) -> Release:
        std = self.declared_std(graph)
        mean = self.applied_mean(graph)
        out = mean + self.noise(mean.shape, std, graph, rng)
        step = MechanismStep(output=out, mean=self.declared_mean, noise_std=std, name="A·X + noise")
        probs = torch.softmax(out, dim=1)
        return Release(api=lambda query=None, nodes=None: probs if nodes is None else probs[nodes],
                       mechanism=[step], **self.extra(graph, mean))


class SmallNoise(Honest):
    """Adds noise of std 0.8·s while declaring s (e.g. the std computed for a smaller sensitivity)."""

    name = "deviant-small-noise"

    def noise(self, shape, std, graph, rng):
        return super().noise(shape, 0.8 * std, graph, rng)


class LaplaceNoise(Honest):
    """Laplace noise of the declared std (scale s/√2), declared Gaussian."""

    name = "deviant-laplace"

    def noise(self, shape, std, graph, rng):
        u = torch.rand(shape, generator=rng, dtype=torch.float64).clamp(1e-12, 1 - 1e-12) - 0.5
        b = std / math.sqrt(2)
        return (-b * torch.sign(u) * torch.log1p(-2 * u.abs())).float()


class UniformNoise(Honest):
    """Uniform noise of the declared std (on ±s√3), declared Gaussian."""

    name = "deviant-uniform"

    def noise(self, shape, std, graph, rng):
        return ((torch.rand(shape, generator=rng) * 2 - 1) * std * math.sqrt(3)).float()


class ReusedNoise(Honest):
    """Draws its noise from a fixed internal seed, ignoring the generator it is given."""

    name = "deviant-reused-noise"

    def noise(self, shape, std, graph, rng):
        return super().noise(shape, std, graph, torch.Generator().manual_seed(1234))


class SelfLoopMean(Honest):
    """fit aggregates with self-loops, (A + I)·X̂; the declared mean is A·X̂ (the term is missing)."""

    name = "deviant-self-loop-mean"

    def applied_mean(self, graph):
        x = unit_rows(graph.x)
        return aggregate(graph, x) + x


class RowBroadcastNoise(Honest):
    """One noise row of width f, broadcast to every node (a shape bug: ``randn(f)`` for ``randn(n, f)``)."""

    name = "deviant-row-broadcast"

    def noise(self, shape, std, graph, rng):
        return (std * torch.randn(shape[-1], generator=rng)).expand(shape).clone()


class WorldDependentStd(Honest):
    """Calibrates the noise on the max degree of the graph it trains on (the private world), while the
    declared std uses the public max degree pinned from the base graph."""

    name = "deviant-world-std"

    def public_params(self, graph):
        return {"max_degree": int(degrees(graph).max())}

    def noise(self, shape, std, graph, rng):
        d_pub = self.config.max_degree or int(degrees(graph).max())
        return super().noise(shape, std * int(degrees(graph).max()) / d_pub, graph, rng)


class SymNormMean(Honest):
    """fit aggregates with D^-1/2 A D^-1/2 (GCN normalisation); the declared mean is unnormalised A·X̂."""

    name = "deviant-sym-norm-mean"

    def applied_mean(self, graph):
        x = unit_rows(graph.x)
        deg = degrees(graph).float().clamp_min(1)
        s = deg.rsqrt()
        return s[:, None] * aggregate(graph, s[:, None] * x)


class LeakyView(Honest):
    """Correct mechanism, but ``weights`` also carries the noiseless aggregate (a debug tensor left in)."""

    name = "deviant-leaky-view"
    levels = ("mechanism", "api", "weights")

    def extra(self, graph, mean):
        return {"weights": {"readout.weight": torch.zeros(3, 3), "debug.aggregate": mean.clone()}}


class ColumnBroadcastNoise(Honest):
    """One noise draw per node, shared by all its features (``randn(n, 1)`` broadcast)."""

    name = "deviant-col-broadcast"

    def noise(self, shape, std, graph, rng):
        return (std * torch.randn(shape[0], 1, generator=rng)).expand(shape).clone()


# ---------------------------------------------------------------------------------------------
# trace deviants
# ---------------------------------------------------------------------------------------------
@dataclass
class TraceConfig(TargetConfig):
    unit: str = "node"
    steps: int = 6
    dim: int = 256
    law: str = "gaussian"  # what the trace declares and applies: gaussian or sml
    applied_scale: float = 1.0  # applied std / declared std (1: honest)
    applied_law: str | None = None  # None: the declared law


class TraceTarget(Target):
    """A DP-SGD-like trace: step t releases clean_t + noise, clean_t a fixed function of the graph."""

    name = "deviant-trace"
    Config = TraceConfig
    levels = ("trace",)

    def claim(self, graph):
        return Claim(epsilon=self.config.epsilon, delta=1e-5, accountant="none (test)", unit="node",
                     details={"noise_std": 2.0})

    def fit(self, graph, rng):
        c = self.config
        std = self.claim(graph).details["noise_std"]
        gen = torch.Generator().manual_seed(int(graph.num_edges))
        trace = DPSGDTrace(noise=c.law, noise_std=std, clip_norm=1.0, sampling_rate=1.0)
        law = c.applied_law or c.law
        for _ in range(c.steps):
            clean = torch.randn(c.dim, generator=gen, dtype=torch.float64).float()
            z = torch.randn(c.dim, generator=rng, dtype=torch.float64)
            if law == "sml":
                z = z * math.sqrt(float(torch.empty(1, dtype=torch.float64).exponential_(1.0, generator=rng)))
            elif law == "sml-per-coordinate":
                z = z * torch.empty(c.dim, dtype=torch.float64).exponential_(1.0, generator=rng).sqrt()
            noisy = clean + (c.applied_scale * std * z).float()
            trace.steps.append(TraceStep(noisy=noisy, central=torch.zeros(1, dtype=torch.long), clean=clean))
        return Release(trace=trace)


class PrivateCalibration(Honest):
    """Calibrates (and declares) its std on the max degree of the graph it trains on: honest about
    the std it adds, but the std then differs between neighbouring worlds (the exact LLR with one
    std, and its threshold 0, no longer apply; the std itself leaks the degree)."""

    name = "deviant-private-calibration"

    def declared_std(self, graph):
        return super().declared_std(graph) * int(degrees(graph).max()) / 20.0


class PartlyReusedNoise(Honest):
    """Half the noise variance comes from a module-level generator seeded once (the same draw in
    every run), half from the given generator: outputs differ, noise is correlated across runs."""

    name = "deviant-partly-reused"

    def noise(self, shape, std, graph, rng):
        fixed = torch.randn(shape, generator=torch.Generator().manual_seed(99))
        fresh = torch.randn(shape, generator=rng)
        return std * math.sqrt(0.5) * (fixed + fresh)
