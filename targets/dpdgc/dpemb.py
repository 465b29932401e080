"""DP-Emb's projected DP-Adam for a stack of independent runs (see :mod:`targets.dpdgc`).

Run k of a stack draws only from its own generator, in the order a lone run draws (init, then per
step its batch and its n·h + h noise), and every per-run quantity is computed by kernels that treat
each run alone (elementwise ops, row reductions, batched products, one fused Adam call over the
list of per-run parameter blocks), so run k gives back the W a lone run gives, whatever the stack
(tested bitwise). That is what lets a batch of trials be split into groups trained on parallel
threads: the noise draw, DP-Emb's floor, is serial per generator but independent across runs.

Layout: run k's parameters are one (n + 1) × h block ``P[k]`` = [W (n rows) | b], its noisy
gradient sum ``G[k]`` likewise; the step's noise is drawn straight into ``G`` with the noise std
(``normal_(0, std)``: the same floats as ``std · randn``), the clean clipped sum is added onto it,
and one ``torch._fused_adam_`` call (``torch.optim.Adam(fused=True)``'s kernel: L2 weight decay,
the sum divided by B through its ``grad_scale``) updates every block.
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F

from targets.common.trace import DPSGDTrace, TraceStep

#: SELU's constants
_SCALE, _ALPHA = 1.0507009873554805, 1.6732632423543772
_BETA1, _BETA2, _EPS = 0.9, 0.999, 1e-8
_SELU_BACKWARD = torch.ops.aten.elu_backward.default  # SELU's derivative, fused (selu = elu(α, scale))


@dataclass
class Adjacency:
    """A (one edge set) on the device, in the forms DP-Emb's steps read: CSR rows, the gradient
    norm factor per row, and on CUDA the sparse matrix and its transpose (``index_add_`` would
    be atomic there)."""

    crow: torch.Tensor
    deg: torch.Tensor  # entries per row (crow[i + 1] − crow[i])
    cols: torch.Tensor
    vals: torch.Tensor
    grad_factor: torch.Tensor  # √(deg_i + 1): ‖∂loss_i/∂(W, b)‖ = √(deg_i + 1)·‖g_i‖
    unit: bool  # every value is 1
    sparse: tuple[torch.Tensor, torch.Tensor] | None = None


@dataclass
class Schedule:
    """One DP-Emb training: n nodes, h hidden, B batch, T steps, the noise std, Adam's settings,
    the clip and W's row projection (in place)."""

    n: int
    hidden: int
    batch: int
    steps: int
    std: float
    lr: float
    weight_decay: float
    clip: float
    project: Callable[[torch.Tensor], None]


#: the fewest runs a thread group stacks: a smaller stack pays Python's per-op cost for fewer runs
#: (one run alone costs ~2× a run in a stack of 16, CPU time)
MIN_GROUP = 4


def threads_for(runs: int, min_group: int = MIN_GROUP) -> int:
    """Worker threads for `runs` runs: one per usable core, each with at least `min_group` runs."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(runs // max(1, min_group), cores))


def train(adj: Adjacency, sched: Schedule, y: torch.Tensor, train_idx: torch.Tensor, classes: int,
          rngs: list[torch.Generator], canary: torch.Tensor | None = None,
          trace: DPSGDTrace | None = None, threads: int = 1,
          then: Callable[[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]], Any] | None = None) -> list:
    """(W, b, R) of each run, run k from ``rngs[k]``; the runs split into `threads` groups trained
    at once (the same floats: see the module docstring). `then(k, (W, b, R))`, where given, is
    applied to run k on its group's thread (what follows training: the release) and its value
    returned instead."""
    def finish(start: int, runs: list) -> list:
        return runs if then is None else [then(start + j, run) for j, run in enumerate(runs)]

    if adj.sparse is not None:  # CUDA: one stack, its kernels are the parallelism
        return finish(0, _train_stack(adj, sched, y, train_idx, classes, rngs, canary, trace))
    size = math.ceil(len(rngs) / max(1, threads))
    starts = range(0, len(rngs), size)

    def one(start: int) -> list:
        torch.set_num_threads(1)  # every group single-threaded, so its floats never depend on the pool
        return finish(start, _train_stack(adj, sched, y, train_idx, classes, rngs[start:start + size], canary, trace))

    threads_before = torch.get_num_threads()
    try:
        if len(starts) == 1:
            done = [one(0)]
        else:
            with ThreadPoolExecutor(max_workers=len(starts), thread_name_prefix="dpemb") as pool:
                done = list(pool.map(one, starts))
    finally:
        torch.set_num_threads(threads_before)
    return [run for group in done for run in group]


def _init(n: int, h: int, classes: int, rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """W, b from ``Linear(n, h)``'s U(±1/√n) and the fixed head R: h × C (spec §2.2)."""
    bound = 1.0 / math.sqrt(n)
    w = (torch.rand(n, h, generator=rng) * 2 - 1) * bound
    b = (torch.rand(h, generator=rng) * 2 - 1) * bound
    u, _, vt = torch.linalg.svd(torch.randn(h, h, generator=rng))
    return w, b, (u @ vt)[:classes].t() * math.sqrt(6.0 / h)


def _train_stack(adj: Adjacency, sched: Schedule, y: torch.Tensor, train_idx: torch.Tensor, classes: int,
                 rngs: list[torch.Generator], canary: torch.Tensor | None = None,
                 trace: DPSGDTrace | None = None) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Per step and run: a fixed-size batch of B training nodes (``randperm``), per-example
    gradients of ``logits_i = SELU(A_i W + b) R`` (closed form: ∂loss_i/∂W = a_iᵀ g_i,
    ∂loss_i/∂b = g_i), each clipped to C, their sum plus N(0, std²), Adam on the sum / B, and W's
    rows projected. `canary` (d or T×d, not clipped) joins every step's clipped sum; `trace` (one
    run only) gets each step's noisy and clean sums."""
    n, h, batch = sched.n, sched.hidden, sched.batch
    dev = adj.crow.device
    k_runs = len(rngs)
    inits = [_init(n, h, classes, rng) for rng in rngs]
    params = torch.empty(k_runs, n + 1, h)
    for k, (w, b, _) in enumerate(inits):
        params[k, :n], params[k, n] = w, b
    params = params.to(dev)
    head = torch.stack([r for _, _, r in inits]).to(dev)  # K × h × C
    head_t = head.transpose(1, 2).contiguous()
    w = params[:, :n]
    sched.project(w)
    grads = torch.empty(k_runs, n + 1, h)  # drawn on CPU from each run's generator
    m1, m2 = torch.zeros_like(params), torch.zeros_like(params)
    blocks = [list(t.unbind(0)) for t in (params, grads, m1, m2)]
    scale = torch.tensor(float(batch), device=dev)
    step = torch.zeros((), device=dev)  # Adam's step count, read (not advanced) by the fused kernel
    m = train_idx.numel()
    perms = torch.empty(k_runs, m, dtype=torch.long, device="cpu")  # each step's randperms, drawn in place (CPU generators)
    y_dev = y.to(dev)
    runs = torch.arange(k_runs, device=dev)[:, None]  # K × 1
    arange_b = torch.arange(batch, device=dev)[None, :]
    rows_of = None if adj.sparse is not None else _BatchRows(adj, train_idx, y, classes, k_runs, batch)
    for t in range(sched.steps):
        for perm, rng in zip(perms, rngs):
            torch.randperm(m, generator=rng, out=perm)
        pos = perms[:, :batch].to(dev)  # K × B in train_idx
        idx = train_idx.to(dev)[pos] if rows_of is None or trace is not None else None
        if rows_of is None:
            pre_all = torch.sparse.mm(adj.sparse[0], w.transpose(0, 1).reshape(n, k_runs * h)).view(n, k_runs, h)
            pre = pre_all[idx, runs] + params[:, n, None, :]
        else:
            pre = rows_of.gather(params, pos)
        act = torch.selu(pre)
        probs = torch.softmax(torch.bmm(act, head), dim=2)  # K × B × C
        if rows_of is None:
            probs[runs, arange_b, y_dev[idx]] -= 1.0  # ∂CE/∂logits
        else:
            probs.sub_(rows_of.onehot)  # (x − 0 = x: the same floats as subtracting 1 at the label)
        gpre = _SELU_BACKWARD(torch.bmm(probs, head_t), _ALPHA, _SCALE, 1.0, False, pre)
        # ‖∂loss_i/∂(W, b)‖² = (deg_i + 1)‖g_i‖²
        factor = adj.grad_factor[idx] if rows_of is None else rows_of.factor
        norms = torch.linalg.vector_norm(gpre, dim=2).mul_(factor)
        gs = gpre.mul_((sched.clip / norms.add_(1e-12)).clamp_(max=1.0)[..., None])
        # each run's noise after its batch (its generator's order), drawn once the batch rows' work
        # is done, so the clean sum lands on rows the draw has just written
        for block, rng in zip(blocks[1], rngs):
            block.normal_(0.0, sched.std, generator=rng)
        noisy = grads.to(dev)
        # the clean sum onto the noise: row j of run k gathers the clipped g_i of its batch rows i
        # with A[i, j], row n (b) all of them
        if adj.sparse is not None:
            scattered = torch.zeros(n, k_runs, h, device=dev)
            scattered[idx, runs] = gs
            grad_w = torch.sparse.mm(adj.sparse[1], scattered.view(n, k_runs * h)).view(n, k_runs, h)
            noisy[:, :n].add_(grad_w.transpose(0, 1))
        else:
            target, rows = rows_of.target, rows_of.spread(gs)
            noisy.view(k_runs * (n + 1), h).index_add_(0, target, rows)
            if trace is not None:
                grad_w = torch.zeros(n + 1, h, device=dev).index_add_(0, target, rows)[None, :n]
        grad_b = gs.sum(1)  # K × h
        noisy[:, n].add_(grad_b)
        if canary is not None:
            c = canary[t] if canary.dim() == 2 else canary
            noisy[:, :n].add_(c[: n * h].view(1, n, h))
            noisy[:, n].add_(c[n * h:])
        if trace is not None:
            clean = torch.cat([grad_w.reshape(-1), grad_b[0]])
            if canary is not None:
                clean = clean + c
            trace.steps.append(TraceStep(noisy=noisy[0].flatten().to("cpu", copy=True), central=idx[0].cpu(),
                                         canary_in=True if canary is not None else None, clean=clean.cpu(),
                                         canary=c.cpu() if canary is not None else None))
        step.fill_(t + 1)
        noisy_blocks = blocks[1] if noisy.data_ptr() == grads.data_ptr() else list(noisy.unbind(0))
        torch._fused_adam_(blocks[0], noisy_blocks, blocks[2], blocks[3], [], [step] * k_runs, lr=sched.lr,
                           beta1=_BETA1, beta2=_BETA2, weight_decay=sched.weight_decay, eps=_EPS,
                           amsgrad=False, maximize=False, grad_scale=scale, found_inf=None)
        sched.project(w)
    return [(params[k, :n].clone(), params[k, n].clone(), head[k].contiguous()) for k in range(k_runs)]


class _BatchRows:
    """The batch rows' part of a step on CPU, for a stack of K runs of B rows: A's CSR entries of
    run k's batch rows as rows of the flat K·(n + 1) × h parameters (``target``), each bag summed
    in A's column order (``embedding_bag``: the same floats for any K), and the backward pass's
    rows (each clipped g_i once per entry of row i, times A's value). Per training node, what a
    step reads (CSR start and degree, one-hot label, gradient norm factor) is gathered once."""

    def __init__(self, adj: Adjacency, train_idx: torch.Tensor, y: torch.Tensor, classes: int, k_runs: int,
                 batch: int) -> None:
        nnz, n1 = adj.cols.numel(), adj.crow.numel()  # n1 = n + 1 (row n of a run's block is b)
        self.k_runs, self.batch = k_runs, batch
        self.start, self.deg = adj.crow[train_idx], adj.deg[train_idx]
        self.labels = F.one_hot(y[train_idx], classes).to(torch.float32)
        self.factors = adj.grad_factor[train_idx]
        # run k's copy of A's entries: column j → row k·(n + 1) + j of the flat parameters
        runs = torch.arange(k_runs, device=adj.cols.device)
        self.cols = (adj.cols[None, :] + runs[:, None] * n1).reshape(-1)
        self.vals = None if adj.unit else adj.vals.repeat(k_runs)
        self.run_shift = (runs * nnz).repeat_interleave(batch)  # bag k·B + i reads run k's entries
        self.arange = torch.arange(k_runs * nnz, device=adj.cols.device)

    def gather(self, params: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """(A W_k + b_k) at run k's batch rows ``train_idx[pos[k]]`` (K × B × h)."""
        k_runs, n1, h = params.shape
        flat = pos.reshape(-1)
        counts = self.deg.index_select(0, flat)
        ends = torch.cumsum(counts, 0)
        self.offsets = offsets = ends - counts
        total = int(ends[-1])
        shift = self.start.index_select(0, flat).add_(self.run_shift).sub_(offsets)
        self.bag = bag = torch.repeat_interleave(counts, output_size=total)  # entry e's bag (its batch row)
        entry = shift.index_select(0, bag).add_(self.arange[:total])
        self.target = self.cols.index_select(0, entry)
        self.val = None if self.vals is None else self.vals.index_select(0, entry)
        self.onehot = self.labels.index_select(0, flat).view(k_runs, -1, self.labels.size(1))
        self.factor = self.factors.index_select(0, flat).view(k_runs, -1)
        pre = F.embedding_bag(self.target, params.view(k_runs * n1, h), offsets, mode="sum",
                              per_sample_weights=self.val)
        return pre.view(k_runs, self.batch, h) + params[:, n1 - 1, None, :]

    def spread(self, gs: torch.Tensor) -> torch.Tensor:
        """Row e: the clipped g_i of the bag that entry e belongs to, times A's value."""
        rows = gs.reshape(-1, gs.size(-1)).index_select(0, self.bag)
        return rows if self.val is None else rows.mul_(self.val[:, None])
