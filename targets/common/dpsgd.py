"""DP-SGD building blocks shared by the node-level targets.

Per-example gradients with ``torch.func`` (vmap over ``grad``), per-example clipping to an ℓ2
norm, Poisson sampling and Gaussian noise drawn from an explicit generator. The noisy *sum* of
clipped gradients is what a DP-SGD step releases (the ``trace`` view records it); the optimiser
then divides it by the expected batch size (Abadi et al. 2016; Opacus' convention).
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, vmap


def poisson_sample(n: int, rate: float, rng: torch.Generator) -> torch.Tensor:
    """Indices of a Poisson sample of range(n): each kept independently with probability `rate`."""
    return torch.nonzero(torch.rand(n, generator=rng) < rate, as_tuple=False).view(-1)


def per_example_gradients(model: nn.Module, loss_of: Callable[..., torch.Tensor],
                          *batch: torch.Tensor) -> dict[str, torch.Tensor]:
    """Gradients of `loss_of(output, *targets)` for each example (leading dim of every batch tensor).

    `loss_of(model_output_for_one_example, *rest_for_one_example)` must return a scalar; the model
    is called on ``batch[0]`` with a batch dimension of 1.
    """
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def one(p, b, x, *rest):
        out = functional_call(model, (p, b), (x.unsqueeze(0),))
        return loss_of(out.squeeze(0), *rest)

    return vmap(grad(one), in_dims=(None, None, 0, *([0] * (len(batch) - 1))))(params, buffers, *batch)


def flatten(grads: dict[str, torch.Tensor]) -> torch.Tensor:
    """Per-example gradient dict (B × shape) → B × P matrix."""
    return torch.cat([g.reshape(g.shape[0], -1) for g in grads.values()], dim=1)


def clip_rows(flat: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Scale each row to ℓ2 norm ≤ `max_norm`."""
    norms = flat.norm(dim=1, keepdim=True)
    return flat * torch.clamp(max_norm / (norms + 1e-12), max=1.0)


def noisy_sum(clipped: torch.Tensor, std: float, rng: torch.Generator) -> torch.Tensor:
    """Σ_i clipped_i + N(0, std² I), noise drawn on CPU from `rng` (device-independent results)."""
    total = clipped.sum(0) if clipped.numel() else torch.zeros(clipped.shape[1], device=clipped.device)
    noise = torch.randn(total.shape, generator=rng, dtype=total.dtype).to(total.device)
    return total + std * noise


def assign_flat_grad(model: nn.Module, flat: torch.Tensor) -> None:
    """Write a flat gradient vector into ``p.grad`` of the trainable parameters, in order."""
    offset = 0
    for p in model.parameters():
        if not p.requires_grad:
            continue
        k = p.numel()
        p.grad = flat[offset:offset + k].view_as(p).clone()
        offset += k
    if offset != flat.numel():
        raise ValueError(f"gradient has {flat.numel()} entries, the model {offset}")


def canary_from(graph, canary_gradient=None, canary_node=None):
    """(canary gradient, canary node): explicit arguments first, else the graph's attributes
    ``canary_gradient``/``canary_node`` (how canaries/gradient.py marks world 1)."""
    if canary_gradient is None:
        canary_gradient = getattr(graph, "canary_gradient", None)
        if canary_node is None:
            canary_node = getattr(graph, "canary_node", None)
    return canary_gradient, canary_node
