"""CARIBOU's edge-level classification modules (CM) of a batch of trials, trained together.

:func:`train` is :func:`targets.caribou.model._fit_best_val` of K
:class:`~targets.caribou.model.ClassificationModule` s at once, over their parameters stacked on a
leading run axis: per epoch one batched forward (x0-dropout, the two linear bases, normalisation,
batch norm, SELU, dropout, the head), one backward (autograd), one ``torch.optim.Adam`` step and one
evaluation on the validation rows. Run k's floats do not depend on K, and they are those of the
module trained alone by ``_fit_best_val`` (tests/test_caribou_cm_batch.py), because every operation
acts on each run's slice as the lone module's operation acts on its tensor:

* products are ``baddbmm`` on K × m × in slices (per slice the same kernel as ``F.linear``'s
  ``addmm``, forward and backward);
* batch norm is one ``F.batch_norm`` over an m × (K·2h) matrix, its per-channel statistics summed
  row by row in the same order as over the lone m × 2h input (train and eval mode, running
  statistics updated in place);
* element-wise kernels (SELU, dropout, Adam) round the same wherever an element sits, except the
  transcendental ones (SELU), whose vector and scalar paths differ: a run's slice must be whole
  vector steps, so runs stack only where 2h is a multiple of :data:`_ALIGN` (else stacks of one);
* each run draws its x0-dropout and dropout masks from its own generator, in the module's order.

Each run keeps the parameters and batch-norm buffers of its first epoch of best validation accuracy.
Everything runs on one torch thread (a parallel kernel splits its range by the size of its input).
"""
from __future__ import annotations

import threading
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch_geometric.data import Data

from targets.base import one_torch_thread
from targets.caribou.model import ClassificationModule, _fit_best_val
from targets.common.stacked_mlp import ContiguousGrad, linear

_ALIGN = 32  # floats: two AVX-512 vectors, the unrolled step of torch's CPU element-wise loops
STACK_BYTES = 256 * 2**20  # runs stack until their activations reach about this size (csbm: 64 runs ≈ 118 MB)
_PARAMS = ("base0.weight", "base0.bias", "basek.weight", "basek.bias", "bn.weight", "bn.bias",
           "out.weight", "out.bias")
_BUFFERS = ("bn.running_mean", "bn.running_var")


def _batch_norm(x: torch.Tensor, p: dict[str, torch.Tensor], s: dict[str, torch.Tensor], train: bool) -> torch.Tensor:
    """BatchNorm1d of each run's m × C slice of x (K × m × C) as one m × (K·C) batch norm."""
    k, m, c = x.shape
    flat = x.transpose(0, 1).reshape(m, k * c)
    out = F.batch_norm(flat, s["bn.running_mean"].view(-1), s["bn.running_var"].view(-1),
                       p["bn.weight"].view(-1), p["bn.bias"].view(-1), training=train, momentum=0.1, eps=1e-5)
    return ContiguousGrad.apply(out).view(m, k, c).transpose(0, 1).contiguous()


def _masks(gens: list[torch.Generator], shape: tuple[int, ...], p: float) -> torch.Tensor:
    """Each run's keep indicator (K × shape), drawn from its generator as ``model._dropout`` draws it."""
    u = torch.empty((len(gens), *shape), device=gens[0].device)
    for k, g in enumerate(gens):
        torch.rand(shape, generator=g, device=g.device, out=u[k])
    return (u >= p).float()


def _forward(p: dict[str, torch.Tensor], s: dict[str, torch.Tensor], z: torch.Tensor, batch_norm: bool,
             gens: list[torch.Generator] | None, dropout: float, x0_dropout: float) -> torch.Tensor:
    """ClassificationModule.forward of every run on its rows z (K × m × 2h); training mode (dropout
    from `gens`, batch statistics) where `gens` is given, else eval mode."""
    train = gens is not None
    h = z.shape[-1] // 2
    z0, zk = z[..., :h], z[..., h:]
    if train and x0_dropout > 0:
        keep = _masks(gens, (z.size(1), 1), x0_dropout).to(z.device)
        z0 = z0.new_ones(keep.shape) * keep / (1 - x0_dropout) * z0
    hidden = F.normalize(torch.cat([linear(z0, p["base0.weight"], p["base0.bias"]),
                                    linear(zk, p["basek.weight"], p["basek.bias"])], dim=-1), dim=-1)
    a = F.selu(_batch_norm(hidden, p, s, train) if batch_norm else hidden)
    if train and dropout > 0:
        a = a * _masks(gens, tuple(a.shape[1:]), dropout).to(a.device) / (1 - dropout)
    return linear(a, p["out.weight"], p["out.bias"])


def train(modules: list[ClassificationModule], z: Callable[[int], torch.Tensor], y: torch.Tensor,
          train_mask: torch.Tensor, val_mask: torch.Tensor, epochs: int, lr: float, weight_decay: float,
          gens: list[torch.Generator]) -> None:
    """Train ``modules[k]`` (freshly initialised) on the inputs ``z(k)`` (n × 2h) as
    ``_fit_best_val(modules[k], z(k), graph, epochs, Adam(lr, weight_decay), gens[k])`` does, all
    at once; each module is left in eval mode holding its best-validation state."""
    first = modules[0]
    if len(modules) > 1 and (2 * first.base0.in_features) % _ALIGN:
        raise ValueError(f"runs stack only where 2h is a multiple of {_ALIGN} (SELU's vector and scalar "
                         f"paths round differently); h = {first.base0.in_features}")
    batch_norm = not isinstance(first.bn, torch.nn.Identity)
    states = [m.state_dict() for m in modules]
    p = {k: torch.stack([st[k] for st in states]).requires_grad_() for k in _PARAMS if k in states[0]}
    s = {k: torch.stack([st[k] for st in states]) for k in _BUFFERS if k in states[0]}
    inputs = [z(k) for k in range(len(modules))]
    z_train = torch.stack([x[train_mask] for x in inputs])
    z_val = torch.stack([x[val_mask] for x in inputs]) if bool(val_mask.any()) else None
    del inputs
    y_train, y_val = y[train_mask], y[val_mask]
    opt = torch.optim.Adam(list(p.values()), lr=lr, weight_decay=weight_decay)
    runs = len(modules)
    best_acc = torch.full((runs,), -1.0)
    best = {k: v.detach().clone() for k, v in {**p, **s}.items()}
    best_epoch = torch.zeros(runs, dtype=torch.long)  # batch-norm batches seen at the kept epoch
    for epoch in range(epochs):
        opt.zero_grad()
        logits = _forward(p, s, z_train, batch_norm, gens, first.dropout, first.x0_dropout)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y_train.repeat(runs), reduction="none")
        loss.view(runs, -1).mean(1).sum().backward()
        opt.step()
        if z_val is None:
            continue
        with torch.no_grad():
            acc = (_forward(p, s, z_val, batch_norm, None, 0.0, 0.0).argmax(2) == y_val).float().mean(1).cpu()
            better = acc > best_acc
            if bool(better.any()):
                best_acc = torch.where(better, acc, best_acc)
                best_epoch[better] = epoch + 1
                on = better.to(z_train.device)
                for k, v in {**p, **s}.items():
                    best[k][on] = v.detach()[on]
    final = best if z_val is not None else {k: v.detach() for k, v in {**p, **s}.items()}
    tracked = best_epoch if z_val is not None else torch.full((runs,), epochs, dtype=torch.long)
    for k, module in enumerate(modules):
        state = {name: v[k].clone() for name, v in final.items()}
        if batch_norm:
            state["bn.num_batches_tracked"] = tracked[k].clone()
        module.load_state_dict(state)
        module.eval()


def run_bytes(rows: int, width: int) -> int:
    """Rough bytes of one run's share of a stack's activations and gradients (`rows` training and
    validation rows of `width` = 2h columns)."""
    return 4 * 12 * rows * width


class CMBatch:
    """The CMs of one ``fit_batch`` call, trained together the first time any of them is needed.

    Trial j registers (:meth:`add`) a function making its freshly initialised module and its dropout
    generator, and its X⁽ᴷ⁾ (the batch shares X⁽⁰⁾); :meth:`module` trains every registered CM once,
    in stacks of consecutive trials (:data:`STACK_BYTES`; one trial a stack where 2h is not a
    multiple of :data:`_ALIGN`). A stack of one is the module trained by ``_fit_best_val``."""

    def __init__(self, x0: torch.Tensor, y: torch.Tensor, train_mask: torch.Tensor, val_mask: torch.Tensor,
                 epochs: int, lr: float, weight_decay: float) -> None:
        self.x0, self.y, self.train_mask, self.val_mask = x0, y, train_mask, val_mask
        self.epochs, self.lr, self.weight_decay = epochs, lr, weight_decay
        self.pending: list[tuple[Callable[[], tuple[ClassificationModule, torch.Generator]], torch.Tensor]] = []
        self.modules: list[ClassificationModule] = []
        self.stacks = 0  # stacks trained (read by tests)
        self._lock = threading.Lock()

    def add(self, make: Callable[[], tuple[ClassificationModule, torch.Generator]], xk: torch.Tensor) -> int:
        self.pending.append((make, xk))
        return len(self.pending) - 1

    def module(self, j: int) -> ClassificationModule:
        with self._lock:
            if not self.modules:
                self._train()
                self.pending = []
        return self.modules[j]

    def _train(self) -> None:
        width = 2 * self.x0.size(1)
        rows = int(self.train_mask.sum()) + int(self.val_mask.sum())
        size = max(1, STACK_BYTES // run_bytes(rows, width)) if width % _ALIGN == 0 else 1
        made = [make() for make, _ in self.pending]
        split = Data(y=self.y, train_mask=self.train_mask, val_mask=self.val_mask)
        with one_torch_thread():
            for i in range(0, len(made), size):
                stack = made[i:i + size]
                if len(stack) == 1:  # the module itself: the same floats, without the stack's layout work
                    module, gen = stack[0]
                    opt = torch.optim.Adam(module.parameters(), lr=self.lr, weight_decay=self.weight_decay)
                    _fit_best_val(module, torch.cat([self.x0, self.pending[i][1]], 1), split, self.epochs, opt, gen)
                else:
                    train([m for m, _ in stack], lambda k, at=i: torch.cat([self.x0, self.pending[at + k][1]], 1),
                          self.y, self.train_mask, self.val_mask, self.epochs, self.lr, self.weight_decay,
                          [g for _, g in stack])
                self.stacks += 1
        self.modules = [m for m, _ in made]
