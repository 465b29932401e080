"""Per-target adapters for the sensitivity probe: each noisy step a claim charges, as a map.

A :class:`StepMap` describes one released noisy step of a target the way its DP proof sees it:
the step's noiseless output is ``apply(graph, X)``, *linear in an input matrix X* (n × h, each
column mapped alike) that is held fixed between the two worlds (the previously released hop, the
public encoder output, the released DP-Emb weights W, ...). The claim bounds
``‖apply(g1, X) − apply(g0, X)‖`` (``norm``: ``l2`` = Frobenius for Gaussian mechanisms, ``l21`` =
Σ of row ℓ2 norms for GCON's Ψ) over neighbouring (g0, g1) and X in the claim's *domain*: rows of
ℓ2 norm at most ``radius``. ``realised(graph)`` is the X the target itself computes on that graph
(``None`` where the probe only searches the domain).

Every map calls the target's own code (its aggregation, CGL, propagation, adjacency, projection),
never a re-implementation, so a bug in the target is a bug in the map. This module may import
targets and call their internal functions; it never edits them.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch_geometric.data import Data


@dataclass
class StepMap:
    """One noisy step of a target, as a linear map of a held-fixed input (module docstring).

    Args:
        name: the step (``hop k``, ``Z``, ...); ``covers`` lists the released steps it stands for
            (steps with one map and one domain, e.g. every hop of GAP, are probed once).
        norm: ``l2`` or ``l21``.
        kinds: canary kinds the claim protects (``edge`` = one undirected edge, ``directed`` =
            one directed entry u→v, ``node`` = add/remove one node with its edges).
        extra_kinds: kinds measured for information only (e.g. an undirected edge against a
            directed claim), never part of the verdict.
        apply: ``(graph, X) -> output`` (float64), linear in X column by column.
        claimed: ``(g0, g1) -> Δ`` the claim charges for this pair, or ``None`` when the pair is
            outside the claim's domain (e.g. an isolated node under CARIBOU's D_min ≥ 1).
        radius: domain of X: rows of ℓ2 norm ≤ radius; ``None``: only the realised X.
        width: h, the number of columns of X.
        realised: the target's own X on a graph, if the probe can compute it.
        node_excludes_row: node canaries exclude the canary node's own output row (add/remove:
            the absent node has no row; DPDGC's partial DP of Z without row r).
        degree_bound: the public degree bound the step relies on (sizes hub families).
        in_domain: ``(g0, g1, kind, canary) -> bool``: pairs the probe may use (search restriction).
    """

    name: str
    norm: str
    kinds: tuple[str, ...]
    apply: Callable[[Data, torch.Tensor], torch.Tensor]
    claimed: Callable[[Data, Data], float | None]
    radius: float | None
    width: int
    realised: Callable[[Data], torch.Tensor] | None = None
    extra_kinds: tuple[str, ...] = ()
    covers: list[str] = field(default_factory=list)
    node_excludes_row: bool = True
    degree_bound: int | None = None
    in_domain: Callable[..., bool] | None = None
    note: str = ""


def _claim_sensitivity(target: Any, graph: Data) -> float:
    return float(target.claim(graph).details["sensitivity"])


# ---------------------------------------------------------------------------------------------
# gaussian (exact reference)
# ---------------------------------------------------------------------------------------------
def gaussian_steps(target: Any) -> list[StepMap]:
    from targets import gaussian as G

    normalize = target.config.normalize

    def apply(graph: Data, x: torch.Tensor) -> torch.Tensor:
        return G.aggregate(graph, x.double())

    def realised(graph: Data) -> torch.Tensor:
        x = graph.x.double()
        return G._unit_rows(x) if normalize else x

    def claimed(g0: Data, g1: Data) -> float:
        return max(target.sensitivity(g0), target.sensitivity(g1))

    return [StepMap(name="A·X", norm="l2", kinds=("edge",), extra_kinds=("directed",), apply=apply,
                    claimed=claimed, radius=1.0 if normalize else None, width=0, realised=realised,
                    covers=["A·X + noise"],
                    note="rows of X̂ unit-norm" if normalize else "raw features (claim reads their norms)")]


# ---------------------------------------------------------------------------------------------
# GAP (PMA hops)
# ---------------------------------------------------------------------------------------------
def gap_steps(target: Any) -> list[StepMap]:
    from targets import gap as G

    cfg = target.config
    node = cfg.node_level

    def apply(graph: Data, x: torch.Tensor) -> torch.Tensor:
        edges = target._private_edges(graph, 0)
        return target._aggregator(graph, edges)(x.double().to(target.device)).cpu().double()

    def realised(graph: Data) -> torch.Tensor:  # hop 1's input: rownorm(encoder(x)) (edge level)
        target.prepare(graph)
        _, encoder = target._cached_encoder(graph)
        return target._embeddings(encoder, graph.x).double().cpu()

    def in_domain(g0: Data, g1: Data, kind: str, canary: Any) -> bool:
        if kind != "node":
            return True
        # node level: only the canary may exceed the degree bound, so the seeded out-degree
        # sampling is the identity for every other node in both worlds (no re-sampling artefacts)
        deg = torch.bincount(g1.edge_index[0], minlength=g1.num_nodes)
        deg[int(canary)] = 0
        return int(deg.max()) <= cfg.max_degree

    if node:
        kinds, extra = ("node",), ()
    elif cfg.edge_unit == "directed":
        kinds, extra = ("directed",), ("edge",)
    else:
        kinds, extra = ("edge",), ("directed",)
    return [StepMap(name=f"hops 1-{cfg.hops} (S_k = Aᵀ H_(k-1))", norm="l2", kinds=kinds, extra_kinds=extra,
                    apply=apply, claimed=lambda g0, g1: _claim_sensitivity(target, g1), radius=1.0,
                    width=cfg.hidden_dim, realised=None if node else realised,
                    covers=[f"hop {k}" for k in range(1, cfg.hops + 1)],
                    degree_bound=cfg.max_degree if node else None, in_domain=in_domain,
                    note="H rows unit-norm (rownorm); every hop has the same map and domain; realised X = "
                         "hop 1's rownorm(encoder(x))")]


# ---------------------------------------------------------------------------------------------
# CARIBOU (PCMP hops)
# ---------------------------------------------------------------------------------------------
def caribou_steps(target: Any) -> list[StepMap]:
    from targets import caribou as C

    cfg = target.config
    if cfg.unit != "edge":
        return []

    def apply(graph: Data, x: torch.Tensor) -> torch.Tensor:
        x = x.double()
        return C.cgl(graph, x, torch.zeros_like(x), cfg.contraction, cfg.alpha1, cfg.beta)

    def claimed(g0: Data, g1: Data) -> float | None:
        try:  # both worlds must be in the domain (D_min ≥ 1); the claim of the sparser world
            return max(target.sensitivity(g0), target.sensitivity(g1))
        except ValueError:
            return None

    def realised(graph: Data) -> torch.Tensor:
        target.prepare(graph)
        _, _, x0 = target._edge_encoder(graph)
        return x0.double().cpu()

    return [StepMap(name=f"hops 1-{cfg.hops} (CGL: C_L·α1·ÂX + ...)", norm="l2", kinds=("edge",),
                    extra_kinds=(), apply=apply, claimed=claimed, radius=1.0, width=cfg.hidden,
                    realised=realised, covers=[f"hop {k}" for k in range(1, cfg.hops + 1)],
                    note="X = the previous hop, projected to the unit ball (X⁽⁰⁾ unit rows); Eq. 6 with "
                         "D_min of the sparser world; realised X = X⁽⁰⁾")]


# ---------------------------------------------------------------------------------------------
# DPDGC (the Z release)
# ---------------------------------------------------------------------------------------------
def dpdgc_steps(target: Any, graph: Data) -> list[StepMap]:
    cfg = target.config
    if cfg.level != "edge":
        return []
    holder: dict[str, Any] = {}

    def weights() -> torch.Tensor:
        if "w" not in holder:
            target.fit(graph, torch.Generator().manual_seed(0))
            holder["w"] = target._last[0].double().cpu()
        return holder["w"]

    w = weights()
    projected = w.clone()
    target._project(projected)  # the target's own projection: its image is the domain of W's rows
    radius = float(projected.norm(dim=1).max())

    def apply(g: Data, x: torch.Tensor) -> torch.Tensor:
        adj = target._adjacency(target._edges(g, 0), g.num_nodes, torch.float64)
        return torch.sparse.mm(adj, x.double().to(target.device)).cpu()

    kinds, extra = (("edge",), ("directed",)) if cfg.undirected_edge else (("directed",), ("edge",))
    return [StepMap(name="Z = A·W + b", norm="l2", kinds=kinds, extra_kinds=extra, apply=apply,
                    claimed=lambda g0, g1: _claim_sensitivity(target, g1), radius=radius, width=cfg.hidden,
                    realised=lambda g: w if g.num_nodes == w.size(0) else None,  # type: ignore[return-value]
                    covers=["Z"],
                    note=f"W = DP-Emb's released weights (fit seed 0 on the given graph); domain: rows in "
                         f"the image of the target's own projection (max row norm {radius:.3g}, claim c = "
                         f"{cfg.norm_scale:g})")]


# ---------------------------------------------------------------------------------------------
# GCON (Ψ: the propagated features' sensitivity that Theorem 1 calibrates to)
# ---------------------------------------------------------------------------------------------
def gcon_steps(target: Any) -> list[StepMap]:
    from targets import gcon as G

    cfg = target.config

    def apply(graph: Data, x: torch.Tensor) -> torch.Tensor:
        return G.propagate(graph.edge_index, x.double(), cfg.alpha, target.steps)

    def realised(graph: Data) -> torch.Tensor:
        return target._encode(graph, None if cfg.encoder_seed is not None else torch.Generator().manual_seed(0)).x

    return [StepMap(name="Z = (1/s)[R_m X] (Ψ, Theorem 1)", norm="l21", kinds=("edge",), extra_kinds=(),
                    apply=apply, claimed=lambda g0, g1: G.psi(cfg.alpha, target.steps), radius=1.0,
                    width=cfg.encoder_hidden, realised=realised, covers=["theta_priv (via Ψ)"],
                    note="ψ = Σ_i ‖Δz_i‖ over unit-row X; the minimiser change ‖ΔΘ*‖ is reported beside it")]


def gcon_minimiser_change(target: Any, g0: Data, g1: Data) -> float:
    """‖Θ*(g1) − Θ*(g0)‖_F of the noise-free minimisers (the target's own solver)."""
    return float((target.noiseless(g1) - target.noiseless(g0)).norm())


def gcon_noise_loss(target: Any, g0: Data, g1: Data) -> float:
    """β·Σ_j ‖b_j(g1) − b_j(g0)‖ at Θ = Θ*(g0): the noise-density part of GCON's privacy loss
    for a release at the noiseless minimiser (b_j(g) = −n1·∇_j L_g(Θ), the noise the release
    implies under g). Theorem 1 budgets it at max(ε − ε_Λ, ωε); the Jacobian part is ≤ ε_Λ."""
    from targets import gcon as G

    cfg = target.config
    enc = target._encode(g0, None if cfg.encoder_seed is not None else torch.Generator().manual_seed(0))
    theta = target.noiseless(g0).double().to(enc.x.device)
    det = target.claim(g0).details

    def grad(g: Data) -> torch.Tensor:
        z = G.propagate(g.edge_index, enc.x, cfg.alpha, target.steps)
        p = G.Problem(z[enc.rows], enc.labels, torch.zeros_like(theta), det["lam_solver"], cfg.loss, cfg.huber_delta)
        return p.columns(theta)[1]

    diff = (grad(g1) - grad(g0)) * enc.rows.numel()
    return float(det["beta"] * diff.norm(dim=0).sum())


# ---------------------------------------------------------------------------------------------
# HeterPoisson (one DP-SGD step's clipped gradient sum)
# ---------------------------------------------------------------------------------------------
def heterpoisson_step_change(target: Any, graph: Data, node: int, rng: torch.Generator,
                             model_seed: int = 0) -> tuple[float, float, dict[str, Any]]:
    """(measured ‖Σclip(g1) − Σclip(g0)‖, claimed c·scale, info) for one sampled batch.

    World 1 is `graph` with `node` in; world 0 the same batch with `node` taken out (not central,
    and every kept edge from or to it dropped): the coupling the accountant's ρ is about. The
    claimed bound is the target's own ``node_canary_scale`` (c per own star, 2c per other star)
    times the clip norm c.
    """
    from targets import heterpoisson as H
    from targets.base import seeded
    from targets.common.dpsgd import clip_rows, flatten, per_example_gradients

    cfg = target.config
    cache = target._sampler_cache(graph)
    batch1 = target.sample_batch(graph, rng, _cache=cache)
    keep_c = batch1.central != node
    keep_e = (batch1.src != node) & (batch1.dst != node)
    batch0 = H.Batch(central=batch1.central[keep_c], src=batch1.src[keep_e], dst=batch1.dst[keep_e])
    x = graph.x.float()
    y = graph.y.long()
    classes = int(graph.y.max()) + 1
    with seeded(torch.Generator().manual_seed(model_seed)):
        model = H.StarNet(x.size(1), cfg.hidden, classes, cfg.backbone)

    def loss_of(out, tgt):
        return torch.nn.functional.cross_entropy(out.unsqueeze(0), tgt.unsqueeze(0))

    def total(batch: Any) -> torch.Tensor:
        d = sum(v.numel() for v in model.parameters())
        out = torch.zeros(d, dtype=torch.float64)
        if batch.central.numel():
            packed = target._pack(x, batch.central, batch.src, batch.dst)
            grads = per_example_gradients(model, loss_of, packed, y[batch.central])
            out += clip_rows(flatten(grads), cfg.clip_norm).double().sum(0)
        return out

    measured = float((total(batch1) - total(batch0)).norm())
    central = bool((batch1.central == node).any())
    stars = int(torch.unique(batch1.dst[batch1.src == node]).numel())
    # the accountant's ρ: c when the node is central (its peripheral copies removed, step 5),
    # else 2c per star it survives in as a peripheral
    claimed = cfg.clip_norm * (1.0 if central else 2.0 * stars)
    return measured, claimed, {"central": central, "peripheral_stars": stars,
                               "target_scale": target.node_canary_scale(batch1, node),
                               "batch": int(batch1.central.numel())}


def steps_for(target: Any, graph: Data) -> list[StepMap]:
    """The step maps of a target (empty where the probe has no adapter for this configuration)."""
    name = target.name
    if name == "gaussian":
        return gaussian_steps(target)
    if name == "gap":
        return gap_steps(target)
    if name == "caribou":
        return caribou_steps(target)
    if name == "dpdgc":
        return dpdgc_steps(target, graph)
    if name == "gcon":
        return gcon_steps(target)
    return []


def hub_size(step: StepMap) -> int:
    """Leaves of the hub family: 4D + 1 where the step has a degree bound D (an unbounded hub then
    moves √(4D+1) ≈ 2√D), else 12."""
    return (4 * step.degree_bound + 1) if step.degree_bound is not None else 12


def finite(x: float) -> bool:
    return x is not None and math.isfinite(x)
