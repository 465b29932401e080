"""The 2-layer GCN of :mod:`targets.gcn` trained for K runs at once (one product chain per epoch).

Run k has its own graph (its normalised Â_k: the same graph for every run of
:class:`targets.gcn.NonPrivateGCN`, one perturbed graph per run for :mod:`targets.edgerand`), its own
parameters and its own generator. The K graphs form one block-diagonal CSR matrix, so a graph
convolution of the whole stack is one sparse product whose row r of block k sums the same entries, in
the same order, as run k's product alone; the dense products are batched (``bmm``) on widths that
keep each run's floats what they are alone (:func:`targets.common.stacked_mlp.pad_cols`'s note), and the
parameters live in one K × D block (D a multiple of 64) that one Adam steps, element by element. So
run k's floats do not depend on K, and ``fit`` is this with K = 1. The gradient is written out
(no autograd): cross-entropy's (softmax − onehot) / n_train on the training rows, back through the
second convolution, dropout and ReLU, and the first convolution (tests/test_gcn_batch.py checks it
against the module trained by autograd).

Per epoch, exactly as the module version trains: dropout on the features (their stored entries when
sparse), the first convolution, ReLU, dropout, the second convolution, cross-entropy over the
training nodes, Adam; then the evaluation forward and the best-validation-accuracy parameters kept.
Only the rows a loss or an accuracy reads are computed in the second convolution (the training rows
while training, the validation rows while evaluating): the others never reach a number that is used.
The evaluation forward's first convolution is (Â X) W1ᵀ with Â X computed once per run (dense
features; the same number as Â (X W1ᵀ) up to rounding).

Each run's generator seeds one torch generator (as :func:`targets.base.seeded` seeds the global one)
that draws the initialisation (nn.Linear's order) and then, per epoch, the feature mask and the hidden
mask (one draw for both). A mask entry is Bernoulli(1 − dropout) as in ``F.dropout``, but drawn from
random words (one bit an entry at the default dropout ½, :func:`_multipliers`): ``bernoulli_`` spends
one generator call an entry, and on csbm its 5.8 M calls a run cost more than the rest of the training.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from targets.common import stacked_mlp

_WIDTH_ALIGN = 64  # parameter row length: whole vector steps for Adam's elementwise kernels


class BlockCSR:
    """K sparse matrices (``shape`` each) as one block-diagonal CSR matrix and its transpose, for
    values that may change (dropout on stored entries) while the pattern stays.

    ``entries[k]`` = (rows, cols) of run k, sorted row-major (coalesced COO order)."""

    def __init__(self, entries: Sequence[tuple[torch.Tensor, torch.Tensor]], shape: tuple[int, int],
                 device: torch.device) -> None:
        n_rows, n_cols = shape
        k_runs = len(entries)
        rows = torch.cat([r + k * n_rows for k, (r, _) in enumerate(entries)])
        cols = torch.cat([c + k * n_cols for k, (_, c) in enumerate(entries)])
        self.shape = (k_runs * n_rows, k_runs * n_cols)
        perm = torch.argsort(cols * self.shape[0] + rows)  # transpose order of the values
        self.perm = perm.to(device)
        # 32-bit indices where they fit: CPU products then skip a conversion (~30 % faster)
        index = torch.int32 if max(self.shape) < 2**31 and rows.numel() < 2**31 else torch.int64
        self.crow = _crow(rows, self.shape[0]).to(device, index)
        self.col = cols.to(device, index)
        self.crow_t = _crow(cols[perm], self.shape[1]).to(device, index)
        self.col_t = rows[perm].to(device, index)

    def matrices(self, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(A, Aᵀ) for the concatenated values of the K runs."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            a = torch.sparse_csr_tensor(self.crow, self.col, values, self.shape, check_invariants=False)
            a_t = torch.sparse_csr_tensor(self.crow_t, self.col_t, values[self.perm], self.shape[::-1],
                                          check_invariants=False)
        return a, a_t


#: 2 × (bit i of byte b), b in 0..255: the multipliers (mask / keep) at keep = ½
_HALF = ((torch.arange(256).unsqueeze(1) >> torch.arange(8)) & 1).float() * 2


def _multipliers(gens: list[torch.Generator], shapes: list[tuple[int, ...]], keep: float) -> list[torch.Tensor]:
    """Each run's dropout multipliers, Bernoulli(keep) / keep, for masks of the given per-run
    shapes (K × shape each, run k's from gens[k], one draw per run for all of them): for keep = ½ one
    random bit per entry (64-bit words, each mask starting on a word, read byte by byte, bit by bit),
    else one float32 uniform per entry compared with keep (as bernoulli_ does)."""
    k_runs, sizes = len(gens), [math.prod(shape) for shape in shapes]
    if keep == 0.5:
        spans = [-(-n // 64) * 64 for n in sizes]
        words = torch.stack([torch.randint(-2**63, 2**63 - 1, (sum(spans) // 64,), generator=g, dtype=torch.int64)
                             for g in gens])
        flat = _HALF.index_select(0, words.view(torch.uint8).view(-1).int()).view(k_runs, -1)
    else:
        spans = sizes
        flat = (torch.stack([torch.rand(sum(sizes), generator=g) for g in gens]) < keep).float().div_(keep)
    out, at = [], 0
    for shape, n, span in zip(shapes, sizes, spans):
        out.append(flat[:, at:at + n].reshape(k_runs, *shape))
        at += span
    return out


def _crow(rows: torch.Tensor, n: int) -> torch.Tensor:
    return torch.cat([torch.zeros(1, dtype=torch.long), torch.bincount(rows, minlength=n).cumsum(0)])


def rows_of(adj: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows, cols, values) of the coalesced COO `adj` restricted to the rows in the sorted index
    `keep`, rows renumbered 0..len(keep)−1 (row-major order kept)."""
    rows, cols = adj.indices()
    pos = torch.full((adj.size(0),), -1, dtype=torch.long)
    pos[keep] = torch.arange(keep.numel())
    sel = pos[rows] >= 0
    return pos[rows[sel]], cols[sel], adj.values()[sel]


@dataclass
class Layout:
    """Where W1 (H × F), b1, W2 (Cp × H; rows past C zero), b2 (Cp) sit in a parameter row."""

    features: int
    hidden: int
    classes: int

    @property
    def out(self) -> int:  # the second layer's output width, padded so batched products keep run floats
        return -(-self.classes // 4) * 4

    @property
    def width(self) -> int:
        f, h, o = self.features, self.hidden, self.out
        return -(-(h * f + h + o * h + o) // _WIDTH_ALIGN) * _WIDTH_ALIGN

    def views(self, flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        f, h, o = self.features, self.hidden, self.out
        k = flat.size(0)
        w1 = flat[:, :h * f].view(k, h, f)
        b1 = flat[:, h * f:h * f + h]
        at = h * f + h
        w2 = flat[:, at:at + o * h].view(k, o, h)
        b2 = flat[:, at + o * h:at + o * h + o]
        return w1, b1, w2, b2

    def init(self, gen: torch.Generator) -> torch.Tensor:
        """One run's row, nn.Linear(F, H) then nn.Linear(H, C) initialised from `gen` in module order."""
        f, h, c = self.features, self.hidden, self.classes
        dense = torch.zeros(h * f + h + c * h + c)
        stacked_mlp.init_linears(dense, [(f, h), (h, c)], gen)
        row = torch.zeros(self.width)
        row[:h * f + h + c * h] = dense[:h * f + h + c * h]
        at = h * f + h + self.out * h
        row[at:at + c] = dense[h * f + h + c * h:]
        return row

    def weights(self, row: torch.Tensor) -> dict[str, torch.Tensor]:
        """One run's parameters under the module's names (fresh CPU tensors)."""
        w1, b1, w2, b2 = self.views(row.unsqueeze(0).cpu())
        c = self.classes
        return {"conv1.weight": w1[0].clone(), "conv1.bias": b1[0].clone(),
                "conv2.weight": w2[0, :c].clone(), "conv2.bias": b2[0, :c].clone()}


def run_bytes(num_nodes: int, features: int, hidden: int, nnz: int, feature_nnz: int | None) -> int:
    """Rough bytes of one run's share of a stack's per-epoch working set: its masks and activations,
    its graph once (a sparse product streams it; the stack need not stay in cache), its sparse
    features if any."""
    dense_x = num_nodes * features if feature_nnz is None else 3 * feature_nnz
    return 4 * (3 * dense_x + 10 * num_nodes * hidden) + 8 * nnz


def times_t(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """a wᵀ for every run (a: K × R × I, w: K × O × I) as a contiguous K × R × O, computed as
    (w aᵀ)ᵀ: with R wide and O narrow (the logits' 4 columns) this orientation is several times
    faster on CPU (and slower where O is 16)."""
    return torch.bmm(w, a.transpose(1, 2)).transpose(1, 2).contiguous()


class Features:
    """The input layer of a stack: dropout on x and x W1ᵀ for every run, and W1's gradient (dense
    x: batched products; sparse x: its stored entries dropped, one block-diagonal sparse product)."""

    def __init__(self, x: torch.Tensor, k_runs: int, device: torch.device) -> None:
        self.k, self.device = k_runs, device
        self.sparse = x.is_sparse
        if self.sparse:
            rows, cols = x.indices()
            self.values = x.values().to(device)
            self.block = BlockCSR([(rows, cols)] * k_runs, tuple(x.shape), device)
            self.clean = self.block.matrices(self.values.repeat(k_runs))
        else:
            self.x = x.to(device)
            self.clean_x = self.x.expand(k_runs, -1, -1).contiguous()
        self.dropped: Any = None

    def mask_shape(self, keep: float) -> tuple[int, ...] | None:
        """A run's dropout mask on x (None where F.dropout would draw nothing)."""
        shape = tuple(self.values.shape) if self.sparse else tuple(self.x.shape)
        return None if keep == 1.0 or 0 in shape else shape

    def times(self, w1: torch.Tensor, multipliers: torch.Tensor | None) -> torch.Tensor:
        """(dropout(x) W1ᵀ) of every run, K·N × H (no dropout when `multipliers` is None); the
        dropped input is kept for :meth:`grad`."""
        k, h, f = w1.shape
        if self.sparse:
            self.dropped = self.clean if multipliers is None else self.block.matrices(
                (self.values * multipliers).reshape(-1))
            return self.dropped[0] @ w1.transpose(1, 2).reshape(k * f, h)
        self.dropped = self.clean_x if multipliers is None else self.x * multipliers
        return torch.bmm(self.dropped, w1.transpose(1, 2)).view(-1, h)

    def grad(self, g: torch.Tensor, out: torch.Tensor) -> None:
        """W1's gradient (K × H × F, into `out`) from the gradient `g` (K·N × H) of the last
        :meth:`times`."""
        k, h, f = out.shape
        if self.sparse:
            out.copy_((self.dropped[1] @ g).view(k, f, h).transpose(1, 2))
        else:
            out.copy_(torch.bmm(g.view(k, -1, h).transpose(1, 2), self.dropped))


def _softmax(z: torch.Tensor) -> torch.Tensor:
    """Softmax over the last (few-class) dimension; torch.softmax's kernel is ~3× slower on 3 classes."""
    e = (z - z.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


def train(x: torch.Tensor, y: torch.Tensor, train_mask: torch.Tensor, select: torch.Tensor,
          adjs: list[torch.Tensor], gens: list[torch.Generator], *, hidden: int, epochs: int, lr: float,
          dropout: float, weight_decay: float, device: torch.device) -> tuple[torch.Tensor, list[float], Layout]:
    """Train len(adjs) runs (run k on the coalesced COO Â `adjs[k]`, drawing from `gens[k]`);
    `select` marks the nodes whose accuracy picks the kept epoch. Returns the kept parameter rows
    (K × D, CPU), each run's best accuracy and the layout of a row.

    The gradient is written out (cross-entropy's is (softmax − onehot) / n_train per training row,
    then back through the two convolutions); Adam steps it as torch.optim.Adam does."""
    k_runs, n = len(adjs), int(x.size(0))
    lay = Layout(int(x.size(1)), hidden, int(y.max()) + 1)
    c, o = lay.classes, lay.out
    keep = 1.0 - dropout
    tr = train_mask.nonzero().view(-1)
    sel = select.nonzero().view(-1)

    def block(nodes: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        parts = [(*a.indices(), a.values()) if nodes is None else rows_of(a, nodes) for a in adjs]
        rows = n if nodes is None else nodes.numel()
        vals = torch.cat([p[2] for p in parts]).to(device)
        return BlockCSR([(p[0], p[1]) for p in parts], (rows, n), device).matrices(vals)

    full, on_train, on_select = block(None), block(tr), block(sel)
    inputs = Features(x, k_runs, device)
    onehot = F.one_hot(y[tr].long(), o).float().to(device)  # n_train × Cp, zero past C
    y_select = y[sel].to(device)

    flat = torch.stack([lay.init(g) for g in gens]).to(device).requires_grad_(True)
    flat.grad = torch.zeros_like(flat)
    opt = torch.optim.Adam([flat], lr=lr, weight_decay=weight_decay)
    best_flat = flat.detach().clone()
    best = torch.full((k_runs,), -1.0, dtype=torch.float64)
    h_shape = (k_runs, n, hidden)
    x_shape = inputs.mask_shape(keep)
    shapes = ([x_shape] if x_shape is not None else []) + ([(n, hidden)] if dropout > 0 else [])  # p = 0: no draws
    g_w1, g_b1, g_w2, g_b2 = lay.views(flat.grad)

    if inputs.sparse:
        def clean_first(w1: torch.Tensor) -> torch.Tensor:
            return full[0] @ inputs.times(w1, None)
    else:
        ax = (full[0] @ inputs.clean_x.view(k_runs * n, -1)).view(k_runs, n, -1)

        def clean_first(w1: torch.Tensor) -> torch.Tensor:
            return torch.bmm(ax, w1.transpose(1, 2))

    def logits(h: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor, mat: torch.Tensor) -> torch.Tensor:
        return (mat @ times_t(h, w2).view(-1, o)).view(k_runs, -1, o) + b2.unsqueeze(1)

    with torch.no_grad():
        for _ in range(epochs):
            w1, b1, w2, b2 = lay.views(flat)
            masks = [m.to(device) for m in _multipliers(gens, shapes, keep)]  # the x mask, then h's
            x_mult = masks.pop(0) if x_shape is not None else None
            mult = masks.pop(0) if dropout > 0 else None
            pre = (full[0] @ inputs.times(w1, x_mult)).view(h_shape) + b1.unsqueeze(1)
            h = F.relu(pre)
            if mult is not None:
                h = h * mult
            z = logits(h, w2, b2, on_train[0])
            g_z = F.pad((_softmax(z[:, :, :c]) - onehot[:, :c]) / tr.numel(), (0, o - c))
            g_b2.copy_(g_z.sum(1))
            g_hw = (on_train[1] @ g_z.view(-1, o)).view(k_runs, n, o)
            g_w2.copy_(torch.bmm(g_hw.transpose(1, 2), h))
            g_h = torch.bmm(g_hw, w2)
            g_pre = torch.ops.aten.threshold_backward(g_h if mult is None else g_h * mult, pre, 0)  # ReLU's
            g_b1.copy_(g_pre.sum(1))
            inputs.grad(full[1] @ g_pre.view(-1, hidden), g_w1)
            opt.step()

            w1, b1, w2, b2 = lay.views(flat)
            h = F.relu(clean_first(w1).view(h_shape) + b1.unsqueeze(1))
            z = logits(h, w2, b2, on_select[0])[:, :, :c]
            acc = (z.argmax(2) == y_select).float().mean(1).double().cpu()
            better = acc > best
            if bool(better.any()):
                best = torch.where(better, acc, best)
                best_flat[better.to(device)] = flat[better.to(device)]
    return best_flat.detach().cpu(), best.tolist(), lay
