"""GCON's probe adapter: Ψ (the propagated features' sensitivity Theorem 1 calibrates to) as a step
map, and spec §7.1's tight canary: two otherwise isolated nodes with opposite features."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from graphs.ops import add_edge
from targets.common.probe import StepMap, TightPair, WitnessPlan
from targets.gcon.model import propagate
from targets.gcon.accountant import psi
from targets.gcon.objective import Problem

TIGHT = "GCON tight canary (spec §7.1)"
HOW = "the tight canary's raw features ±scale·a, mapped by GCON's own encoder"


def _encoder_rng(target: Any) -> torch.Generator | None:
    return None if target.config.encoder_seed is not None else torch.Generator().manual_seed(0)


def step_maps(target: Any) -> list[StepMap]:
    cfg = target.config

    def apply(graph: Data, x: torch.Tensor) -> torch.Tensor:
        return propagate(graph.edge_index, x.double(), cfg.alpha, target.steps)

    def realised(graph: Data) -> torch.Tensor:
        return target._encode(graph, _encoder_rng(target)).x

    return [StepMap(name="Z = (1/s)[R_m X] (Ψ, Theorem 1)", norm="l21", kinds=("edge",), extra_kinds=(),
                    apply=apply, claimed=lambda g0, g1: psi(cfg.alpha, target.steps), radius=1.0,
                    width=cfg.encoder_hidden, realised=realised, covers=["theta_priv (via Ψ)"],
                    note="ψ = Σ_i ‖Δz_i‖ over unit-row X; the minimiser change ‖ΔΘ*‖ is reported beside it")]


def minimiser_change(target: Any, g0: Data, g1: Data) -> float:
    """‖Θ*(g1) − Θ*(g0)‖_F of the noise-free minimisers (the target's own solver)."""
    return float((target.noiseless(g1) - target.noiseless(g0)).norm())


def noise_loss(target: Any, g0: Data, g1: Data) -> float:
    """β·Σ_j ‖b_j(g1) − b_j(g0)‖ at Θ = Θ*(g0): the noise-density part of GCON's privacy loss
    for a release at the noiseless minimiser (b_j(g) = −n1·∇_j L_g(Θ), the noise the release
    implies under g). Theorem 1 budgets it at max(ε − ε_Λ, ωε); the Jacobian part is ≤ ε_Λ."""
    cfg = target.config
    enc = target._encode(g0, _encoder_rng(target))
    theta = target.noiseless(g0).double().to(enc.x.device)
    note = target.claim(g0).note

    def grad(g: Data) -> torch.Tensor:
        z = propagate(g.edge_index, enc.x, cfg.alpha, target.steps)
        p = Problem(z[enc.rows], enc.labels, torch.zeros_like(theta), note("lam_solver"), cfg.loss, cfg.huber_delta)
        return p.columns(theta)[1]

    diff = (grad(g1) - grad(g0)) * enc.rows.numel()
    return float(note("beta") * diff.norm(dim=0).sum())


def tight_pair(target: Any, graph: Data, rng: np.random.Generator, *, scale: float = 1e4,
               directions: int = 6) -> TightPair:
    """Append two isolated, unmasked nodes u, v (rows of the loss through the pseudo-labels) whose
    raw features are ±scale·a, so that the (affine) encoder maps them to x_u ≈ −x_v; the canary is
    the edge {u, v}. Theorem 1's worst case for ψ: 2(1−α) at every m ≥ 1. Of `directions` random
    a, the one with the largest minimiser change ‖Θ*(g1) − Θ*(g0)‖."""
    n, f = graph.num_nodes, graph.x.size(1)
    best: tuple[float, Any] | None = None
    for k in range(directions):
        a = torch.tensor(rng.standard_normal(f), dtype=torch.float32)
        a = a / a.norm()
        g0 = graph.clone()
        g0.x = torch.cat([graph.x, (scale * a).unsqueeze(0), (-scale * a).unsqueeze(0)])
        g0.y = torch.cat([graph.y, graph.y[:2]])
        for key in ("train_mask", "val_mask", "test_mask"):
            setattr(g0, key, torch.cat([getattr(graph, key), torch.zeros(2, dtype=torch.bool)]))
        g0.num_nodes = n + 2
        g1 = add_edge(g0, n, n + 1)
        change = minimiser_change(target, g0, g1)
        if best is None or change > best[0]:
            best = (change, (g0, g1, k))
    assert best is not None
    change, (g0, g1, k) = best

    def summary(given: list[tuple[Any, Data, Data]]) -> dict[str, Any]:
        cfg = target.config
        x = target._encode(g1, _encoder_rng(target)).x
        worst = max((minimiser_change(target, h0, h1) for _, h0, h1 in given), default=0.0)
        worst_loss = max((noise_loss(target, h0, h1) for _, h0, h1 in given), default=0.0)
        note = target.claim(g0).note
        big_psi = psi(cfg.alpha, target.steps)
        # strong convexity: ‖Δθ_j‖ ≤ ‖∇L_g1 − ∇L_g0‖/λ ≤ (c1 + c2·c_θ)·Ψ/(n1·λ) per column (‖θ_j‖ ≤ c_θ)
        bound = math.sqrt(note("classes")) * (note("c1") + note("c2") * note("c_theta")) * big_psi / (
            note("n1") * note("lam_solver"))
        dot = float(x[n] @ x[n + 1])
        return {"minimiser_change": change, "minimiser_change_bound": bound,
                "given_worst_minimiser_change": worst, "gain": change / worst if worst > 0 else math.inf,
                "noise_loss": noise_loss(target, g0, g1), "given_worst_noise_loss": worst_loss,
                "noise_loss_budget": max(cfg.epsilon - note("eps_lambda"), cfg.omega * cfg.epsilon),
                "x_u_dot_x_v": dot, "direction": k, "edge": [n, n + 1],
                "found_by": f"{TIGHT}: nodes {n}, {n + 1} appended isolated with raw features ±{scale:g}·a "
                            f"(encoder output x_u·x_v = {dot:.6f})"}

    def render(g: dict[str, Any]) -> str:
        return (f"{TIGHT}: ψ {g['measured']:.6g} / Ψ {g['claimed']:.6g}; ‖ΔΘ*‖ "
                f"{g['minimiser_change']:.4g} (Theorem-1 bound {g['minimiser_change_bound']:.4g}) vs worst "
                f"given-graph edge {g['given_worst_minimiser_change']:.4g}; noise-term privacy loss at the "
                f"mean {g['noise_loss']:.4g} vs {g['given_worst_noise_loss']:.4g} (budget {g['noise_loss_budget']:.4g})"
                f" (×{g['gain']:.1f}); witness {g.get('witness')}")

    return TightPair(TIGHT, step_maps(target)[0].name, g0, g1, "edge", (n, n + 1), summary, render)


def witness_plan(doc: dict[str, Any], params: dict[str, str]) -> WitnessPlan | None:
    """Only the tight canary's witness: its X is realised through raw features."""
    if "tight" not in doc:
        return None
    path = doc["path"]
    return WitnessPlan(doc["target"], f"witness:{path}", f"witness:{path}", params, HOW)
