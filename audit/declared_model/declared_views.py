"""The views of a release the declared-model check reports on (:mod:`audit.declared_model.declared`): the
views an attack reads, those it leaves unread, and tensors in an unread view equal to a step's noiseless mean
(a *leak*).
"""
from __future__ import annotations

from typing import Any

import torch

from targets.base import Lazy, LazyDict, Level, Release

# ---------------------------------------------------------------------------------------------
# views
# ---------------------------------------------------------------------------------------------
def attack_levels(attack: Any) -> tuple[str, ...] | None:
    """The views an attack reads: from an attack object, a registry name, or a tuple of levels."""
    if attack is None:
        return None
    if isinstance(attack, str):
        from attacks.base import make

        attack = make(attack)
    if isinstance(attack, (tuple, list)):
        return tuple(attack)
    return tuple(attack.levels)


def unread_views(release: Release, attack: Any) -> list[str]:
    """Views `release` offers that `attack` does not read."""
    levels = attack_levels(attack) or ()
    return [lvl for lvl in release.levels if lvl not in levels]


def leaks(release: Release, means: dict[int, torch.Tensor], read: tuple[str, ...]) -> list[str]:
    """Tensors in unread ``weights`` or in ``info`` equal to a step's noiseless mean."""
    found = []
    places: list[tuple[str, Any]] = []
    if Level.WEIGHTS not in read and release.weights is not None and not isinstance(release.weights, Lazy):
        weights = release.weights
        shapes = {tuple(m.shape) for m in means.values()}
        if isinstance(weights, LazyDict) and weights.rest_shapes is not None \
                and not shapes & set(weights.rest_shapes.values()):
            weights = dict(weights.eager_items())  # no lazy entry has a mean's shape: none computed
        places += [(f"weights[{k!r}]", v) for k, v in weights.items()]
    places += [(f"info[{k!r}]", v) for k, v in (release.info or {}).items()]
    for where, value in places:
        if not isinstance(value, torch.Tensor) or value.numel() < 2:
            continue
        for k, m in means.items():
            if tuple(value.shape) == tuple(m.shape) and torch.allclose(value.detach().double().cpu(), m,
                                                                         atol=1e-6, rtol=1e-5):
                found.append(f"{where} equals the noiseless mean of mechanism step {k}")
    return found

