"""What the shadow-model attacks share (LiRA/RMIA in :mod:`attacks.lira`, G-MIA in :mod:`attacks.gmia`).

* the shadow target: the target under audit, found by :func:`find_shadow_target`;
* the canary node, the query protocol (:func:`query_posteriors`) and the record of API queries
  (:func:`count_query`);
* posterior signals (:func:`logit_confidence`, :func:`true_label_probability`);
* the pair's content fingerprint (:func:`pair_fingerprint`: a cache key, and the base of every
  shadow seed) and one process-wide cache of trained shadows (:data:`SHADOWS`), so the game's
  per-chunk attack instances train them once; :class:`ShadowModels` is an attack's view of both.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from graphs.ops import fingerprint
from targets.base import Release, Target

LOG_CLIP = 1e-45


def canary_node(pair: Any) -> int:
    """The canary node's index (the same in both worlds)."""
    if pair.node is None:
        raise ValueError("this attack needs a node canary (pair.node); use remove-node or insert-node")
    return pair.node


def logit_confidence(probs: torch.Tensor | np.ndarray, labels: Any) -> np.ndarray:
    """φ = log p_y − log Σ_{y'≠y} p_{y'} per row, stable for near-certain posteriors."""
    p = torch.as_tensor(probs).double().cpu()
    y = torch.as_tensor(labels, dtype=torch.long).view(-1)
    rows = torch.arange(p.size(0))
    py = p[rows, y]
    others = p.clone()
    others[rows, y] = 0.0
    rest = others.sum(1)
    return (torch.log(py.clamp_min(LOG_CLIP)) - torch.log(rest.clamp_min(LOG_CLIP))).numpy()


def true_label_probability(probs: torch.Tensor | np.ndarray, labels: Any) -> np.ndarray:
    p = torch.as_tensor(probs).double().cpu()
    y = torch.as_tensor(labels, dtype=torch.long).view(-1)
    return p[torch.arange(p.size(0)), y].numpy()


def _seed_hash(*graphs: Any, extra: Any = ()) -> str:
    """The content hash shadow seeds have always been drawn from (node count, then each of x,
    edge_index, y and the masks by name and raw bytes, then ``repr(extra)``). Kept as it is so the
    same run seed trains the same shadows, and so scores do not move; cache keys use
    :func:`graphs.ops.fingerprint`."""
    h = hashlib.sha256()
    for g in graphs:
        h.update(str(int(g.num_nodes)).encode())
        for key in ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask"):
            t = getattr(g, key, None)
            if t is not None:
                h.update(key.encode())
                h.update(t.detach().cpu().contiguous().numpy().tobytes())
    h.update(repr(extra).encode())
    return h.hexdigest()


def pair_fingerprint(pair: Any) -> tuple[str, int]:
    """(cache key, seed base) of a node-canary pair: the content fingerprint of both worlds and the
    canary node (:func:`graphs.ops.fingerprint`), and the integer every shadow seed derives from."""
    z = canary_node(pair)
    return fingerprint(pair.g0, pair.g1, extra=z), int(_seed_hash(pair.g0, pair.g1, extra=z)[:15], 16)


def find_shadow_target(explicit: Target | None, bound: Target | None, release: Release | None) -> Target:
    """The target to train shadow models with: the attack's ``shadow_target``, else the target the
    game bound (``bind_target``), else the target the release carries (:attr:`Release.target`)."""
    if explicit is not None:
        return explicit
    if bound is not None:
        return bound
    if release is not None and isinstance(release.target, Target):
        return release.target
    raise ValueError(
        "shadow models need the target under audit: pass shadow_target=... to the attack, call "
        "attack.bind_target(target), or have the release carry it (Release.target)")


def target_key(target: Target) -> tuple:
    return (type(target).__module__, type(target).__qualname__, repr(target.config))


def query_posteriors(api: Any, query: str, g1: Any, g0: Any, nodes: Any) -> torch.Tensor:
    """Posteriors of `nodes` under the query protocol (``auto``: the released predictions on the
    training graph, else ``g1``; or ``g1``/``g0``)."""
    nodes = torch.as_tensor(nodes, dtype=torch.long).view(-1)
    if query == "auto":
        try:
            out = api(None, nodes)
        except (TypeError, AttributeError):  # the API needs a query graph
            out = api(g1, nodes)
    elif query == "g1":
        out = api(g1, nodes)
    elif query == "g0":
        out = api(g0, nodes)
    else:
        raise ValueError(f"query must be 'auto', 'g1' or 'g0', got {query!r}")
    return torch.as_tensor(out).detach().double().cpu()


def count_query(release: Release, k: int = 1) -> None:
    """Add `k` api calls to the release's record (``attack_queries``; ``fresh_releases_queried``
    where each call is a fresh noisy release)."""
    release.count("attack_queries", k)
    if release.fresh_noise_per_query:
        release.count("fresh_releases_queried", k)


class ShadowCache:
    """A small LRU of trained shadows, keyed by (attack kind, pair fingerprint, attack parameters,
    target); process-wide, so every attack instance of a run (one per chunk) shares them."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._items: OrderedDict[tuple, Any] = OrderedDict()

    def get(self, key: tuple, train: Callable[[], Any]) -> Any:
        if key not in self._items:
            self._items[key] = train()
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        self._items.move_to_end(key)
        return self._items[key]

    def __contains__(self, key: tuple) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()


#: the one shadow cache of LiRA, RMIA and G-MIA (before: one of 8 per module)
SHADOWS = ShadowCache(16)


class ShadowModels:
    """What one shadow-model attack keeps across its scores: the target the game bound
    (``bind_target``), the last pair's fingerprint, and per pair what it trained, once (the
    process-wide :data:`SHADOWS` shares it between the run's attack instances)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.bound: Target | None = None
        self._trained: dict[str, Any] = {}
        self._last_pair: tuple[int, tuple[str, int]] | None = None

    def fingerprint(self, pair: Any) -> tuple[str, int]:
        """:func:`pair_fingerprint`, remembered for the last pair object seen."""
        if self._last_pair is None or self._last_pair[0] != id(pair):
            self._last_pair = (id(pair), pair_fingerprint(pair))
        return self._last_pair[1]

    def trained(self, pair: Any, release: Release | None, explicit: Target | None, params: tuple,
                train: Callable[[Target, int], Any]) -> Any:
        """``train(shadow target, seed base)`` for `pair`, run once per pair, attack parameters and
        target (the shadow target as :func:`find_shadow_target` finds it from `explicit`)."""
        fp, base = self.fingerprint(pair)
        if fp not in self._trained:
            target = find_shadow_target(explicit, self.bound, release)
            key = (self.kind, fp, params, target_key(target))
            self._trained[fp] = SHADOWS.get(key, lambda: train(target, base))
        return self._trained[fp]
