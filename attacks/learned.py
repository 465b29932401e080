"""A learned distinguisher for any release view: a classifier trained on releases of both worlds.

The approach of DP-Sniper and dp_auditorium: where no exact score exists (the api and weights
views), or the target's declared model fails its check, learn one. The attack draws its own
training releases of each world from the target under audit and fits a diagonal linear discriminant
on them; a trial's score is that discriminant on the trial's release (higher means IN). It assumes
nothing about the noise, so it also separates releases that are identical within a world.

What it reads, by view (only what is released, and only what the canary can move):
``api`` the posteriors of the canary's endpoints (or node) and their neighbours in either world,
queried on each world's graph; ``mechanism`` the rows of each step where the two worlds' means
differ (the step's ``support`` where it declares one, else the rows where ``mean(g0) != mean(g1)``
on a training release); ``trace`` every step's noisy sum and ``weights`` every parameter (a canary
can move all of them).

Training, frozen before any trial is scored:

* releases are drawn from generators ``SeedSequence([run seed, bit, j, 0x1EA2])``: a function of
  the run's seed (:meth:`LearnedDistinguisher.bind_run`), and disjoint from both trial streams,
  whose generators are ``SeedSequence([stream seed, index, 0x5EED])`` (three words, not four);
* the number of releases per world follows a learning curve on training releases alone
  (:func:`learning_curve`): doubling from :data:`FIRST_ROUND`, each size scored by two-fold
  cross-validation, stopping once the curve shows a signal and a doubling no longer raises it by a
  standard error, else at :data:`MOST_PER_WORLD`;
* what the budget charges for it (:meth:`LearnedDistinguisher.pair_units`) is the most it may draw,
  ``2 × MOST_PER_WORLD`` fits of the view, once per pair.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from attacks.base import DrawsOwnReleases
from attacks.metrics import auc
from targets import base as targets
from targets.base import Level

#: the most training releases per world, by view (views that train a model cost more per release)
MOST_PER_WORLD = {Level.MECHANISM: 64, Level.TRACE: 32, Level.WEIGHTS: 16, Level.API: 16}
#: the learning curve's first size per world (then doubled)
FIRST_ROUND = 8
#: coordinates the discriminant keeps (the largest training-set t statistics)
TOP_COORDINATES = 64
#: the most api nodes queried (the canary's endpoints first, then their neighbours by id)
API_NODES = 32
#: trial generators draw from SeedSequence([seed, index, 0x5EED]); the training releases from this
_TRAIN_NAMESPACE = 0x1EA2
#: trained models kept in this process, so a pilot and the certification of one pair share one
_MODELS: list[tuple[tuple[Any, ...], Any, "Discriminant", dict[str, Any]]] = []
_MODELS_MAX = 8


def canary_nodes(pair: Any) -> list[int]:
    """The canary's endpoints (or node), then their neighbours in either world, at most API_NODES."""
    ends = list(pair.edge) if pair.edge is not None else [pair.node] if pair.node is not None else []
    near: set[int] = set()
    for g in (pair.g0, pair.g1):
        ei = g.edge_index
        for e in ends:
            near.update(int(v) for v in ei[1][ei[0] == e].tolist())
    n = min(int(pair.g0.num_nodes), int(pair.g1.num_nodes))
    ordered = ends + sorted(near - set(ends))
    return [v for v in ordered if v < n][:API_NODES]


def _flat(parts: list[Any]) -> np.ndarray:
    return np.concatenate([torch.as_tensor(p).detach().cpu().double().reshape(-1).numpy() for p in parts])


def _moved_rows(step: targets.MechanismStep, pair: Any) -> torch.Tensor | None:
    """Rows of a 2-D+ step the canary can move (None: every entry)."""
    out = step.output
    if out.dim() < 2:
        return None
    rows = step.support(pair.g0, pair.g1) if step.support is not None else None
    if rows is None:
        m0, m1 = step.mean(pair.g0), step.mean(pair.g1)
        rows = (m0 != m1).reshape(m0.shape[0], -1).any(1).nonzero().view(-1)
    return rows.cpu() if rows.numel() else None


def features(release: targets.Release, level: Level, pair: Any, rows: list[Any] | None = None) -> np.ndarray:
    """The release's `level` view as one flat float vector, restricted as the module says. `rows`:
    the mechanism steps' moved rows, found once per pair (:func:`_moved_rows`)."""
    view = release.view(level)
    if level == Level.MECHANISM:
        rows = rows or [None] * len(view)
        parts = [s.output if r is None else s.output[r] for s, r in zip(view, rows)]
    elif level == Level.TRACE:
        parts = [getattr(step, "noisy", step) for step in getattr(view, "steps", view)]
    elif level == Level.WEIGHTS:
        parts = [view[k] for k in sorted(view)]
    else:
        nodes = torch.tensor(canary_nodes(pair), dtype=torch.long)
        parts = [view(g, nodes) for g in (pair.g0, pair.g1)]
    return _flat(parts)


class Discriminant:
    """A diagonal linear discriminant on the `top` coordinates that best separate two samples, its
    variances shrunk a tenth of the way to their mean (a floor for coordinates constant in a world)."""

    def __init__(self, x0: np.ndarray, x1: np.ndarray, top: int = TOP_COORDINATES) -> None:
        m0, m1 = x0.mean(0), x1.mean(0)
        var = (x0.var(0) * len(x0) + x1.var(0) * len(x1)) / (len(x0) + len(x1))
        var = 0.9 * var + 0.1 * float(var.mean()) + 1e-12
        t = np.abs(m1 - m0) / np.sqrt(var)
        self.keep = np.argsort(-t, kind="stable")[:top]
        self.weight = ((m1 - m0) / var)[self.keep]
        self.centre = ((m0 + m1) / 2)[self.keep]

    def __call__(self, x: np.ndarray) -> float:
        return float((x[self.keep] - self.centre) @ self.weight)


def cross_validated_auc(x0: np.ndarray, x1: np.ndarray) -> tuple[float, float]:
    """Two-fold cross-validated AUC of the discriminant (each half scored by a fit on the other),
    and its standard error under no signal, √((n0 + n1 + 1) / (12 n0 n1))."""
    h0, h1 = len(x0) // 2, len(x1) // 2
    s0, s1 = [], []
    for (f0, f1), (e0, e1) in (((x0[:h0], x1[:h1]), (x0[h0:], x1[h1:])), ((x0[h0:], x1[h1:]), (x0[:h0], x1[:h1]))):
        d = Discriminant(f0, f1)
        s0 += [d(v) for v in e0]
        s1 += [d(v) for v in e1]
    n0, n1 = len(s0), len(s1)
    return auc(s0, s1), float(np.sqrt((n0 + n1 + 1) / (12 * n0 * n1)))


def learning_curve(draw: Any, most: int) -> tuple[np.ndarray, np.ndarray, list[dict[str, float]]]:
    """Training samples of both worlds, grown by doubling from FIRST_ROUND per world up to `most`,
    until the curve has found a signal (cross-validated AUC above ½ by two standard errors) and a
    doubling no longer raises it by one; `draw(bit, start, stop)` gives the feature rows of releases
    start..stop-1 of world `bit`. Returns the samples and the curve."""
    n = min(FIRST_ROUND, most)
    x0, x1 = draw(0, 0, n), draw(1, 0, n)
    curve = [dict(zip(("per_world", "cv_auc", "se"), (n, *cross_validated_auc(x0, x1))))]
    while n < most:
        m = min(2 * n, most)
        x0, x1 = np.vstack([x0, draw(0, n, m)]), np.vstack([x1, draw(1, n, m)])
        n = m
        a, se = cross_validated_auc(x0, x1)
        found, gain = a - 0.5 > 2 * se, a - curve[-1]["cv_auc"]
        curve.append({"per_world": n, "cv_auc": a, "se": se})
        if found and gain <= se:
            break
    return x0, x1, curve


class LearnedDistinguisher(DrawsOwnReleases):
    """Base of the per-view learned attacks (the subclasses name the view)."""

    canary_kind: ClassVar[str] = "any"
    view: ClassVar[str] = ""
    exploits: ClassVar[tuple[str, ...]] = ("any",)

    @classmethod
    def pair_units(cls, target: Any, level: Level) -> float:
        """Work units of the training, charged once per pair: the most fits the curve may draw."""
        return 2 * MOST_PER_WORLD[Level(level)] * float(target.trial_cost(level))

    def _rngs(self, bit: int, start: int, stop: int) -> list[torch.Generator]:
        return [torch.Generator().manual_seed(int(np.random.SeedSequence([self.run_seed, bit, j, _TRAIN_NAMESPACE])
                                                  .generate_state(2, np.uint64)[0] >> 1)) for j in range(start, stop)]

    def trained(self, pair: Any) -> tuple[Discriminant, dict[str, Any]]:
        """The discriminant of this pair and its training record, trained once per process."""
        if self.target is None or self.run_seed is None:
            raise ValueError(f"the {self.name} attack trains on the target's own releases: bind_target and "
                             "bind_run first (the game does both)")
        key = (self.view, self.run_seed, type(self.target).__qualname__, repr(self.target.config))
        for k, p, model, record in _MODELS:
            if k == key and p is pair:
                return model, record
        rows: list[Any] = []

        def draw(bit: int, start: int, stop: int) -> np.ndarray:
            world, rngs = pair.world(bit), self._rngs(bit, start, stop)
            releases = self.target.fit_batch(world, rngs) if self.target.batched else \
                [self.target.fit(world, r) for r in rngs]
            if self.view == Level.MECHANISM and not rows:
                rows.extend(_moved_rows(s, pair) for s in releases[0].view(Level.MECHANISM))
            return np.stack([features(r, self.view, pair, rows) for r in releases])

        x0, x1, curve = learning_curve(draw, MOST_PER_WORLD[self.view])
        model = Discriminant(x0, x1)
        record = {"per_world": len(x0), "features": int(x0.shape[1]), "curve": curve, "rows": rows}
        _MODELS.append((key, pair, model, record))
        del _MODELS[:-_MODELS_MAX]
        return model, record

    def score(self, release: targets.Release, pair: Any, graph: Any = None) -> float:
        model, record = self.trained(pair)
        return model(features(release, self.view, pair, record["rows"]))


def _for_view(view: Level) -> type[LearnedDistinguisher]:
    name = f"Learned{view.capitalize() if view is not Level.API else 'API'}"
    return type(name, (LearnedDistinguisher,), {"name": f"learned-{view}", "levels": (view,), "view": view,
                                                "__module__": __name__, "__qualname__": name})


LearnedMechanism = _for_view(Level.MECHANISM)
LearnedTrace = _for_view(Level.TRACE)
LearnedWeights = _for_view(Level.WEIGHTS)
LearnedAPI = _for_view(Level.API)
