"""CARIBOU's message passing (Â, the Contractive Graph Layer, projection, degree bound) and its
modules (GAP's encoder and two-channel classification module, the best-validation trainer)."""
from __future__ import annotations

import copy
import hashlib
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.data import Data

from graphs.ops import degrees


# ---------------------------------------------------------------------------------------------
# message passing
# ---------------------------------------------------------------------------------------------
_OPERATORS: list[tuple[torch.Tensor, int, torch.device, torch.Tensor]] = []


def gcn_operator(graph: Data, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Â = D̃^{-1/2}(A + I)D̃^{-1/2} (D̃ = deg + 1) as a sparse CSR n × n matrix on `device`.

    Cached per ``edge_index`` tensor (the cache holds it, so its id is never reused) for the few
    graphs a worker uses.
    """
    ei = graph.edge_index
    for cached, n, dev, op in _OPERATORS:
        if cached is ei and n == graph.num_nodes and dev == device and op.dtype == dtype:
            return op
    n = int(graph.num_nodes)
    src, dst = ei
    deg = degrees(graph).to(dtype) + 1.0
    inv_sqrt = deg.rsqrt()
    loops = torch.arange(n)
    rows = torch.cat([dst, loops])
    cols = torch.cat([src, loops])
    vals = torch.cat([inv_sqrt[src] * inv_sqrt[dst], 1.0 / deg])
    coo = torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, (n, n), check_invariants=False).coalesce()
    crow = torch._convert_indices_from_coo_to_csr(coo.indices()[0], n)
    op = torch.sparse_csr_tensor(crow, coo.indices()[1], coo.values(), (n, n), check_invariants=False).to(device)
    if len(_OPERATORS) >= 4:
        _OPERATORS.pop(0)
    _OPERATORS.append((ei, n, device, op))
    return op


def gcn_propagate(graph: Data, x: torch.Tensor) -> torch.Tensor:
    """Â X with Â = D̃^{-1/2}(A + I)D̃^{-1/2}, D̃ = deg + 1 (a sparse CSR product).

    `x` is n × h, or n × B × h for B trials at once (on CUDA propagated as one n × (B·h) product;
    each output entry sums its row's nonzeros in the same order whatever the width, so every
    trial's columns get the floats they would get alone).
    """
    shape = x.shape
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        op = gcn_operator(graph, x.device, x.dtype)
        if x.dim() == 3 and x.device.type == "cpu":
            # on CPU one trial at a time: an n × h operand stays in cache (a wide one does not)
            return torch.stack([op @ x[:, j] for j in range(shape[1])], 1)
        out = op @ x.reshape(shape[0], -1)
    return out.reshape(shape)


def cgl(graph: Data, x: torch.Tensor, x0: torch.Tensor, contraction: float, alpha1: float, beta: float) -> torch.Tensor:
    """Contractive Graph Layer, Eq. 4. Batched: `x` n × B × h and `x0` n × 1 × h."""
    # C·(α1·ÂX + (1−α1)·mean) + β·X⁽⁰⁾, in place on ÂX (the same floating-point operations per entry)
    out = gcn_propagate(graph, x)
    if x.dim() == 3:  # per trial: a column mean's float summation order depends on the row width
        mean = torch.stack([x[:, j].mean(dim=0) for j in range(x.shape[1])]).unsqueeze(0)
    else:
        mean = x.mean(dim=0, keepdim=True)
    out.mul_(alpha1).add_((1 - alpha1) * mean)
    return out.mul_(contraction).add_(beta * x0)


_FINGERPRINTS: list[tuple[tuple[torch.Tensor, ...], str]] = []


def feature_fingerprint(graph: Data) -> str:
    """Content hash of what the edge-level encoder sees (features, labels, training mask).

    Remembered for the last few (x, y, train_mask) tensor objects (held, so their ids are never
    reused; graphs are values and are not modified in place).
    """
    tensors = (graph.x, graph.y, graph.train_mask)
    for held, digest in _FINGERPRINTS:
        if all(a is b for a, b in zip(held, tensors)):
            return digest
    h = hashlib.blake2b(digest_size=16)
    for t in tensors:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    digest = h.hexdigest()
    if len(_FINGERPRINTS) >= 8:
        _FINGERPRINTS.pop(0)
    _FINGERPRINTS.append((tensors, digest))
    return digest


def project(x: torch.Tensor, kind: str, inplace: bool = False) -> torch.Tensor:
    """Each row (last dimension) to the unit ball, or to the unit sphere."""
    norms = x.norm(dim=-1, keepdim=True).clamp_min(1e-12 if kind == "sphere" else 1.0)
    return x.div_(norms) if inplace else x / norms


def bound_degree(graph: Data, max_degree: int, rng: torch.Generator) -> Data:
    """Keep each undirected edge, in random order, while both endpoints have fewer than D_max kept."""
    ei = graph.edge_index
    und = ei[:, ei[0] < ei[1]]
    order = torch.randperm(und.size(1), generator=rng)
    count = np.zeros(graph.num_nodes, dtype=np.int64)
    keep = []
    for j in order.tolist():
        u, v = int(und[0, j]), int(und[1, j])
        if count[u] < max_degree and count[v] < max_degree:
            count[u] += 1
            count[v] += 1
            keep.append(j)
    kept = und[:, sorted(keep)]
    out = graph.clone()
    out.edge_index = torch.cat([kept, kept.flip(0)], 1)
    from torch_geometric.utils import coalesce

    out.edge_index = coalesce(out.edge_index, num_nodes=graph.num_nodes)
    return out


# ---------------------------------------------------------------------------------------------
# modules
# ---------------------------------------------------------------------------------------------
def _dropout(x: torch.Tensor, p: float, module: nn.Module) -> torch.Tensor:
    """Inverted dropout drawing from ``module.gen`` (a generator set for the training loop), so a
    fit is determined by its own generator and never touches torch's global stream."""
    if not module.training or p <= 0:
        return x
    keep = torch.rand(x.shape, generator=module.gen, device=x.device if module.gen is None else module.gen.device)
    return x * (keep.to(x.device) >= p).to(x.dtype) / (1 - p)


class Encoder(nn.Module):
    """GAP's encoder (``core/classifiers/encoder.py``): ``Linear → BN → SELU → dropout → Linear``,
    its output row-normalised (that is X⁽⁰⁾), then ``BN → SELU → dropout → Linear`` head.

    The embedding is the *linear* output of the second layer, normalised (GAP's ``predict``), not
    a post-activation (which would confine X⁽⁰⁾ to one orthant-like region of the sphere).
    """

    def __init__(self, features: int, hidden: int, classes: int, batch_norm: bool, dropout: float = 0.0) -> None:
        super().__init__()
        norm = (lambda: nn.BatchNorm1d(hidden)) if batch_norm else nn.Identity
        self.lin1, self.bn1, self.lin2 = nn.Linear(features, hidden), norm(), nn.Linear(hidden, hidden)
        self.bn2, self.out = norm(), nn.Linear(hidden, classes)
        self.dropout = dropout
        self.gen: torch.Generator | None = None

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The row-normalised hidden embedding (X⁽⁰⁾ in eval mode)."""
        return F.normalize(self.lin2(_dropout(F.selu(self.bn1(self.lin1(x))), self.dropout, self)), dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(_dropout(F.selu(self.bn2(self.embed(x))), self.dropout, self))


class ClassificationModule(nn.Module):
    """GAP's multi-input MLP (``core/classifiers/multi_mlp.py``) with two channels (X⁽⁰⁾, X⁽ᴷ⁾):
    a 1-layer (linear) base per channel, concatenated, row-normalised, ``BN → SELU → dropout →
    Linear`` head.

    ``x0_dropout``: during training only, the X⁽⁰⁾ channel of each training node is zeroed with
    this probability (inverted-dropout scaling). The encoder was fitted on the very training nodes
    the CM is fitted on, so X⁽⁰⁾ separates them perfectly and a CM trained on both channels ignores
    X⁽ᴷ⁾ (stacking leakage: on Cora 10/10/20, noiseless, 72% with both channels against 85% from
    X⁽ᴷ⁾ alone). The paper does not say how it avoids this; the value is chosen on validation.
    """

    def __init__(self, hidden: int, classes: int, batch_norm: bool, dropout: float = 0.0,
                 x0_dropout: float = 0.0) -> None:
        super().__init__()
        self.base0 = nn.Linear(hidden, hidden)
        self.basek = nn.Linear(hidden, hidden)
        self.bn = nn.BatchNorm1d(2 * hidden) if batch_norm else nn.Identity()
        self.out = nn.Linear(2 * hidden, classes)
        self.dropout, self.x0_dropout = dropout, x0_dropout
        self.gen: torch.Generator | None = None

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = z.shape[-1] // 2
        z0, zk = z[..., :h], z[..., h:]
        if self.training and self.x0_dropout > 0:  # one Bernoulli per row: the whole channel
            z0 = _dropout(z0[..., :1].new_ones(z0.shape[:-1] + (1,)), self.x0_dropout, self) * z0
        hidden = F.normalize(torch.cat([self.base0(z0), self.basek(zk)], dim=-1), dim=-1)
        return self.out(_dropout(F.selu(self.bn(hidden)), self.dropout, self))


def _fit_best_val(model: nn.Module, inputs: torch.Tensor, graph: Data, epochs: int, opt: torch.optim.Optimizer,
                  gen: torch.Generator) -> float:
    """Full-batch cross-entropy on ``graph.train_mask``, restoring the parameters of the epoch with
    the best validation accuracy (the first such epoch; GAP's trainer with ``checkpoint=True``).
    Dropout draws from `gen`. Returns that validation accuracy (0 without validation nodes)."""
    y = graph.y.to(inputs.device)
    train, val = graph.train_mask.to(inputs.device), graph.val_mask.to(inputs.device)
    model.gen = gen
    best, best_state = -1.0, None
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(inputs[train]), y[train]).backward()
        opt.step()
        if val.any():
            model.eval()
            with torch.no_grad():
                acc = float((model(inputs[val]).argmax(1) == y[val]).float().mean())
            if acc > best:
                best, best_state = acc, copy.deepcopy(model.state_dict())
    if best_state is not None:
        model.load_state_dict(best_state)
    model.gen = None
    model.eval()
    return max(best, 0.0)
