"""GAP's edge-level classification module, trained for B trials at once (issue: batched trials).

A functional copy of ``targets.gap.model._Classifier`` over parameters stacked on a leading trial axis
([B, ...] for each entry of the module's state_dict). Every operation acts on each trial's slice
alone (batched matmuls, per-channel BatchNorm statistics, row-wise reductions, element-wise
updates), so trial j's numbers do not depend on how many trials share the batch: ``fit`` (B = 1)
and ``fit_batch`` give bitwise-equal classifiers on CPU with one thread. Where a batched kernel
rounds differently with the batch size (unaligned matmuls, transcendental activations on short
slices, fused BatchNorm on odd widths), the operation runs per trial instead.
"""
from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from targets.base import seeded

from targets.gap.config import GAPConfig
from targets.gap.model import rownorm
from targets.common.stacked_mlp import ContiguousGrad


_BN_MOMENTUM, _BN_EPS = 0.1, 1e-5  # nn.BatchNorm1d's defaults, as _Classifier uses them


def _b_linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """x [B, m, d] · wᵀ [B, d, o] + b [B, o] → [B, m, o].

    One batched product where d is a multiple of 16 (every trial's slice then starts 64-byte
    aligned, as a lone trial's does); otherwise one product per trial on fresh (aligned) copies:
    MKL's products round differently with the alignment of their operands.
    """
    if x.size(-1) % 16:
        return torch.stack([_Fresh.apply(F.linear(_Fresh.apply(x[j]), _Fresh.apply(w[j]), b[j]))
                            for j in range(x.size(0))])
    if w.size(1) < 16:  # narrow outputs (the head's classes): w · xᵀ is the faster product on CPU
        return torch.baddbmm(b.unsqueeze(2), w, x.transpose(1, 2)).transpose(1, 2).contiguous()
    return torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))


_B_ACTIVATIONS = {"selu": torch.selu, "relu": F.relu, "tanh": torch.tanh}


def _b_activation(name: str):
    """The activation on [B, ...], applied per trial where a trial's slice would not fill whole
    vector chunks (vectorised and scalar transcendental functions may round differently)."""
    fn = _B_ACTIVATIONS[name]

    def act(x: torch.Tensor) -> torch.Tensor:
        if name == "relu" or x[0].numel() % 64 == 0:
            return fn(x)
        return torch.stack([fn(x[j]) for j in range(x.size(0))])

    return act


class _Fresh(torch.autograd.Function):
    """A fresh (64-byte aligned) copy, whose gradient is handed back as a fresh copy too."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad.clone()


def _b_batch_norm(p: dict[str, torch.Tensor], s: dict[str, torch.Tensor], prefix: str, x: torch.Tensor,
                  train: bool) -> torch.Tensor:
    """BatchNorm1d of each trial's [m, C] slice of x [B, m, C] (running statistics updated when training).

    Where C is not a multiple of 16 it is written out (reductions over the rows of each trial):
    F.batch_norm over B·C channels then rounds differently with the batch size.
    """
    if train and x.size(-1) % 16 == 0:
        # one fused kernel over B·C channels: it vectorises across channels, so with C a multiple
        # of the vector width each trial's channels are handled as they are alone
        b_, m, c = x.shape
        flat = ContiguousGrad.apply(x).transpose(0, 1).reshape(m, b_ * c)
        out = F.batch_norm(flat, s[prefix + "running_mean"].view(-1), s[prefix + "running_var"].view(-1),
                           p[prefix + "weight"].reshape(-1), p[prefix + "bias"].reshape(-1),
                           training=True, momentum=_BN_MOMENTUM, eps=_BN_EPS)
        s[prefix + "num_batches_tracked"] += 1
        return ContiguousGrad.apply(out).view(m, b_, c).transpose(0, 1).contiguous()
    w, b = p[prefix + "weight"].unsqueeze(1), p[prefix + "bias"].unsqueeze(1)
    if not train:
        scale = w / torch.sqrt(s[prefix + "running_var"].unsqueeze(1) + _BN_EPS)
        return x * scale + (b - s[prefix + "running_mean"].unsqueeze(1) * scale)
    m = x.size(1)
    if m < 2:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {tuple(x.shape)}")
    mean = x.mean(1, keepdim=True)
    d = x - mean
    var = (d * d).mean(1, keepdim=True)
    with torch.no_grad():
        rm, rv = s[prefix + "running_mean"], s[prefix + "running_var"]
        rm.copy_(rm * (1 - _BN_MOMENTUM) + mean.squeeze(1) * _BN_MOMENTUM)
        rv.copy_(rv * (1 - _BN_MOMENTUM) + (var.squeeze(1) * (m / (m - 1))) * _BN_MOMENTUM)
        s[prefix + "num_batches_tracked"] += 1
    return d / torch.sqrt(var + _BN_EPS) * w + b


def _b_mlp(p, s, prefix: str, x: torch.Tensor, layers: int, bn: bool, act, drop, train: bool) -> torch.Tensor:
    for i in range(layers):
        x = _b_linear(x, p[f"{prefix}layers.{i}.weight"], p[f"{prefix}layers.{i}.bias"])
        if i < layers - 1:
            x = _b_batch_norm(p, s, f"{prefix}bns.{i}.", x, train) if bn else x
            x = act(drop(x))
    return x


def _take(chans: list[torch.Tensor], rows: Any, cols: torch.Tensor) -> list[torch.Tensor]:
    """The given node rows of every trial (c[rows, cols] of each hop channel)."""
    return [c[rows, cols] for c in chans]


def _b_classifier(cfg: GAPConfig, p, s, chans: list[torch.Tensor], train: bool, drop) -> torch.Tensor:
    """_Classifier.forward for B trials: chans[i] is hop channel i ([B, m, h]); returns logits [B, m, classes]."""
    act, bn = _b_activation(cfg.activation), cfg.use_batch_norm
    hs = [_b_mlp(p, s, f"base.{i}.", c, cfg.base_layers, bn, act, drop, train) for i, c in enumerate(chans)]
    if cfg.combine == "cat":
        z = torch.cat(hs, dim=-1)
    else:
        # pairwise element-wise steps (a reduction over a stacked axis may group them by shape)
        z = hs[0]
        for h in hs[1:]:
            z = torch.maximum(z, h) if cfg.combine == "max" else z + h
        z = z / len(hs) if cfg.combine == "mean" else z
    z = rownorm(z)
    z = _b_batch_norm(p, s, "bn.", z, train) if bn else z
    return _b_mlp(p, s, "head.", act(drop(z)), cfg.head_layers, bn, act, drop, train)


def _no_dropout(x: torch.Tensor) -> torch.Tensor:
    return x


def _dropout_per_trial(rate: float, gens: list[torch.Generator]):
    """Inverted dropout on [B, ...] with trial j's mask drawn from gens[j] (as F.dropout draws it)."""
    def drop(x: torch.Tensor) -> torch.Tensor:
        masks = torch.stack([torch.empty(x.shape[1:], dtype=x.dtype).bernoulli_(1 - rate, generator=g)
                             for g in gens]).to(x.device)
        return x * masks.div_(1 - rate)
    return drop


def _b_adam_step(params: list[torch.Tensor], state: list[dict[str, torch.Tensor]], step: int, lr: float,
                 weight_decay: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
    """torch.optim.Adam's update (defaults, L2 weight decay), one IEEE operation per tensor op.

    Element-wise single operations round the same wherever an element sits in a vector register,
    so a trial's update is the same alone or in a batch (fused/contracted kernels need not be).
    """
    b1, b2 = betas
    bc1, bc2_sqrt = 1 - b1 ** step, math.sqrt(1 - b2 ** step)
    with torch.no_grad():
        for p, st in zip(params, state):
            g = p.grad if weight_decay == 0 else p.grad + p * weight_decay
            if not st:
                st["m"], st["v"] = torch.zeros_like(p), torch.zeros_like(p)
            st["m"] = st["m"] * b1 + g * (1 - b1)
            st["v"] = st["v"] * b2 + (g * g) * (1 - b2)
            denom = st["v"].sqrt() / bc2_sqrt + eps
            p.sub_((st["m"] / denom) * (lr / bc1))


def _b_sgd_step(params: list[torch.Tensor], lr: float, weight_decay: float) -> None:
    with torch.no_grad():
        for p in params:
            g = p.grad if weight_decay == 0 else p.grad + p * weight_decay
            p.sub_(g * lr)


def _linear_init(out: dict[str, torch.Tensor], prefix: str, d_in: int, d_out: int) -> None:
    """nn.Linear(d_in, d_out)'s parameters, drawn from the global RNG as its reset_parameters draws them."""
    weight = nn.init.kaiming_uniform_(torch.empty(d_out, d_in), a=math.sqrt(5))
    bound = 1 / math.sqrt(d_in) if d_in > 0 else 0
    out[prefix + "weight"], out[prefix + "bias"] = weight, nn.init.uniform_(torch.empty(d_out), -bound, bound)


def _batch_norm_init(out: dict[str, torch.Tensor], prefix: str, width: int) -> None:
    out.update({prefix + "weight": torch.ones(width), prefix + "bias": torch.zeros(width),
                prefix + "running_mean": torch.zeros(width), prefix + "running_var": torch.ones(width),
                prefix + "num_batches_tracked": torch.tensor(0, dtype=torch.long)})


def _classifier_init(d_in: int, cfg: GAPConfig, classes: int) -> dict[str, torch.Tensor]:
    """``_Classifier(d_in, cfg, classes).state_dict()`` without building the modules: the same
    draws from the global RNG, in construction order (a test checks the two agree)."""
    h, k, bn = cfg.hidden_dim, cfg.hops + 1, cfg.use_batch_norm
    out: dict[str, torch.Tensor] = {}

    def mlp(prefix: str, a: int, hidden: int, b: int, layers: int) -> None:
        dims = [a] + [hidden] * (layers - 1) + [b]
        for i, (u, v) in enumerate(zip(dims[:-1], dims[1:])):
            _linear_init(out, f"{prefix}layers.{i}.", u, v)
        if bn:
            for i in range(layers - 1):
                _batch_norm_init(out, f"{prefix}bns.{i}.", hidden)

    for i in range(k):
        mlp(f"base.{i}.", d_in, h, h, cfg.base_layers)
    width = h * k if cfg.combine == "cat" else h
    if bn:
        _batch_norm_init(out, "bn.", width)
    mlp("head.", width, h, classes, cfg.head_layers)
    return out


class ClassifierBatch:
    """The edge-level classifiers (CM) of B trials, trained together on first use.

    Trial j's classifier is initialised as ``_Classifier`` is under ``seeded(cls_rngs[j])``; its
    minibatch orders are drawn from ``cls_rngs[j]`` (as :meth:`GAP._train` draws them) and its
    dropout masks from the global-RNG state that initialisation left (what ``nn.Dropout`` would use
    in that block). Each trial keeps the checkpoint with its own best validation accuracy. Nothing
    a trial computes reads another trial's slice, so its classifier is the same in any batch.
    """

    def __init__(self, cfg: GAPConfig, device: torch.device,
                 stacks: list[list[torch.Tensor]] | Callable[[], list[list[torch.Tensor]]],
                 t: dict[str, torch.Tensor], classes: int, cls_rngs: list[torch.Generator]) -> None:
        self.cfg = cfg
        self.device = device
        # stacks: each trial's channels H_0..H_K, or a function computing them on first use
        self.stacks, self.t, self.classes, self.cls_rngs = stacks, t, classes, cls_rngs
        self.chans: list[torch.Tensor] = []
        self._lock = threading.Lock()
        self.params: dict[str, torch.Tensor] | None = None
        self.buffers: dict[str, torch.Tensor] | None = None
        self.logits: torch.Tensor | None = None

    def ensure(self) -> None:
        with self._lock:
            if self.params is None:
                # hop channel k of every trial, [B, N, h] (a channel all trials share is expanded)
                self.chans = [hk[0].expand(len(hk), -1, -1) if all(h is hk[0] for h in hk) else torch.stack(hk)
                              for hk in zip(*(self.stacks() if callable(self.stacks) else self.stacks))]
                self._train()
                self.chans, self.stacks = [], []  # the releases keep their own stacks

    # ---- training
    def _train(self) -> None:
        cfg, t, dev = self.cfg, self.t, self.device
        width = self.chans[0].size(-1)
        states, gens = [], []
        for r in self.cls_rngs:
            with seeded(r):
                states.append(_classifier_init(width, cfg, self.classes))
                if cfg.dropout > 0:
                    g = torch.Generator()
                    g.set_state(torch.random.get_rng_state())
                    gens.append(g)
        buffer_keys = ("running_mean", "running_var", "num_batches_tracked")
        p = {k: torch.stack([st[k] for st in states]).to(dev).requires_grad_()
             for k in states[0] if not k.endswith(buffer_keys)}
        s = {k: torch.stack([st[k] for st in states]).to(dev) for k in states[0] if k.endswith(buffer_keys)}
        b = len(states)
        drop = _dropout_per_trial(cfg.dropout, gens) if cfg.dropout > 0 else _no_dropout
        y, tr, va = t["y"], t["train"], t["val"]
        minibatch = cfg.batch_size is not None and cfg.batch_size < tr.numel()
        rows = torch.arange(b, device=dev).unsqueeze(1)
        plist, opt_state = list(p.values()), [{} for _ in p]
        best_acc = torch.full((b,), -1.0, device=dev)
        best = None
        step = 0
        inputs = self.chans
        x_tr = _take(inputs, slice(None), tr) if not minibatch else None
        y_tr = y[tr].expand(b, -1)
        x_va = _take(inputs, slice(None), va)
        for epoch in range(cfg.cm_epochs):
            if minibatch:
                order = torch.stack([tr[torch.randperm(tr.numel(), generator=r).to(dev)] for r in self.cls_rngs])
                batches = list(order.split(cfg.batch_size, dim=1))  # [B, size] node ids per step
                if len(batches) > 1 and batches[-1].size(1) == 1:  # as shuffled_batches: no one-row batch
                    batches[-2:] = [torch.cat(batches[-2:], dim=1)]
            else:
                batches = [None]
            for idx in batches:
                if idx is None:
                    xb, yb = x_tr, y_tr
                else:
                    xb, yb = _take(inputs, rows, idx), y[idx]
                for q in plist:
                    q.grad = None
                logits = _b_classifier(cfg, p, s, xb, True, drop)
                loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), yb.reshape(-1), reduction="none")
                loss.view(b, -1).mean(1).sum().backward()
                step += 1
                if cfg.optimizer == "adam":
                    _b_adam_step(plist, opt_state, step, cfg.learning_rate, cfg.weight_decay)
                else:
                    _b_sgd_step(plist, cfg.learning_rate, cfg.weight_decay)
            acc = self._accuracy(p, s, x_va, y[va])
            better = (acc > best_acc) if best is not None else torch.ones(b, dtype=torch.bool, device=dev)
            best_acc = torch.where(better, acc, best_acc)
            current = {**{k: v.detach() for k, v in p.items()}, **s}
            if best is None:
                best = {k: v.clone() for k, v in current.items()}
            else:
                for k, v in current.items():
                    mask = better.view(-1, *([1] * (v.dim() - 1)))
                    best[k] = torch.where(mask, v, best[k])
        if best is None:  # no epochs: the initial parameters
            best = {**{k: v.detach() for k, v in p.items()}, **s}
        self.params = {k: best[k].clone() for k in p}
        self.buffers = {k: best[k].clone() for k in s}
        with torch.no_grad():
            self.logits = _b_classifier(cfg, self.params, self.buffers, inputs, False, _no_dropout)

    @torch.no_grad()
    def _accuracy(self, p, s, x: list[torch.Tensor] | torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        b = self.chans[0].size(0)
        if y.numel() == 0:
            return torch.full((b,), float("nan"), device=self.device)
        logits = _b_classifier(self.cfg, p, s, x, False, _no_dropout)
        return (logits.argmax(-1) == y).float().mean(1)

    # ---- per-trial views
    def posteriors(self, j: int) -> torch.Tensor:
        self.ensure()
        return torch.softmax(self.logits[j], dim=-1).cpu()

    def accuracy(self, j: int) -> dict[str, float]:
        self.ensure()
        out = {}
        for split in ("train", "val", "test"):
            nodes = self.t[split]
            out[split] = (float((self.logits[j][nodes].argmax(-1) == self.t["y"][nodes]).float().mean())
                          if nodes.numel() else float("nan"))
        return out

    def state_dict(self, j: int) -> dict[str, torch.Tensor]:
        self.ensure()
        return {k: v[j].detach().cpu().clone() for k, v in {**self.params, **self.buffers}.items()}

    @torch.no_grad()
    def forward(self, j: int, stack: torch.Tensor) -> torch.Tensor:
        """Trial j's classifier (eval mode) on a stack N × h × (K+1)."""
        self.ensure()
        p = {k: v[j:j + 1] for k, v in self.params.items()}
        s = {k: v[j:j + 1].clone() for k, v in self.buffers.items()}
        chans = [stack[..., i].unsqueeze(0) for i in range(stack.size(-1))]
        return _b_classifier(self.cfg, p, s, chans, False, _no_dropout)[0]
