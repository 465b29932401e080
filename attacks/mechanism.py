"""White-box attacks on the ``mechanism`` view: the auditor knows the algorithm.

For each released step the auditor computes the step's noiseless value under both worlds,
m0 = mean(g0) and m1 = mean(g1), and scores the observed output o:

* Gaussian step (``noise_std`` given): the exact log-likelihood ratio
  log p(o | g1)/p(o | g0) = (⟨o − m0, m1 − m0⟩ − ‖m1 − m0‖²/2) / s², the Neyman–Pearson optimal
  test (its score distribution is exactly N(∓‖d‖²/2s², ‖d‖²/s²) in the two worlds).
* Row-projected Gaussian step (``row_projected``: o_u = Π(m_u + z_u)): each row that differs
  between the worlds is first scaled back by its expected pre-projection norm
  r̂_u = max(1, sqrt(‖(m0_u + m1_u)/2‖² + h·s²)) (the norm concentrates for h ≫ 1), then the
  Gaussian log-likelihood ratio above is applied to those rows.
* Step with a ``log_density`` (e.g. objective perturbation, where the released minimiser fixes
  the noise): ``log_density(g1) − log_density(g0)``, the exact log-likelihood ratio.
* Otherwise (e.g. the end of several hidden noisy steps): the projection
  ⟨o − (m0 + m1)/2, m1 − m0⟩, a valid (not necessarily optimal) statistic.

The score of a run sums over steps. Higher = world 1 (canary in). Every inner product runs over
the rows where m1 ≠ m0 only (the other rows add exact zeros).

:meth:`score_batch` scores many releases of one run: the world means (and everything derived from
them alone) are computed once per :attr:`MechanismStep.mean_key` and canary pair (cached on the attack object);
each release then goes through
the same per-trial arithmetic as :meth:`score`, so the two give identical floats.

When every step is an exact Gaussian LLR, the score's symmetric threshold is 0 whatever the noise
scale, fixed before any trial is seen: :meth:`natural_threshold_for` says so, and an estimator
may then use it and keep every trial for evaluation. The other scores are only approximately
centred, so their threshold is chosen on held-out trials.

Node canaries (``pair.node``): the canary node's own output row is left out of the score.
Node-level DP protects a node's effect on *other* nodes' rows; its own row is its own data,
absent from the neighbouring dataset, and reaches the model only through its own (clipped,
DP-SGD-protected) example (GAP: "a node's removal changes ≤ D rows"; DPDGC bounds the embedding
*excluding* the node). Scoring it would compare a row with one that does not exist.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch

from attacks.base import Attack
from targets.base import Level, MechanismStep, Release


def _cpu64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", torch.float64)


@dataclass
class _Means:
    """What a step's score needs from the two worlds' means alone (shared by steps of one mean_key)."""

    rows: torch.Tensor | None  # indices of the rows where m1 ≠ m0 (None: every entry, for outputs that are not 2-D+)
    m0: torch.Tensor  # float64, restricted to `rows`
    m1: torch.Tensor
    d: torch.Tensor
    dd: torch.Tensor  # Σ d², float64 scalar

    @functools.cached_property
    def mid(self) -> torch.Tensor:  # only the projection statistic and row rescaling read it
        return 0.5 * (self.m0 + self.m1)


def _means(step: MechanismStep, pair: Any) -> _Means:
    return _batch_means([step], pair)[0]


def shift_norm2(step: MechanismStep, pair: Any) -> float:
    """Σ d² of the step's mean shift d = mean(g1) − mean(g0), over the rows the score reads (the
    canary node's own row left out, module docstring)."""
    return float(_means(step, pair).dd)


def _batch_means(steps: list[MechanismStep], pair: Any, support: torch.Tensor | None = None) -> list[_Means]:
    """:func:`_means` of each step; with ``support`` (every step's own), the conversions and
    differences run on the steps' stacked rows (elementwise, so each step's floats are its own)."""
    if support is None:
        step = steps[0]
        support = step.support(pair.g0, pair.g1) if step.support is not None and step.mean_rows is not None else None
    if support is not None:  # only the rows where the worlds can differ (the others add exact zeros)
        m0 = _cpu64(torch.stack([s.mean_rows(pair.g0, support) for s in steps]))
        m1 = _cpu64(torch.stack([s.mean_rows(pair.g1, support) for s in steps]))
        index = support.cpu()
    else:
        m0, m1 = _cpu64(steps[0].mean(pair.g0)).unsqueeze(0), _cpu64(steps[0].mean(pair.g1)).unsqueeze(0)
        index = torch.arange(m0.shape[1]) if m0.dim() >= 3 else None
    node = pair.node
    if node is not None and index is not None:
        own = (index == int(node)).nonzero().view(-1)
        if own.numel():
            m1 = m1.clone()
            m1[:, own] = m0[:, own]  # the canary node's own row is not scored (module doc)
    d = m1 - m0
    if index is None:
        return [_Means(rows=None, m0=m0[0], m1=m1[0], d=d[0], dd=(d[0] * d[0]).sum())]
    keep = d.reshape(d.shape[0], d.shape[1], -1).abs().sum(2) > 0
    if bool(keep.all()):  # as the masked copies would be (contiguous), without copying
        dd = d * d
        return [_Means(rows=index, m0=m0[j], m1=m1[j], d=d[j], dd=dd[j].sum()) for j in range(len(d))]
    out = []
    for j in range(len(d)):
        k = keep[j]
        dj = d[j][k]
        out.append(_Means(rows=index[k], m0=m0[j][k], m1=m1[j][k], d=dj, dd=(dj * dj).sum()))
    return out


def _step_score(step: MechanismStep, means: _Means) -> float:
    """One step's contribution for one release (the per-trial arithmetic)."""
    o = _cpu64(step.output if means.rows is None else step.output[means.rows.to(step.output.device)])
    d, m0 = means.d, means.m0
    if step.noise_std and step.row_projected:
        width = step.output.shape[1]
        scale = torch.sqrt((means.mid * means.mid).sum(1, keepdim=True) + width * step.noise_std**2).clamp_min(1.0)
        # the ball projection left it alone; a projected float32 row's norm is 1 only to ~1e-7
        inside = o.norm(dim=1, keepdim=True) < 1 - 1e-5
        o = torch.where(inside, o, o * scale)
        return float(((o - m0) * d).sum() - 0.5 * means.dd) / step.noise_std**2
    if step.noise_std:
        return float(((o - m0) * d).sum() - 0.5 * means.dd) / step.noise_std**2
    return float(((o - means.mid) * d).sum())


def _scores_given_means(steps: list[MechanismStep], means: list[_Means]) -> list[float]:
    """``[_step_score(s, m) for s, m in zip(steps, means)]``; plain Gaussian steps over the same
    rows on their stacked rows (elementwise), each sum over its own contiguous slice."""
    m = means[0]
    if (len(steps) == 1 or m.rows is None or any(x.rows is not m.rows for x in means)
            or any(not s.noise_std or s.row_projected for s in steps)):
        return [_step_score(s, x) for s, x in zip(steps, means)]
    o = _cpu64(torch.stack([s.output[m.rows.to(s.output.device)] for s in steps]))
    if all(x is m for x in means):
        m0, d = m.m0, m.d
    else:
        m0, d = torch.stack([x.m0 for x in means]), torch.stack([x.d for x in means])
    prod = (o - m0) * d
    # float(Σ − dd/2) of two float64 scalars: the same IEEE operations as on 0-d tensors
    return [(float(prod[j].sum()) - 0.5 * float(x.dd)) / s.noise_std**2
            for j, (s, x) in enumerate(zip(steps, means))]


class MechanismLRT(Attack):
    name = "mechanism-lrt"
    exact_loss = True  # where every step is Gaussian or has a log-density (audit.stats.pair_epsilon checks)
    levels = (Level.MECHANISM,)

    def natural_threshold_for(self, release: Release) -> float | None:
        """0 when the score is an exact log-likelihood ratio, else None."""
        steps = release.view(Level.MECHANISM)
        exact = all(s.log_density is not None or (s.noise_std and not s.row_projected) for s in steps)
        return 0.0 if exact else None

    def score(self, release: Release, pair, graph=None) -> float:
        return self.score_batch([release], pair, graph)[0]

    def score_batch(self, releases: list[Release], pair, graph=None) -> list[float]:
        """``[self.score(r, pair, graph) for r in releases]``, with each mean_key's world means
        computed once (per pair, for the life of this attack object) and each step position
        scored across the releases together (:meth:`_step_scores`)."""
        shared = self._shared(pair)
        views = [release.view(Level.MECHANISM) for release in releases]
        out = [0.0] * len(releases)
        for k in range(max(map(len, views), default=0)):
            at = [j for j, steps in enumerate(views) if len(steps) > k]
            for j, score in zip(at, self._step_scores([views[j][k] for j in at], pair, shared)):
                out[j] += score  # steps added in their order, as a release's own loop would
        return out

    def _step_scores(self, steps: list[MechanismStep], pair, shared: dict[Any, _Means]) -> list[float]:
        """Each step's score (of one position, one per release), as :func:`_step_score` gives it.

        Steps that share their world means (a mean_key) or their support rows are scored on their
        stacked rows: elementwise arithmetic, then each step's sums over its own contiguous slice,
        so every score has the floats of the step scored alone."""
        scores: dict[int, float] = {}
        groups: dict[Any, list[int]] = {}
        supports: dict[int, torch.Tensor | None] = {}
        for i, step in enumerate(steps):
            if step.log_density is not None:  # the exact likelihood ratio, evaluated directly
                scores[i] = float(step.log_density(pair.g1)) - float(step.log_density(pair.g0))
            elif step.mean_key is not None:
                groups.setdefault(("key", step.mean_key), []).append(i)
            elif step.support is not None and step.mean_rows is not None:
                if id(step.support) not in supports:
                    supports[id(step.support)] = step.support(pair.g0, pair.g1)
                rows = supports[id(step.support)]
                groups.setdefault(("rows", id(rows)) if rows is not None else ("own", i), []).append(i)
            else:
                groups[("own", i)] = [i]
        for (kind, key), members in groups.items():
            group = [steps[i] for i in members]
            if kind == "key":
                if key not in shared:
                    shared[key] = _means(group[0], pair)
                means = [shared[key]] * len(group)
            elif kind == "rows":
                means = _batch_means(group, pair, supports[id(group[0].support)])
            else:
                means = [_means(group[0], pair)]
            for i, score in zip(members, _scores_given_means(group, means)):
                scores[i] = score
        return [scores[i] for i in range(len(steps))]

    def _shared(self, pair) -> dict[Any, _Means]:
        """The mean_key → world means cache of this pair. It lives on the attack (one per worker
        chunk) and holds the pair's graphs, so an entry is never read for other graphs."""
        caches = self.__dict__.setdefault("_pair_caches", [])
        for g0, g1, cache in caches:
            if g0 is pair.g0 and g1 is pair.g1:
                return cache
        if len(caches) >= 2:
            caches.pop(0)
        caches.append((pair.g0, pair.g1, {}))
        return caches[-1][2]
