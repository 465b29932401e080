"""Projected gradient ascent of a step's change through a map that is not linear in its input X.

For a step whose noiseless output ``apply(graph, X)`` is not linear in X (``StepMap.linear`` is
False, e.g. a declared mean that normalises, clips, saturates or attends), the difference matrix
``apply(g1, I) − apply(g0, I)`` says nothing about other inputs. The probe then maximises

    F(X) = ‖apply(g1, X) − apply(g0, X)‖   (the step's norm: ℓ2, ℓ1 or Σ of row ℓ2)

over X in the claim's domain (every row of ℓ2 norm ≤ radius) by autograd through the target's own
code: from each start, a step along the gradient scaled to the radius, projected back onto the
domain, kept only where F grows (the step halves otherwise), until the step is negligible.

Starts (every free row set, not only the rows the canary touches): sign patterns on every row of a
shared direction (the first feature, or spread over all features), at full and at half radius
(a normalising map moves most where a sum is short); random rows at random radii; the target's own
X; and the linear search's X. The probe screens every pair with a short climb from the best
start only and gives the full multi-start ascent to its finalists (:mod:`canaries.sensitivity`).
A maximum found this way is a lower bound on the step's Δ, not its
value: where it stays under the claim the probe says "searched, no witness found (a search, not a
proof)".
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

#: graphs up to this many nodes get every row searched; larger ones only the rows within
#: ``BALL_HOPS`` of the canary (the rest keep the target's own X, or zero)
ALL_ROWS_MAX_N = 64
BALL_HOPS = 2


def objective(diff: torch.Tensor, norm: str) -> torch.Tensor:
    """The step's norm of a change, differentiable (ℓ2 = Frobenius)."""
    if norm == "l21":
        return diff.norm(dim=1).sum()
    if norm == "l1":
        return diff.abs().sum()
    return diff.norm()


def project(x: torch.Tensor, radius: float) -> torch.Tensor:
    """Each row onto the ℓ2 ball of `radius`."""
    return x * (radius / x.norm(dim=1, keepdim=True).clamp_min(radius))


def free_rows(g0: Any, g1: Any, canary: Any, n: int) -> torch.Tensor:
    """The rows the ascent moves: all of a small graph, else the canary's ball in g0 ∪ g1."""
    if n <= ALL_ROWS_MAX_N:
        return torch.arange(n)
    ei = torch.cat([g0.edge_index, g1.edge_index], 1).cpu()
    ball = torch.zeros(n, dtype=torch.bool)
    ball[torch.as_tensor(list(canary) if isinstance(canary, (tuple, list)) else [int(canary)])] = True
    for _ in range(BALL_HOPS):
        grown = ball.clone()
        grown[ei[1][ball[ei[0]]]] = True
        grown[ei[0][ball[ei[1]]]] = True
        ball = grown
    return ball.nonzero().view(-1)


def starts(base: torch.Tensor, rows: torch.Tensor, radius: float, rng: np.random.Generator, count: int,
           extra: list[torch.Tensor]) -> list[torch.Tensor]:
    """Initial inputs (module docstring): `base` with its `rows` replaced, plus `extra` as given."""
    b, h = rows.numel(), base.size(1)
    first = torch.zeros(h, dtype=torch.float64)
    first[0] = 1.0
    spread = torch.full((h,), 1.0 / math.sqrt(h), dtype=torch.float64)
    patterns = []
    for direction, scale in ((first, 1.0), (spread, 0.5), (spread, 1.0), (first, 0.5)):
        signs = torch.from_numpy(rng.choice((1.0, -1.0), size=b))
        patterns.append(scale * signs[:, None] * direction[None, :])
    while len(patterns) < count:
        z = torch.from_numpy(rng.standard_normal((b, h)))
        r = torch.from_numpy(rng.uniform(0.3, 1.0, size=(b, 1)))
        patterns.append(r * z / z.norm(dim=1, keepdim=True).clamp_min(1e-12))
    out = []
    for p in patterns[:count]:
        x = base.clone()
        x[rows] = radius * p
        out.append(x)
    return out + [project(e.clone().double(), radius) for e in extra]


def climb(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, rows: torch.Tensor, radius: float, *,
          iters: int = 80, min_step: float = 1e-4) -> tuple[float, torch.Tensor]:
    """Monotone projected ascent of f from x, moving only `rows`: (best value, its X)."""
    x = x.detach().clone()
    with torch.no_grad():
        best = float(f(x))
    step = 0.5 * radius
    for _ in range(iters):
        if step < min_step * radius:
            break
        xv = x.clone().requires_grad_(True)
        val = f(xv)
        if not torch.isfinite(val):
            break
        (grad,) = torch.autograd.grad(val, xv)
        g = torch.nan_to_num(grad[rows])
        scale = float(g.norm(dim=1).max())
        if scale == 0.0:
            break
        while step >= min_step * radius:
            cand = x.clone()
            cand[rows] = project(x[rows] + step * g / scale, radius)
            with torch.no_grad():
                v = float(f(cand))
            if math.isfinite(v) and v > best:
                x, best = cand, v
                step = min(step * 1.5, radius)
                break
            step *= 0.5
    return best, x


def ascend(change: Callable[[torch.Tensor], torch.Tensor], norm: str, base: torch.Tensor, rows: torch.Tensor,
           radius: float, rng: np.random.Generator, *, count: int = 8, iters: int = 80,
           extra: list[torch.Tensor] | None = None, climbed: int | None = None) -> tuple[float, torch.Tensor]:
    """max over X in the domain of ‖change(X)‖ by :func:`climb`: (value, X). Every start is
    evaluated once; the `climbed` best of them (all when None) are climbed.
    `change(X)` = apply(g1, X) − apply(g0, X) (canary row excluded where the claim excludes it)."""
    def f(x: torch.Tensor) -> torch.Tensor:
        return objective(change(x), norm)

    points = starts(base, rows, radius, rng, count, list(extra or []))
    with torch.no_grad():
        values = [float(f(x)) for x in points]
    order = sorted(range(len(points)), key=lambda i: -values[i] if math.isfinite(values[i]) else math.inf)
    best, best_x = -1.0, base
    for i in order[:climbed]:
        value, x = climb(f, points[i], rows, radius, iters=iters)
        if value > best:
            best, best_x = value, x
    return best, best_x.detach()
