"""User targets that claim μ-GDP while their noise is not Gaussian (issue #24's "no bound from an
unchecked assumption"). Load one as ``tests.nongaussian_targets:LaplaceClaimingGDP`` (or
``:RRClaimingGDP``).

Both release, per node i, a statistic of its *upper* degree c_i = #{j > i : {i, j} ∈ E} with
independent noise per node, and claim μ-GDP like the Gaussian reference (``gdp_mu`` set, ε at δ
the configured ε). Adding or removing one undirected edge {u, v}, u < v, changes c_u by 1 and no
other entry, so the release's privacy is exactly that of the one-entry mechanism, calibrated so
that its true ε at the claim's δ *equals* the claim:

* :class:`LaplaceClaimingGDP`: c_i + Lap(b), b = 1/ε0, ε0 = ε − 2 ln(1 − δ); the Laplace
  mechanism's ε(δ) = ε0 + 2 ln(1 − δ) = ε. It declares Gaussian noise of the Laplace noise's std
  (the declared-model check can catch the law).
* :class:`RRClaimingGDP`: randomized response on the bit c_i mod 2 (which the edge flips), kept
  with p = (e^ε + δ)/(1 + e^ε), so ε(δ) = ln((p − δ)/(1 − p)) = ε. It declares no noise law
  (``noise_std=None``): only the scores' held-out shape check stands between it and gdp.

A correct audit must find them CONSISTENT. Their trade-off curves are not Gaussian, so ``gdp``
(which extrapolates a Gaussian curve through one point) overshoots the true ε on them.

:class:`ExactRR` is the correct control: the same randomized response claiming exactly the (ε, δ)
it satisfies and nothing more (no μ-GDP). Its ε is attained by the test "the released bit
agrees with world 1", so a bound near the truth is reachable at any budget (the tight catalogue
entries of ``tests/size.py``); one-run canaries, node-disjoint, each move one node's bit only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from targets.common.accounting import gdp_epsilon, gdp_mu
from targets.base import Claim, MechanismStep, Release, Target, TargetConfig


@dataclass
class PairsConfig(TargetConfig):
    unit: str = "edge"


def upper_degrees(graph: Any) -> torch.Tensor:
    """c_i = #{j > i : {i, j} ∈ E}, float64 (edge_index holds both directions of each edge)."""
    src, dst = graph.edge_index
    c = torch.zeros(graph.num_nodes, dtype=torch.float64)
    up = src < dst
    c.index_add_(0, src[up], torch.ones(int(up.sum()), dtype=torch.float64))
    return c


class _ClaimsGDP(Target):
    Config = PairsConfig
    levels = ("mechanism",)
    bugs: ClassVar[dict[str, str]] = {}

    def delta(self) -> float:
        return self.config.delta or 1e-5

    def claim(self, graph: Any) -> Claim:
        mu = gdp_mu(self.config.epsilon, self.delta())
        return Claim(epsilon=gdp_epsilon(mu, self.delta()), delta=self.delta(), accountant="gdp",
                     unit="edge (undirected)", gdp_mu=mu, details={"mu": mu, "actual noise": self.law})

    def release(self, out: torch.Tensor, noise_std: float | None) -> Release:
        step = MechanismStep(output=out, mean=self.noiseless, noise_std=noise_std, name=f"{self.law} release",
                             mean_key=(self.name, "noiseless"))
        return Release(mechanism=[step])


class LaplaceClaimingGDP(_ClaimsGDP):
    name = "laplace-claiming-gdp"
    law = "Laplace"

    def noiseless(self, graph: Any) -> torch.Tensor:
        return upper_degrees(graph)

    def scale(self) -> float:
        return 1.0 / (self.config.epsilon - 2 * math.log1p(-self.delta()))

    def fit(self, graph: Any, rng: torch.Generator) -> Release:
        mean = self.noiseless(graph)
        u = torch.rand(mean.shape, generator=rng, dtype=torch.float64).clamp(1e-15, 1 - 1e-15) - 0.5
        b = self.scale()
        return self.release(mean - b * torch.sign(u) * torch.log1p(-2 * u.abs()), noise_std=b * math.sqrt(2))


class RRClaimingGDP(_ClaimsGDP):
    name = "rr-claiming-gdp"
    law = "randomized response"

    def noiseless(self, graph: Any) -> torch.Tensor:
        return upper_degrees(graph) % 2

    def keep(self) -> float:
        e = math.exp(self.config.epsilon)
        return (e + self.delta()) / (1 + e)

    def fit(self, graph: Any, rng: torch.Generator) -> Release:
        mean = self.noiseless(graph)
        flip = torch.rand(mean.shape, generator=rng, dtype=torch.float64) >= self.keep()
        return self.release(torch.where(flip, 1.0 - mean, mean), noise_std=None)


class ExactRR(RRClaimingGDP):
    name = "exact-rr"

    def claim(self, graph: Any) -> Claim:
        return Claim(epsilon=float(self.config.epsilon), delta=self.delta(),
                     accountant="randomized response: ε(δ) = ln((p − δ)/(1 − p)) exactly", unit="edge (undirected)",
                     details={"keep_probability": self.keep()})
