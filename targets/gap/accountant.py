"""GAP's accountant (the paper's, literally): the EDP GDP curve, the NDP RDP composition, and the
claims of both levels, cached as a pure function of the config and the one count they read."""
from __future__ import annotations

import dataclasses
import functools
import logging
import math
from typing import Any

import numpy as np

from targets.common.accounting import (
    DEFAULT_ORDERS,
    calibrate_decreasing,
    gap_delta,
    gaussian_rdp,
    gdp_epsilon,
    rdp_to_dp,
    subsampled_gaussian_rdp,
)
from targets.base import Claim, Composed, GaussianStep, NoiseLaw, Sampled, Series, TraceLaw
from targets.gap.config import GAPConfig

# ---------------------------------------------------------------------------------------------
# accountant (paper-specific)
# ---------------------------------------------------------------------------------------------
def dpsgd_schedule(n_train: int, batch_size: int, epochs: int) -> tuple[float, int]:
    """(sampling rate q, accounted steps T) of one DP-SGD module as GAP's ``NoisySGD`` charges it.

    q = B / N_train and T = ⌊epochs · N_train / B⌋. When B ≥ N_train, q is capped at 1 and
    T = epochs (full-batch DP-GD; the reference code would pass a rate > 1 to autodp here).
    """
    if epochs == 0 or n_train == 0:
        return 0.0, 0
    if batch_size >= n_train:
        return 1.0, epochs
    return batch_size / n_train, (epochs * n_train) // batch_size


def node_rdp(orders, sigma: float, hops: int, rate: float, steps_em: int, steps_cm: int
             ) -> dict[str, np.ndarray]:
    """RDP curves of GAP-NDP's three modules with one shared noise multiplier σ."""
    def sgd(steps: int) -> np.ndarray:
        if steps == 0:
            return np.zeros(len(orders))
        if rate >= 1.0:
            return gaussian_rdp(orders, sigma, steps)
        absl = logging.getLogger("absl")  # dp-accounting logs each order it cannot bound (kept as ∞)
        level = absl.level
        absl.setLevel(logging.ERROR)
        try:
            return subsampled_gaussian_rdp(orders, rate, sigma, steps)
        finally:
            absl.setLevel(level)

    return {"encoder": sgd(steps_em), "pma": gaussian_rdp(orders, sigma, hops), "classifier": sgd(steps_cm)}


#: GAP-NDP's calibration (Brent on log σ: each RDP evaluation under Poisson sampling is costly),
#: falling back to bisection if no bracket is found
NODE_CALIBRATION: dict[str, Any] = {
    "method": "brent", "lo": 0.05, "hi": 2.0, "grow": 4.0, "limits": (1e-6, 1e6), "rtol": 1e-9, "nudge": 1e-8,
    "fallback": {"lo": 0.1, "hi": 10.0, "rtol": 1e-7},
}


def edge_epsilon(sigma: float, hops: int, delta: float) -> float:
    """ε of GAP-EDP's PMA: K exactly composed Gaussians = μ-GDP with μ = √K/σ (autodp ComposeGaussian)."""
    if sigma <= 0:
        return math.inf
    return gdp_epsilon(math.sqrt(hops) / sigma, delta)


def edge_claim(cfg: GAPConfig, n_edges: int) -> Claim:
    """GAP-EDP's claim for a graph with `n_edges` directed edges."""
    delta = cfg.delta if cfg.delta is not None else gap_delta(n_edges)
    k = cfg.hops
    if math.isinf(cfg.epsilon):
        sigma = 0.0
    else:
        sigma = calibrate_decreasing(lambda s: edge_epsilon(s, k, delta), cfg.epsilon,
                                     lo=0.1, hi=10.0, rtol=1e-10)
    mu = math.sqrt(k) / sigma if sigma > 0 else math.inf
    unit = ("edge (one undirected edge: both directions)" if cfg.edge_unit == "undirected"
            else "edge (one directed edge u→v)")
    return Claim(
        epsilon=edge_epsilon(sigma, k, delta), delta=delta,
        accountant="GAP-EDP: K exactly composed Gaussian mechanisms (autodp ComposeGaussian) = μ-GDP, μ = √K/σ",
        unit=unit, gdp_mu=mu,
        step=GaussianStep(sigma, cfg.sensitivity), composition=Composed(GaussianStep(sigma, cfg.sensitivity), k),
        notes={
            "level": "edge", "hops": k, "mu": mu, "edge_unit": cfg.edge_unit,
            "delta_rule": "10^-digits(directed edges)" if cfg.delta is None else "given",
            "num_directed_edges": n_edges,
        },
    )


def node_claim(cfg: GAPConfig, n_train: int) -> Claim:
    """GAP-NDP's claim for a graph with `n_train` training nodes."""
    delta = cfg.delta if cfg.delta is not None else gap_delta(n_train)
    rate_em, steps_em = dpsgd_schedule(n_train, cfg.node_batch_size, cfg.em_epochs)
    rate_cm, steps_cm = dpsgd_schedule(n_train, cfg.node_batch_size, cfg.cm_epochs)
    rate = max(rate_em, rate_cm)  # one loader rate; a module with no epochs reports 0
    orders = DEFAULT_ORDERS

    def eps_of(s: float) -> float:
        curves = node_rdp(orders, s, cfg.hops, rate, steps_em, steps_cm)
        return rdp_to_dp(orders, sum(curves.values()), delta)[0]

    if math.isinf(cfg.epsilon):
        sigma = 0.0
        eps, order, curves = math.inf, float("nan"), {}
    else:
        sigma = calibrate_decreasing(eps_of, cfg.epsilon, **NODE_CALIBRATION)
        curves = node_rdp(orders, sigma, cfg.hops, rate, steps_em, steps_cm)
        eps, order = rdp_to_dp(orders, sum(curves.values()), delta)
    at = {name: float(np.interp(order, orders, c)) for name, c in curves.items()}
    return Claim(
        epsilon=eps, delta=delta,
        accountant="GAP-NDP: RDP composition of DP-SGD (encoder) + K Gaussians (PMA, Δ=√D) + "
                   "DP-SGD (classifier), Poisson-subsampled Gaussian RDP via dp-accounting, "
                   "improved RDP→DP conversion",
        unit="node (add/remove with features, label and incident edges; out-degree bounded to D)",
        step=GaussianStep(sigma, cfg.sensitivity),
        # the trace's law for the gradient canary: DP-SGD's σ·C on the clipped sum, a canary of norm C
        trace=TraceLaw(NoiseLaw.GAUSSIAN.value, sigma * cfg.max_grad_norm, cfg.max_grad_norm, cfg.max_grad_norm, rate),
        composition=Series((Composed(Sampled(rate, GaussianStep(sigma, cfg.max_grad_norm)), steps_em),
                            Composed(GaussianStep(sigma, cfg.sensitivity), cfg.hops),
                            Composed(Sampled(rate, GaussianStep(sigma, cfg.max_grad_norm)), steps_cm))),
        notes={
            "level": "node", "dpsgd_noise_std": sigma * cfg.max_grad_norm,
            "hops": cfg.hops, "max_degree": cfg.max_degree, "max_grad_norm": cfg.max_grad_norm,
            "batch_size": cfg.node_batch_size, "num_train": n_train,
            "steps_encoder": steps_em, "steps_classifier": steps_cm,
            "epochs_encoder": cfg.em_epochs, "epochs_classifier": cfg.cm_epochs,
            "best_order": order, "rdp_at_best_order": at,
            "orders": f"accounting.DEFAULT_ORDERS ({len(orders)} orders, {orders[0]}…{orders[-1]})",
            "delta_rule": "10^-digits(training nodes)" if cfg.delta is None else "given",
        },
    )


def gap_claim(cfg: GAPConfig, count: int) -> Claim:
    """The claim of `cfg` on a graph with `count` training nodes (node level) or directed edges
    (edge level). It depends on neither the bug, the device nor the traced module, so those are
    normalised away before the (pure, cached) accountant runs: calibration under Poisson sampling
    costs seconds, and targets are rebuilt for every trial."""
    key = dataclasses.replace(cfg, bug=None, device="cpu", trace_module="all")
    return _cached_claim(_ConfigKey(key), count)


class _ConfigKey:
    """A config as a cache key: equal (and hashed) by its repr, which names every field."""

    def __init__(self, cfg: GAPConfig) -> None:
        self.cfg, self.key = cfg, repr(cfg)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ConfigKey) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)


@functools.lru_cache(maxsize=256)
def _cached_claim(key: _ConfigKey, count: int) -> Claim:
    return node_claim(key.cfg, count) if key.cfg.node_level else edge_claim(key.cfg, count)
