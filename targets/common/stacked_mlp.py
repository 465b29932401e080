"""Closed-form per-example clipping for Linear → ELU → Linear (or one Linear), stacked over K runs.

Shared by the DP-SGD targets that train on a leading axis of K independent runs
(:mod:`targets.heterpoisson.stacked`, :mod:`targets.dpsgd_gcn`). Every stacked tensor is
K × R × w with R rows per run (one slot per training node, padded to a multiple of 32), so each
run's slice is whole vector chunks and the kernels treat it as they treat a lone run's.

For one example with input a: h = W1 a + b1, z = elu(h), o = W2 z + b2, loss = CE(o, y). With
δ2 = softmax(o) − e_y and δ1 = (W2ᵀ δ2) ⊙ elu'(h),

    ∇W1 = δ1 aᵀ, ∇b1 = δ1, ∇W2 = δ2 zᵀ, ∇b2 = δ2,

so ‖∇‖² = ‖δ1‖²(‖a‖² + 1) + ‖δ2‖²(‖z‖² + 1) (‖u vᵀ‖ = ‖u‖‖v‖) and the sum of the clipped
gradients is one product per weight: Σ_i c_i δ1_i a_iᵀ = (c ⊙ δ1)ᵀ A. One Linear is the second
layer alone with z = a. The per-example vmap(grad) of :mod:`targets.common.dpsgd` is the reference
(tests/test_heterpoisson_batch.py, tests/test_dpsgd_gcn_batch.py).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from targets.base import one_torch_thread

_ALIGN = 32  # rows per run rounded up to this: a run's slice is whole unrolled vector steps (2 × 16 floats)
STACK_BYTES = 16 * 2**20  # runs stack until their step tensors reach about this size


def padded(n: int) -> int:
    return max(_ALIGN, -(-n // _ALIGN) * _ALIGN)


def stack_bytes(rows: int, features: int, hidden: int, classes: int, width: int) -> int:
    """Rough bytes of one run's share of a stack's step tensors (`rows` slots, a `width`-entry
    parameter row): bounds how many runs stack at once."""
    return 4 * (rows * (3 * features + 6 * hidden + 8 * classes) + 10 * width)


def fit_in_stacks(rngs: list[Any], run_bytes: int, fit_stack: Callable[[list[Any]], list[Any]]) -> list[Any]:
    """``fit_stack`` over consecutive stacks of `rngs` (the runs' generators, or anything standing
    for the runs; as many runs as fit :data:`STACK_BYTES` at `run_bytes` each), on one torch thread
    so that each run's floats do not depend on its stack."""
    size = max(1, STACK_BYTES // run_bytes)
    with one_torch_thread():
        return [release for i in range(0, len(rngs), size) for release in fit_stack(rngs[i:i + size])]


def unflatten(flat: torch.Tensor, shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """One run's flat parameter row (at least the shapes' total entries) → named parameters
    (fresh tensors), in the order of `shapes`."""
    out, offset = {}, 0
    for name, shape in shapes.items():
        k = math.prod(shape)
        out[name] = flat[offset:offset + k].reshape(shape).clone()
        offset += k
    return out


def pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    """`t` with zero rows appended along dim −2 up to `rows`."""
    out = torch.zeros(*t.shape[:-2], rows, t.size(-1), dtype=t.dtype, device=t.device)
    out[..., :t.size(-2), :] = t
    return out


def pad_cols(t: torch.Tensor) -> torch.Tensor:
    """`t` with zero columns appended up to a multiple of 16. A batched product uᵀv whose output
    width (v's columns) is not a multiple of 4 can take a kernel path that depends on the batch
    size (seen with widths 7, 13, 1433 on CPU): a padded width keeps each run's product what it is
    alone. Zero columns add exact zeros to no sum, so the result's first columns are unchanged."""
    cols = -(-t.size(-1) // 16) * 16
    if cols == t.size(-1):
        return t
    out = torch.zeros(*t.shape[:-1], cols, dtype=t.dtype, device=t.device)
    out[..., :t.size(-1)] = t
    return out


class ContiguousGrad(torch.autograd.Function):
    """Identity whose backward hands on a contiguous gradient: batch norm's backward is several
    times slower on the strided (column-major) gradient that the stacked products would send it
    (GAP's stacked classifiers, CARIBOU's stacked CMs)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad.contiguous()


def init_linears(row: torch.Tensor, layers: list[tuple[int, int]], gen: torch.Generator) -> int:
    """nn.Linear's initialisation of `layers` ((fan_in, fan_out) each), drawn from `gen` in module
    order into the flat `row` (weight out × in, then bias, per layer); returns the entries filled."""
    offset = 0
    for fan_in, fan_out in layers:
        w = row[offset:offset + fan_in * fan_out].view(fan_out, fan_in)
        nn.init.kaiming_uniform_(w, a=math.sqrt(5), generator=gen)
        bound = 1 / math.sqrt(fan_in)
        nn.init.uniform_(row[offset + w.numel():offset + w.numel() + fan_out], -bound, bound, generator=gen)
        offset += w.numel() + fan_out
    return offset


class _Linear(torch.autograd.Function):
    """``baddbmm`` whose backward forms each run's gradients as ``F.linear``'s backward forms a lone
    layer's: ∂W = ∂Y ᵀ X (not autograd's (Xᵀ ∂Y)ᵀ, which MKL rounds differently where `out` is
    narrow, e.g. a 7-class head), ∂X = ∂Y W, ∂b = Σ_rows ∂Y."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, w = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad
        return (torch.bmm(grad, w) if need_x else None,
                torch.bmm(grad.transpose(1, 2), x) if need_w else None,
                grad.sum(1) if need_b else None)


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x Wᵀ + b for every run (x: K × R × in, w: K × out × in, b: K × out); forward and gradients
    bitwise each run's ``F.linear`` on CPU (tests/test_stacked_mlp.py)."""
    return _Linear.apply(x, w, b)


def deltas(z: torch.Tensor, o: torch.Tensor, w2: torch.Tensor, onehot: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """(δ1, δ2) of every row: δ2 = softmax(o) − onehot, δ1 = (W2ᵀ δ2) ⊙ elu'(h)."""
    d2 = torch.softmax(o, dim=2) - onehot
    d1 = torch.ops.aten.elu_backward(torch.bmm(d2, w2), 1.0, 1, 1, True, z)  # elu'(h) = z + 1 where h ≤ 0
    return d1, d2


def sq_norm(delta: torch.Tensor, inp: torch.Tensor) -> torch.Tensor:
    """‖δ inpᵀ‖² + ‖δ‖² of every row: one layer's share of the squared gradient norm (K × R)."""
    return torch.linalg.vector_norm(delta, dim=2) ** 2 * (torch.linalg.vector_norm(inp, dim=2) ** 2 + 1)


def clip_factor(sq: torch.Tensor, clip: float, mask: torch.Tensor) -> torch.Tensor:
    """min(1, clip / ‖∇‖) of every row, 0 on rows outside the batch (`mask` 0): K × 1 × R."""
    return (torch.clamp(clip / (sq.sqrt() + 1e-12), max=1.0) * mask).unsqueeze(1)


def first_layer_sums(gw: torch.Tensor, gb: torch.Tensor, d1: torch.Tensor, a: torch.Tensor,
                     factor: torch.Tensor) -> None:
    """Σ_i c_i δ1_i a_iᵀ and Σ_i c_i δ1_i into the views `gw` (K × h × f) and `gb` (K × h); `a` may
    carry zero columns past f. Products on :func:`pad_cols` widths."""
    gw.copy_(torch.bmm(d1.transpose(1, 2), pad_cols(a * factor.transpose(1, 2)))[:, :, :gw.size(2)])
    gb.copy_(torch.bmm(factor, pad_cols(d1))[:, 0, :gb.size(1)])


def last_layer_sums(gw: torch.Tensor, gb: torch.Tensor, d2: torch.Tensor, z: torch.Tensor,
                    factor: torch.Tensor) -> None:
    """Σ_i c_i δ2_i z_iᵀ and Σ_i c_i δ2_i into the views `gw` (K × C × h) and `gb` (K × C); `z` may
    carry zero columns past h. Products on :func:`pad_cols` widths."""
    c2 = d2 * factor.transpose(1, 2)
    gw.copy_(torch.bmm(c2.transpose(1, 2), pad_cols(z))[:, :, :gw.size(2)])
    gb.copy_(c2.sum(1))


def gaussian_noise(d: int, width: int, std: float, rngs: list[torch.Generator]) -> torch.Tensor:
    """Each run's N(0, std² I_d) (K × width, float32, zero past d), from its own generator as a lone
    run draws it (float64 normals cast to float32, then scaled)."""
    out = torch.zeros(len(rngs), width)
    for k, rng in enumerate(rngs):
        out[k, :d] = std * torch.randn(d, generator=rng, dtype=torch.float64).float()
    return out


def softmax_of(x: torch.Tensor, layers: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """softmax of the MLP's output on the rows of `x` (one run's weights (W, b) per layer, ELU
    between layers)."""
    for i, (w, b) in enumerate(layers):
        x = F.linear(x, w, b)
        if i < len(layers) - 1:
            x = F.elu(x)
    return F.softmax(x, dim=1)
