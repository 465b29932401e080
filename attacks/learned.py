"""A learned distinguisher for any release view: a classifier trained on releases of both worlds.

The approach of DP-Sniper and dp_auditorium: where no exact score exists, or the target's declared
model fails its check, learn one. The attack draws its own training releases of each world from the
target under audit (generators from a namespace of their own, so no trial is ever trained on),
turns each into a fixed featurisation of the view it reads, and fits a diagonal linear discriminant
on the coordinates whose two-world difference is largest on the training set. A trial's score is
that discriminant on the trial's release: higher means IN. It assumes nothing about the noise, so
it also separates releases that are identical within a world (a deterministic release).

Featurisation, by view (only what is released; never the auditor's instrumentation):
``mechanism`` every step's ``output``; ``trace`` every step's ``noisy`` sum; ``weights`` every
parameter; ``api`` the posteriors of every node queried on each world's graph.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from attacks.base import Attack
from targets import base as targets
from targets.base import Level

#: training releases per world, by view (views that train a model cost more per release)
TRAIN_PER_WORLD = {Level.MECHANISM: 48, Level.TRACE: 32, Level.WEIGHTS: 16, Level.API: 16}
#: coordinates the discriminant keeps (the largest training-set t statistics)
TOP_COORDINATES = 64
#: trial generators draw from SeedSequence([seed, index, 0x5EED]); the training releases from this
_TRAIN_NAMESPACE = 0x1EA2


def features(release: targets.Release, level: Level, pair: Any) -> np.ndarray:
    """The release's `level` view as one flat float vector."""
    view = release.view(level)
    if level == Level.MECHANISM:
        parts = [step.output for step in view]
    elif level == Level.TRACE:
        parts = [getattr(step, "noisy", step) for step in getattr(view, "steps", view)]
    elif level == Level.WEIGHTS:
        parts = [view[k] for k in sorted(view)]
    else:
        parts = [view(g) for g in (pair.g0, pair.g1)]
    return np.concatenate([torch.as_tensor(p).detach().cpu().double().reshape(-1).numpy() for p in parts])


class Discriminant:
    """A diagonal linear discriminant on the `top` coordinates that best separate two samples."""

    def __init__(self, x0: np.ndarray, x1: np.ndarray, top: int = TOP_COORDINATES) -> None:
        m0, m1 = x0.mean(0), x1.mean(0)
        var = (x0.var(0) * len(x0) + x1.var(0) * len(x1)) / (len(x0) + len(x1))
        # a floor keeps coordinates that are constant within each world (a deterministic release)
        var = var + 1e-12 + 1e-9 * float(var.mean())
        t = np.abs(m1 - m0) / np.sqrt(var)
        self.keep = np.argsort(-t, kind="stable")[:top]
        self.weight = ((m1 - m0) / var)[self.keep]
        self.centre = ((m0 + m1) / 2)[self.keep]

    def __call__(self, x: np.ndarray) -> float:
        return float((x[self.keep] - self.centre) @ self.weight)


class LearnedDistinguisher(Attack):
    """Base of the per-view learned attacks (the subclasses name the view)."""

    canary_kind: ClassVar[str] = "any"
    view: ClassVar[str] = ""
    exploits: ClassVar[tuple[str, ...]] = ("any",)

    def __init__(self) -> None:
        self.target: targets.Target | None = None
        self._model: tuple[int, Discriminant] | None = None

    def bind_target(self, target: targets.Target) -> None:
        self.target = target

    def _trained(self, pair: Any) -> Discriminant:
        if self._model is not None and self._model[0] == id(pair):
            return self._model[1]
        if self.target is None:
            raise ValueError(f"the {self.name} attack trains on the target's own releases: bind_target first")
        n = TRAIN_PER_WORLD[self.view]
        samples = []
        for bit in (0, 1):
            rngs = [torch.Generator().manual_seed(int(np.random.SeedSequence([_TRAIN_NAMESPACE, bit, j])
                                                      .generate_state(1)[0])) for j in range(n)]
            world = pair.world(bit)
            releases = self.target.fit_batch(world, rngs) if self.target.batched else \
                [self.target.fit(world, r) for r in rngs]
            samples.append(np.stack([features(r, self.view, pair) for r in releases]))
        model = Discriminant(*samples)
        self._model = (id(pair), model)
        return model

    def score(self, release: targets.Release, pair: Any, graph: Any = None) -> float:
        return self._trained(pair)(features(release, self.view, pair))


def _for_view(view: Level) -> type[LearnedDistinguisher]:
    name = f"Learned{view.capitalize() if view is not Level.API else 'API'}"
    return type(name, (LearnedDistinguisher,), {"name": f"learned-{view}", "levels": (view,), "view": view,
                                                "__module__": __name__, "__qualname__": name})


LearnedMechanism = _for_view(Level.MECHANISM)
LearnedTrace = _for_view(Level.TRACE)
LearnedWeights = _for_view(Level.WEIGHTS)
LearnedAPI = _for_view(Level.API)
