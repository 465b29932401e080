"""G-MIA: shadow-model membership inference on graph nodes (black box, ``api`` view).

Olatunji, Nejdl & Khosla 2021 (TSTF/TSTS) and He et al. 2021 (sorted posteriors); spec
``shared/specs/gmia.md`` §2, §3, §7. The attack model is an MLP (``k → 100 → 50 → 2``, ReLU, Xavier
init, Adam, batch 32) on the *sorted* (descending) posterior vector of a node, trained on the
posteriors of a shadow model (members → 1, non-members → 0); its membership logit is the score.

Two uses:

* :class:`GMIA` — the game attack (``score(release, pair, graph)``). Trained ONCE per graph (lazily on
  the first score, cached on the instance and in a small process-wide cache keyed by the content of
  the canary pair and the attack's parameters), never on a scored trial:

  1. the shadow graph is the subgraph induced by a random ``fraction`` (½) of the nodes the auditor
     knows, the canary node excluded (drawn from the attack's seed and the pair's content);
  2. its training nodes are split in two random halves; shadow model j is the target under audit
     (same class and config) fitted on the shadow graph where half j is OUT exactly as a node
     canary's world 0 is (node isolated, in no mask: membership M3 of spec §1) and the other half IN;
     ``shadow_models`` (2) fits alternate the halves, so every shadow training node serves once as
     a member and once as a non-member;
  3. shadow posteriors are read with the same query protocol as the canary's: ``query="auto"``
     reads the released predictions on the training graph (``api(None, nodes)``), else the query
     graph is the world with every edge (for the target: ``pair.g1``; for a shadow: the shadow graph
     with all its edges); ``"g1"``/``"g0"`` force the graph with / without the OUT nodes' edges.

  ``score`` = the attack model's logit for the canary node's posterior (one API call). The target
  is found as in :mod:`attacks.lira` (``shadow_target=``, :meth:`GMIA.bind_target`, or
  the target the release carries, ``Release.target``).
  ``label_feature=True`` appends the true label's probability to the sorted vector (not in the
  paper; useful when a canary's posterior is confident in both worlds but on different labels).

* :func:`run_gmia` — the stand-alone attack in the paper's TSTF setting (spec §2): per class, ``n``
  nodes to the target's training set and the next ``n`` to the shadow's; target/shadow trained on
  the subgraphs induced by their training nodes; members queried on the training subgraph and
  non-members (an equally large random sample of the remaining nodes) on the full graph.
  Note (spec §2 pitfall): IN and OUT are queried in different graph contexts, so TSTF numbers are
  risk measurements, not audits.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.data import Data
from torch_geometric.utils import subgraph

from attacks.base import Attack
from attacks.metrics import auc as _auc
from attacks.metrics import tpr_at_fpr as _tpr_at_fpr
from attacks.shadow import ShadowModels, canary_node, count_query, query_posteriors, true_label_probability
from targets.base import GLOBAL_RNG_LOCK, Level, Release, Target, Unit

_MASKS = ("train_mask", "val_mask", "test_mask")


# ---------------------------------------------------------------------------------------------
# the attack model
# ---------------------------------------------------------------------------------------------
def attack_features(posteriors: torch.Tensor, labels: Any = None, top_k: int | None = None,
                    label_feature: bool = False) -> torch.Tensor:
    """Sorted (descending) posteriors, truncated or zero-padded to ``top_k``; optionally p_y appended."""
    p = torch.as_tensor(posteriors).double().cpu()
    s = torch.sort(p, dim=1, descending=True).values
    if top_k is not None:
        s = s[:, :top_k] if s.size(1) >= top_k else F.pad(s, (0, top_k - s.size(1)))
    if label_feature:
        if labels is None:
            raise ValueError("label_feature needs the labels")
        s = torch.cat([s, torch.as_tensor(true_label_probability(p, labels)).view(-1, 1)], 1)
    return s.float()


class AttackMLP(nn.Module):
    """``k → 100 → 50 → 2`` with ReLU and Xavier init (the paper's attack model)."""

    def __init__(self, k: int, hidden: tuple[int, ...] = (100, 50)) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = k
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 2))
        self.net = nn.Sequential(*layers)
        for m in self.net:
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    @torch.no_grad()
    def membership_logit(self, x: torch.Tensor) -> np.ndarray:
        """log P(member) − log P(non-member) per row (the score; monotone in the softmax output)."""
        self.eval()
        out = self(x)
        return (out[:, 1] - out[:, 0]).double().numpy()


def train_attack_model(x: torch.Tensor, y: torch.Tensor, *, seed: int, epochs: int = 100, lr: float = 0.01,
                       batch_size: int = 32, hidden: tuple[int, ...] = (100, 50)) -> AttackMLP:
    """Train the attack MLP with cross-entropy (Adam, mini-batches), deterministically from `seed`."""
    if x.size(0) < 2 or y.unique().numel() < 2:
        raise ValueError("the attack model needs members and non-members to train on")
    gen = torch.Generator().manual_seed(seed)
    devices: list[int] = []
    with GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=devices):  # the game may score in a thread
        torch.manual_seed(seed)
        model = AttackMLP(x.size(1), hidden)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    y = y.long()
    for _ in range(epochs):
        model.train()
        order = torch.randperm(x.size(0), generator=gen)
        for k in range(0, x.size(0), batch_size):
            idx = order[k:k + batch_size]
            opt.zero_grad()
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    model.eval()
    return model


# ---------------------------------------------------------------------------------------------
# graph helpers
# ---------------------------------------------------------------------------------------------
def induced_subgraph(graph: Data, nodes: Any, *, masks: str = "inherit") -> Data:
    """The subgraph induced by `nodes` (relabelled 0..len−1 in the given order's sorted order).

    ``masks="inherit"`` keeps the split masks; ``"train"`` makes every node a training node.
    """
    nodes = torch.as_tensor(np.sort(np.asarray(nodes)), dtype=torch.long)
    ei, _ = subgraph(nodes, graph.edge_index.cpu(), relabel_nodes=True, num_nodes=int(graph.num_nodes))
    out = Data(x=graph.x[nodes], edge_index=ei, y=graph.y[nodes])
    out.num_nodes = int(nodes.numel())
    for m in _MASKS:
        src = getattr(graph, m, None)
        if masks == "train":
            val = torch.ones(out.num_nodes, dtype=torch.bool) if m == "train_mask" else \
                torch.zeros(out.num_nodes, dtype=torch.bool)
        elif src is not None:
            val = src.cpu()[nodes].clone()
        else:
            continue
        setattr(out, m, val)
    return out


def isolate_nodes(graph: Data, nodes: Any) -> Data:
    """A copy with `nodes` isolated (edges removed) and in no mask; indexing unchanged (world 0 of a
    node canary, for many nodes at once)."""
    drop = torch.zeros(int(graph.num_nodes), dtype=torch.bool)
    drop[torch.as_tensor(np.asarray(nodes), dtype=torch.long)] = True
    out = graph.clone()
    ei = graph.edge_index
    out.edge_index = ei[:, ~(drop[ei[0]] | drop[ei[1]])]
    for m in _MASKS:
        if getattr(graph, m, None) is not None:
            setattr(out, m, getattr(graph, m) & ~drop)
    return out


def _outdeg(graph: Data) -> torch.Tensor:
    return torch.bincount(graph.edge_index[0].cpu(), minlength=int(graph.num_nodes))


def _seed(*entropy: int) -> int:
    return int(np.random.SeedSequence(list(entropy)).generate_state(1, np.uint64)[0] >> 2)


# ---------------------------------------------------------------------------------------------
# the game attack
# ---------------------------------------------------------------------------------------------
class GMIA(Attack):
    """G-MIA as a game attack on a node canary; see the module docstring.

    Args:
        shadow_models: fits of the shadow target (2; halves alternate IN/OUT).
        fraction: share of the known non-canary nodes in the shadow graph (0.5).
        epochs, lr, batch_size, hidden: the attack MLP (100, 0.01, 32, (100, 50)).
        top_k: length of the sorted posterior vector (None: the number of classes).
        label_feature: append p_y of the true label (False: the paper's label-free attack).
        query: ``auto``, ``g1`` or ``g0``.
        seed: the attack's own seed. shadow_target: a target to build the shadows with.
    """

    name = "gmia"
    levels = (Level.API,)
    units = (Unit.NODE,)
    queries_per_score = 1

    def __init__(self, shadow_models: int = 2, fraction: float = 0.5, epochs: int = 100, lr: float = 0.01,
                 batch_size: int = 32, hidden: tuple[int, ...] = (100, 50), top_k: int | None = None,
                 label_feature: bool = False, query: str = "auto", seed: int = 0,
                 shadow_target: Target | None = None) -> None:
        if not isinstance(shadow_models, int) or shadow_models < 1:
            raise ValueError(f"shadow_models must be an int >= 1, got {shadow_models!r}")
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
        if query not in ("auto", "g1", "g0"):
            raise ValueError(f"query must be 'auto', 'g1' or 'g0', got {query!r}")
        self.shadow_models, self.fraction = shadow_models, float(fraction)
        self.epochs, self.lr, self.batch_size, self.hidden = int(epochs), float(lr), int(batch_size), tuple(hidden)
        self.top_k, self.label_feature, self.query, self.seed = top_k, bool(label_feature), query, int(seed)
        self.shadow_target = shadow_target
        self._shadows = ShadowModels("gmia")
        self.queries = 0
        self.last: dict[str, Any] = {}

    def bind_target(self, target: Target) -> None:
        """Give the attack the target under audit (see :meth:`attacks.lira.LiRA.bind_target`)."""
        self._shadows.bound = target

    def _params(self) -> tuple:
        return (self.shadow_models, self.fraction, self.epochs, self.lr, self.batch_size, self.hidden, self.top_k,
                self.label_feature, self.query, self.seed)

    def attack_model(self, pair: Any, release: Release | None = None, graph: Any = None) -> dict[str, Any]:
        """Train (once) the shadow models and the attack model; returns them with diagnostics."""
        return self._shadows.trained(pair, release, self.shadow_target, self._params(),
                                     lambda target, base: self._train(target, pair, graph, base))

    def _train(self, target: Target, pair: Any, graph: Any, base: int) -> dict[str, Any]:
        z = canary_node(pair)
        known = graph if graph is not None else pair.g0
        rng = np.random.default_rng([self.seed, base, 0x6A1A])
        nodes = np.arange(int(known.num_nodes))
        nodes = nodes[nodes != z]
        size = max(2, int(round(self.fraction * nodes.size)))
        chosen = np.sort(rng.choice(nodes, size=min(size, nodes.size), replace=False))
        shadow = induced_subgraph(known, chosen)
        shadow.public_outdeg = _outdeg(shadow)
        train = shadow.train_mask.nonzero().view(-1).numpy()
        if train.size < 4:
            raise ValueError(f"the shadow graph has {train.size} training nodes; G-MIA needs at least 4")
        classes = int(max(int(known.y.max()), int(pair.g1.y.max()))) + 1
        k = self.top_k if self.top_k is not None else classes
        target.prepare(known)
        xs, ys = [], []
        halves = None
        for j in range(self.shadow_models):
            if j % 2 == 0:
                perm = rng.permutation(train)
                halves = (perm[: perm.size // 2], perm[perm.size // 2:])
            out_nodes, in_nodes = (halves[0], halves[1]) if j % 2 == 0 else (halves[1], halves[0])
            world = isolate_nodes(shadow, out_nodes)
            world.public_outdeg = shadow.public_outdeg
            rel = target.fit(world, torch.Generator().manual_seed(_seed(self.seed, base, j, 0x5AD0)))
            ask = np.concatenate([in_nodes, out_nodes])
            post = query_posteriors(rel.view(Level.API), self.query, shadow, world, ask)
            xs.append(attack_features(post, shadow.y[torch.as_tensor(ask)], k, self.label_feature))
            ys.append(torch.cat([torch.ones(in_nodes.size), torch.zeros(out_nodes.size)]))
        x, y = torch.cat(xs), torch.cat(ys)
        model = train_attack_model(x, y, seed=_seed(self.seed, base, 0xA77C), epochs=self.epochs, lr=self.lr,
                                   batch_size=self.batch_size, hidden=self.hidden)
        s = model.membership_logit(x)
        yy = y.numpy()
        return {"model": model, "top_k": k, "node": z, "shadow_nodes": chosen,
                "shadow_train_auc": _auc(s[yy == 0], s[yy == 1]), "samples": int(x.size(0))}

    def score(self, release: Release, pair: Any, graph: Any = None) -> float:
        m = self.attack_model(pair, release, graph)
        z = m["node"]
        post = query_posteriors(release.view(Level.API), self.query, pair.g1, pair.g0, [z])
        self.queries += 1
        count_query(release, 1)
        feats = attack_features(post, pair.g1.y[[z]], m["top_k"], self.label_feature)
        s = float(m["model"].membership_logit(feats)[0])
        self.last = {"posterior_top": float(feats[0, 0]), "score": s}
        return s


# ---------------------------------------------------------------------------------------------
# the stand-alone attack (TSTF)
# ---------------------------------------------------------------------------------------------
def _tstf_split(graph: Data, per_class: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    y = graph.y.cpu().numpy()
    t_train, s_train = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        t_train.append(idx[:per_class])
        s_train.append(idx[per_class:2 * per_class])
    t_train, s_train = np.sort(np.concatenate(t_train)), np.sort(np.concatenate(s_train))
    used = np.zeros(y.size, dtype=bool)
    used[t_train] = used[s_train] = True
    others = np.flatnonzero(~used)
    t_test = np.sort(rng.choice(others, size=min(t_train.size, others.size), replace=False))
    rest = np.setdiff1d(others, t_test)
    s_test = np.sort(rng.choice(rest, size=min(s_train.size, rest.size), replace=False))
    return {"target_train": t_train, "target_test": t_test, "shadow_train": s_train, "shadow_test": s_test}


def _tstf_posteriors(target: Target, graph: Data, train: np.ndarray, test: np.ndarray, seed: int,
                     drop_isolated: bool = False) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """Fit on the subgraph induced by `train`; members queried there, non-members on the full graph.
    Returns member posteriors, non-member posteriors and the member nodes (original indices)."""
    sub = induced_subgraph(graph, train, masks="train")
    if drop_isolated:
        keep = torch.bincount(sub.edge_index[0], minlength=sub.num_nodes) > 0
        train = np.sort(np.asarray(train))[keep.numpy()]
        sub = induced_subgraph(graph, train, masks="train")
    sub.public_outdeg = _outdeg(sub)
    target.prepare(sub)
    rel = target.fit(sub, torch.Generator().manual_seed(seed))
    api = rel.view(Level.API)
    members = torch.as_tensor(api(sub, torch.arange(sub.num_nodes))).detach().double().cpu()
    non_members = torch.as_tensor(api(graph, torch.as_tensor(test, dtype=torch.long))).detach().double().cpu()
    return members, non_members, np.sort(np.asarray(train))


def run_gmia(target: Target, graph: Data, *, rng: np.random.Generator | int | None = None,
             per_class: int | None = None, shadow_target: Target | None = None, epochs: int = 100,
             lr: float = 0.01, batch_size: int = 32, top_k: int | None = None,
             label_feature: bool = False, drop_isolated: bool = False) -> dict[str, Any]:
    """G-MIA in the TSTF setting (spec §2) on a fresh fit of `target`; returns the metrics.

    ``per_class`` (n per class for the target's and the shadow's training sets) defaults to
    ``min(90, max(1, ⌊n / (4C)⌋))`` (90 on Cora, the paper's). The shadow target is a fresh instance
    of the target's class and config unless given. ``rng`` (a numpy Generator or a seed) draws the
    split and the training seeds. ``drop_isolated`` removes the nodes left isolated in a training
    subgraph from it (for targets that need every degree ≥ 1, e.g. CARIBOU); they are then not members.

    Returned keys: ``auc``, ``tpr_at_fpr_1pct``, ``tpr_at_fpr_0.1pct``, ``precision``, ``recall``,
    ``accuracy`` (attack decisions at P(member) ≥ ½ on the balanced target set), ``shadow_auc``
    (the attack model on its own shadow training data), ``target_train_accuracy``,
    ``target_test_accuracy`` (the target's accuracy on its members / non-members as queried),
    ``shadow_train_accuracy``, ``shadow_test_accuracy``, ``n_members``, ``n_non_members``,
    ``per_class``, ``setting`` ("TSTF").
    """
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    y = graph.y.cpu()
    classes = int(y.max()) + 1
    if per_class is None:
        per_class = min(90, max(1, int(graph.num_nodes) // (4 * classes)))
    split = _tstf_split(graph, per_class, rng)
    shadow = shadow_target if shadow_target is not None else type(target)(target.config)
    t_seed, s_seed, a_seed = (int(v) for v in rng.integers(0, 2**62, size=3))
    s_in, s_out, s_members = _tstf_posteriors(shadow, graph, split["shadow_train"], split["shadow_test"], s_seed,
                                              drop_isolated)
    t_in, t_out, t_members = _tstf_posteriors(target, graph, split["target_train"], split["target_test"], t_seed,
                                              drop_isolated)
    k = top_k if top_k is not None else classes

    def feats(post: torch.Tensor, nodes: np.ndarray) -> torch.Tensor:
        return attack_features(post, y[torch.as_tensor(nodes)], k, label_feature)

    xs = torch.cat([feats(s_in, s_members), feats(s_out, split["shadow_test"])])
    ys = torch.cat([torch.ones(s_in.size(0)), torch.zeros(s_out.size(0))])
    model = train_attack_model(xs, ys, seed=a_seed, epochs=epochs, lr=lr, batch_size=batch_size)
    shadow_scores = model.membership_logit(xs)
    yn = ys.numpy()
    m_scores = model.membership_logit(feats(t_in, t_members))
    n_scores = model.membership_logit(feats(t_out, split["target_test"]))
    tp, fn = int((m_scores >= 0).sum()), int((m_scores < 0).sum())
    fp, tn = int((n_scores >= 0).sum()), int((n_scores < 0).sum())

    def acc(post: torch.Tensor, nodes: np.ndarray) -> float:
        return float((post.argmax(1) == y[torch.as_tensor(nodes)]).double().mean())

    return {
        "auc": _auc(n_scores, m_scores),
        "tpr_at_fpr_1pct": _tpr_at_fpr(n_scores, m_scores, 0.01),
        "tpr_at_fpr_0.1pct": _tpr_at_fpr(n_scores, m_scores, 0.001),
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "accuracy": (tp + tn) / (tp + fn + fp + tn),
        "shadow_auc": _auc(shadow_scores[yn == 0], shadow_scores[yn == 1]),
        "target_train_accuracy": acc(t_in, t_members),
        "target_test_accuracy": acc(t_out, split["target_test"]),
        "shadow_train_accuracy": acc(s_in, s_members),
        "shadow_test_accuracy": acc(s_out, split["shadow_test"]),
        "n_members": int(m_scores.size), "n_non_members": int(n_scores.size),
        "per_class": int(per_class), "setting": "TSTF",
    }
