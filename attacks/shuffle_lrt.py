"""``shuffle-lrt``: the likelihood ratio of a trace whose batches are a shuffle cut into fixed-size batches,
for a canary that is a real training row (Chua et al., ICML 2024's pair; Opacus #80).

The pair is a node-removal canary: world 1 holds the canary row z among m training rows, world 0 the other
m − 1. A shuffled epoch of L = round(1/q) steps cuts a permutation of the rows by ``% L`` (the sampler of
dpsgd-gcn's ``shuffled-batches`` bug), so step j holds n_j(m) = ⌈(m − j)/L⌉ rows: with m ≡ 0 (mod L) every
step of world 1 holds b rows, while world 0's last step is one short. The canary's step is uniform.

**The direction, from public data only.** For a two-class linear model (the trace's shapes: one weight of
2 × f and its bias) a row's gradient is (p − e_y) ⊗ [x; 1] = ±p_{1−y}·(1, −1) ⊗ [x; 1]: its direction is
fixed by the row's features and label, whatever the parameters. The score projects each released noisy
sum on u, the unit direction of the canary's gradient, in units of C: o_t = ⟨g_t, u⟩/C. Every other row's
clipped gradient projects to ρ_i = s_i·s_z·cos([x_i; 1], [x_z; 1]) (s = +1 for label 1, −1 for label 0),
assuming it is clipped (its norm at least C), which the crafted public graph
(:func:`graphs.small.opposed_rows`) makes hold. The score takes their mean ρ.

**The likelihood ratio.** Along u the noise is N(0, σ²), σ = noise_std / C (the declared law). Per epoch,
world 0's means are ρ·n_j(m − 1); world 1's, with the canary in step k, ρ·n_j(m) + (1 − ρ)·[j = k]. The
epoch's score is ln (1/L) Σ_k p1(o | k) − ln p0(o) (a short last epoch: a k beyond its steps puts the canary
in a step not released), and the run's the sum over epochs.

It reads the released noisy sums, the declared q, C and noise scale, and the public graph: never the
trace's ``clean``, ``central`` or ``canary_in`` (the auditor's instrumentation; a batch's membership or
size says where the canary is). Where the data or the sampler differ from this model, it is still a
statistic of the release, valid under cp's held-out threshold; it only loses power.

A candidate only where one probe release shows batch sizes that are not Poisson's
(:func:`attacks.step_max.fixed_batches`) and the trace is a two-class linear model's.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from scipy.special import logsumexp

from attacks.base import Attack
from attacks.step_max import epoch_of, fixed_batches
from targets.base import Level, Release, Unit


def shuffled_counts(rows: int, epoch: int) -> np.ndarray:
    """Rows per step of an epoch when a permutation of `rows` rows is cut by ``% epoch``: ⌈(rows − j)/epoch⌉."""
    j = np.arange(epoch)
    return np.maximum(0, (rows - j + epoch - 1) // epoch).astype(float)


def linear_layout(trace) -> tuple[int, int] | None:
    """(f, offset of the bias) where the trace's shapes are one two-class linear layer (weight 2 × f, then
    its bias), else None."""
    shapes = list(getattr(trace, "shapes", {}).values())
    if len(shapes) != 2 or len(shapes[0]) != 2 or tuple(shapes[1]) != (2,) or shapes[0][0] != 2:
        return None
    return int(shapes[0][1]), 2 * int(shapes[0][1])


def canary_direction(x: torch.Tensor, y: torch.Tensor, z: int, rows: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(u, ρ): the unit direction of row z's two-class linear gradient in the flat layout (weight rows, then
    bias), signed so that z's clipped gradient is +C·u, and the mean projection of the other rows' clipped
    gradients on u, in units of C."""
    xt = torch.cat([x.double(), torch.ones(x.size(0), 1, dtype=torch.float64)], 1)
    sign = 2.0 * y.double() - 1.0  # label 1: +(1, −1) ⊗ [x; 1]; label 0: −(1, −1) ⊗ [x; 1]
    xz = xt[z]
    f = x.size(1)
    w = torch.cat([xz[:f], -xz[:f], xz[f:], -xz[f:]]) * sign[z]
    u = w / w.norm()
    others = rows[rows != z]
    cos = (xt[others] @ xz) / (xt[others].norm(dim=1) * xz.norm()).clamp(min=1e-300)
    rho = float((sign[others] * sign[z] * cos).mean()) if others.numel() else 0.0
    return u, rho


def epoch_llr(o: np.ndarray, mean0: np.ndarray, mean1: np.ndarray, bump: float, sd: float, epoch: int) -> float:
    """ln (1/L) Σ_k p1(o | canary in step k) − ln p0(o), over the epoch's released steps o (at most L)."""
    seen = len(o)
    base = -((o - mean1) ** 2).sum() / (2 * sd * sd) + ((o - mean0) ** 2).sum() / (2 * sd * sd)
    moved = ((o - mean1) ** 2 - (o - mean1 - bump) ** 2) / (2 * sd * sd)  # canary in released step k
    terms = np.concatenate([moved, np.zeros(epoch - seen)])  # k beyond the released steps: no step moves
    return float(base + logsumexp(terms) - math.log(epoch))


class ShuffleLRT(Attack):
    """The exact log-likelihood ratio of the projections on the canary row's gradient direction, over the
    canary's step in each shuffled epoch."""

    name = "shuffle-lrt"
    levels = (Level.TRACE,)
    units = (Unit.NODE,)
    canary_kind = "row"

    def applies_to(self, release: Release, graph: Any = None) -> bool:
        trace = release.trace
        return trace is not None and linear_layout(trace) is not None and fixed_batches(trace) is not None

    def pointed_by(self, release: Release) -> str | None:
        return fixed_batches(release.trace) if release.trace is not None else None

    def model(self, trace, pair) -> tuple[torch.Tensor, float, np.ndarray, np.ndarray, float]:
        """(u, σ along u in units of C, world 0's and world 1's per-step means of one epoch, the canary's
        shift), from the public graph of world 1 and the declared law."""
        if pair.node is None:
            raise ValueError("shuffle-lrt scores a canary that is a training row (a node-removal canary), "
                             f"not {pair.recorded('canary') or 'this canary'!r}")
        layout = linear_layout(trace)
        if layout is None:
            raise ValueError("shuffle-lrt needs a two-class linear model's trace (shapes: a 2 × f weight, then "
                             f"its bias); got {dict(trace.shapes)}")
        g1 = pair.g1
        rows = g1.train_mask.cpu().nonzero().view(-1)
        u, rho = canary_direction(g1.x.cpu(), g1.y.cpu(), int(pair.node), rows)
        epoch = epoch_of(float(trace.sampling_rate))
        m = rows.numel()
        mean0 = rho * shuffled_counts(m - 1, epoch)
        mean1 = rho * shuffled_counts(m, epoch)
        sd = max(float(trace.noise_std) / float(trace.clip_norm), 1e-6)
        return u, sd, mean0, mean1, 1.0 - rho

    def projections(self, trace, u: torch.Tensor) -> np.ndarray:
        """o_t = ⟨g_t, u⟩ / C of every released step."""
        noisy = torch.stack([st.noisy for st in trace.steps]).double()
        return (noisy[:, :u.numel()] @ u).numpy() / float(trace.clip_norm)

    def score(self, release: Release, pair, graph=None) -> float:
        trace = release.trace
        u, sd, mean0, mean1, bump = self.model(trace, pair)
        o = self.projections(trace, u)
        epoch, total = len(mean0), 0.0
        for start in range(0, len(o), epoch):
            seen = o[start:start + epoch]
            total += epoch_llr(seen, mean0[:len(seen)], mean1[:len(seen)], bump, sd, epoch)
        return total
