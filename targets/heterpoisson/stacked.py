"""HeterPoisson's DP-SGD for a stack of K independent runs (see :mod:`targets.heterpoisson`).

Layout: every run of a stack has one row *slot* per training node (slot j = ``train_idx[j]``),
padded to R rows, a multiple of 32; a step's example j of run k is slot j's star when node j is
central in run k's batch, and a masked (clip factor 0) row otherwise. So a run's rows never
depend on the other runs of the stack, and every K × R × w tensor holds whole vector chunks per
run: elementwise kernels then treat run k's slice exactly as they treat a lone run's, and the
batched products act on each run alone. Run k draws only from its own generator, in the order a
lone run draws (init, canary split, inference seed; per step its central coins, its edge coins,
a planted bug's draws, its noise), so ``fit_batch(graph, rngs)[k]`` is bitwise
``fit(graph, rngs[k])`` on CPU (tested for K = 1, 3 and across stacks).

Per-example gradients in closed form for ``StarNet`` (a = aggregate(x, s, n), then
:mod:`targets.common.stacked_mlp`'s Linear → ELU → Linear with its norms and products), plus GIN's λ
(a = s + (1+λ) x): ∇λ = δ1 · (W1 x), whose square adds to the squared norm. The per-example
vmap(grad) of :mod:`targets.common.dpsgd` is the reference (tests/test_heterpoisson_batch.py).

Parameters live in one flat K × D block (D = d rounded up to 32; parameters in
``StarNet.parameters()`` order: GIN's λ first, then lin1's and lin2's weight and bias); Adam
(torch.optim.Adam's update, betas 0.9/0.999, eps 1e-8) acts on it elementwise. The stack runs
on one torch thread (a parallel kernel would split its range by the stack's size).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from targets.base import child_generator
from targets.heterpoisson.accountant import sml_sample
from targets.heterpoisson.model import Batch, aggregate
from targets.common.stacked_mlp import (clip_factor, deltas, first_layer_sums, gaussian_noise, init_linears,
                                 last_layer_sums, linear, padded, sq_norm, unflatten)

_BETA1, _BETA2, _EPS = 0.9, 0.999, 1e-8


@dataclass
class Layout:
    """Where each parameter sits in a run's flat vector (``StarNet.parameters()`` order)."""

    features: int
    hidden: int
    classes: int
    gin: bool

    @property
    def d(self) -> int:
        f, h, c = self.features, self.hidden, self.classes
        return f * h + h + h * c + c + int(self.gin)

    @property
    def width(self) -> int:
        return padded(self.d)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Parameter shapes in ``StarNet.parameters()`` order: the module's own λ before its layers'."""
        f, h, c = self.features, self.hidden, self.classes
        layers = {"lin1.weight": (h, f), "lin1.bias": (h,), "lin2.weight": (c, h), "lin2.bias": (c,)}
        return {"gin_eps": (1,), **layers} if self.gin else layers

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """One run's flat vector (≥ d entries) → its named parameters (fresh tensors)."""
        return unflatten(flat, self.shapes())

    def views(self, flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(W1, b1, W2, b2, λ or None) of every run, as views of the K × D block."""
        f, h, c = self.features, self.hidden, self.classes
        k = flat.size(0)
        o0 = int(self.gin)
        o1 = o0 + f * h
        o2 = o1 + h
        o3 = o2 + h * c
        o4 = o3 + c
        lam = flat[:, 0] if self.gin else None
        return flat[:, o0:o1].view(k, h, f), flat[:, o1:o2], flat[:, o2:o3].view(k, c, h), flat[:, o3:o4], lam


@dataclass
class Sampled:
    """One step's Heter-Poisson batches of K runs: central mask (K × n_train slots) and the kept
    peripheral edges as (run, src, dst) triples, each run's in its lone order."""

    central: torch.Tensor
    run: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor

    def batch_of(self, k: int, train_idx: torch.Tensor) -> Batch:
        mine = self.run == k
        return Batch(central=train_idx[self.central[k]], src=self.src[mine], dst=self.dst[mine])


def sample(cache: dict, rngs: list[torch.Generator], q: float, neighbors: int, *, order_overlap: bool,
           isolated_fallback: bool) -> Sampled:
    """Heter-Poisson batches of every run (CPU): central coins, then edge coins, then the planted
    bugs' draws, each from the run's own generator in a lone run's order."""
    n, train_idx, src, dst, keep_p = cache["n"], cache["train_idx"], cache["src"], cache["dst"], cache["keep_p"]
    k_runs, m = len(rngs), train_idx.numel()
    coins = torch.stack([torch.rand(m, generator=rng) for rng in rngs]) if m else torch.zeros(k_runs, 0)
    central = coins < q
    is_central = torch.zeros(k_runs, n, dtype=torch.bool)
    is_central[:, train_idx] = central
    sel = is_central[:, dst]
    runs, edges = sel.nonzero(as_tuple=True)  # row-major: run k's edges in edge order
    counts = sel.sum(1).tolist()
    draws = torch.cat([torch.rand(c, generator=rng) for c, rng in zip(counts, rngs)])
    kept = draws < keep_p[edges]
    runs, e_src, e_dst = runs[kept], src[edges[kept]], dst[edges[kept]]
    if isolated_fallback:
        parts = []
        for k, rng in enumerate(rngs):
            mine = runs == k
            part = [(runs[mine], e_src[mine], e_dst[mine])]
            c = train_idx[central[k]]
            iso = c[cache["indeg"][c] == 0]
            if iso.numel():
                extra = torch.randint(0, n, (iso.numel() * neighbors,), generator=rng)
                part.append((torch.full_like(extra, k), extra, iso.repeat_interleave(neighbors)))
            parts.extend(part)
        runs, e_src, e_dst = (torch.cat([p[i] for p in parts]) for i in range(3))
    if order_overlap:
        pos = torch.full((k_runs, n), -1, dtype=torch.long)
        for k, rng in enumerate(rngs):
            c = train_idx[central[k]]
            pos[k, c[torch.randperm(c.numel(), generator=rng)]] = torch.arange(c.numel())
        drop = is_central[runs, e_src] & (pos[runs, e_src] < pos[runs, e_dst])
    else:
        drop = is_central[runs, e_src]
    keep = ~drop
    return Sampled(central=central, run=runs[keep], src=e_src[keep], dst=e_dst[keep])


def star_inputs(x: torch.Tensor, slot_of: torch.Tensor, rows: int, k_runs: int, run: torch.Tensor,
                src: torch.Tensor, dst: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(S, N): each slot's sum of kept peripheral features (K × rows × f, accumulated in each
    run's edge order) and count (K × rows × 1), on x's device."""
    dev = x.device
    index = (run * rows + slot_of[dst]).to(dev)
    s = torch.zeros(k_runs * rows, x.size(1), device=dev, dtype=x.dtype)
    s.index_add_(0, index, x[src.to(dev)])
    cnt = torch.bincount(index, minlength=k_runs * rows).to(x.dtype)
    return s.view(k_runs, rows, -1), cnt.view(k_runs, rows, 1)


def logits(lay: Layout, params: torch.Tensor, xs: torch.Tensor, s: torch.Tensor, cnt: torch.Tensor,
           backbone: str) -> tuple[torch.Tensor, ...]:
    """(A, H, Z, O) of every run's rows: A the aggregated input, H = A W1ᵀ + b1, Z = elu(H),
    O = Z W2ᵀ + b2."""
    w1, b1, w2, b2, lam = lay.views(params)
    a = aggregate(xs, s, cnt, backbone, None if lam is None else lam.view(-1, 1, 1))
    h = linear(a, w1, b1)
    z = F.elu(h)
    o = linear(z, w2, b2)
    return a, h, z, o


def clipped_sum(lay: Layout, params: torch.Tensor, xs: torch.Tensor, s: torch.Tensor, cnt: torch.Tensor,
                onehot: torch.Tensor, mask: torch.Tensor, clip: float, backbone: str) -> torch.Tensor:
    """Σ over each run's unmasked rows of its per-example gradient clipped to `clip` in ℓ2
    (K × D; closed form, see the module docstring). `mask` (K × rows) is 1 for the batch's rows."""
    k_runs = params.size(0)
    w1, _, w2, _, lam = lay.views(params)
    a, _, z, o = logits(lay, params, xs, s, cnt, backbone)
    d1, d2 = deltas(z, o, w2, onehot)
    sq = sq_norm(d1, a) + sq_norm(d2, z)
    if lam is not None:  # ∂loss/∂λ = (∂loss/∂a) · x = (W1ᵀ δ1) · x
        g_lam = (torch.bmm(d1, w1) * xs).sum(2)
        sq = sq + g_lam * g_lam
    factor = clip_factor(sq, clip, mask)
    out = torch.zeros(k_runs, lay.width, device=params.device, dtype=params.dtype)
    gw1, gb1, gw2, gb2, glam = lay.views(out)
    first_layer_sums(gw1, gb1, d1, a, factor)
    last_layer_sums(gw2, gb2, d2, z, factor)
    if glam is not None:
        glam.copy_((g_lam * factor.squeeze(1)).sum(1))
    return out


@dataclass
class Run:
    """What one run keeps besides its rows of the stacked tensors: its generators and the
    inference seed its api samples neighbours with."""

    rng: torch.Generator
    canary_rng: torch.Generator
    infer_seed: int


def init_runs(lay: Layout, rngs: list[torch.Generator]) -> tuple[torch.Tensor, list[Run]]:
    """Each run's initial parameters (``StarNet``'s: nn.Linear's init from a seed drawn off its
    generator, as ``targets.base.seeded`` seeds it), its canary generator and its inference seed:
    the K × D parameter block and the runs."""
    params = torch.zeros(len(rngs), lay.width)
    runs = []
    for k, rng in enumerate(rngs):
        gen = child_generator(rng)
        init_linears(params[k, int(lay.gin):], [(lay.features, lay.hidden), (lay.hidden, lay.classes)], gen)
        canary_rng = child_generator(rng)  # always split, so worlds with and without canary align
        infer_seed = int(torch.randint(0, 2**62, (1,), generator=rng).item())
        runs.append(Run(rng, canary_rng, infer_seed))
    return params, runs


def noise(d: int, width: int, std: float, rngs: list[torch.Generator], kind: str, per_coordinate: bool
          ) -> torch.Tensor:
    """Each run's step noise (K × width, float32, zero past d), from its own generator."""
    if kind != "sml":
        return gaussian_noise(d, width, std, rngs)
    out = torch.zeros(len(rngs), width)
    for k, rng in enumerate(rngs):
        out[k, :d] = sml_sample(d, std, rng, per_coordinate=per_coordinate)
    return out


class Adam:
    """torch.optim.Adam's update (no weight decay) on the K × D block, elementwise."""

    def __init__(self, params: torch.Tensor, lr: float) -> None:
        self.params, self.lr, self.t = params, lr, 0
        self.m, self.v = torch.zeros_like(params), torch.zeros_like(params)

    def step(self, grad: torch.Tensor) -> None:
        self.t += 1
        self.m.lerp_(grad, 1 - _BETA1)
        self.v.mul_(_BETA2).addcmul_(grad, grad, value=1 - _BETA2)
        step_size = self.lr / (1 - _BETA1 ** self.t)
        denom = (self.v.sqrt() / math.sqrt(1 - _BETA2 ** self.t)).add_(_EPS)
        self.params.addcdiv_(self.m, denom, value=-step_size)

