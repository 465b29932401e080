"""A likelihood ratio under the noise law measured on the target's own releases (``measured-law``,
mechanism view).

The declared-model check (:mod:`audit.declared_model.declared`) can find that a target's noise is not what it
declares (shared across steps or rows, missing from some entries, of another scale); a score that
trusts the declaration then reads the wrong law. This one trusts nothing declared about the noise.
It draws releases of each world from the target, from generators
``SeedSequence([run seed, bit, j, 0x3EA5])``: a function of the run's seed (:meth:`MeasuredLawLRT.bind_run`)
in a namespace of its own, apart from both trial streams (``[stream seed, index, 0x5EED]``, three words)
and from the learned distinguisher's training releases (``0x1EA2``), so no trial, pilot or
certification, is ever fitted on. It measures:

* the entries it reads: per step, the rows the canary moves most (by the declared means), a few
  rows it does not move, and every column's sum over all rows; all steps together, so that noise
  shared across steps or rows shows in their covariance;
* each world's mean, and the pooled within-world residuals (each release minus its world's mean);
* what is exactly noise-free: entries constant over a world's releases, and combinations of
  entries whose pooled residuals are exactly 0, the latter looked for only where there are at least
  twice as many residuals as entries (with fewer, a null direction of the sample covariance is one
  of sampling, not of the law, and it is shrunk, never inverted);
* the covariance of the rest, Ledoit–Wolf shrunk toward a multiple of the identity (Ledoit and
  Wolf 2004, "A well-conditioned estimator for large-dimensional covariance matrices", eq. 14).

A release's score is then ``BIG·(matches world 1's noise-free constraints − matches world 0's)``
over the constraints that tell the worlds apart, plus the Gaussian log-likelihood ratio
``(Σ̂⁻¹ d)·(x − (μ₀ + μ₁)/2)`` with ``d = μ₁ − μ₀`` on the noisy rest: a deterministic distinguisher
where the noise leaves a direction the canary moves, the whitened ratio of the measured law
elsewhere. Everything is fitted once per pair and frozen; the certificate's estimator (cp or fdp)
assumes nothing of the score, so a misfit costs power, never validity.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from attacks.base import DrawsOwnReleases
from targets import base as targets
from targets.base import Level

#: fit releases per world: at least twice the entries read (so exact null directions can be told
#: from sampling ones), within these bounds
N_FIT_MIN, N_FIT_MAX = 64, 512
#: rows read per step: the ones the canary moves most, and others as a reference for shared noise
MOVED_ROWS, OTHER_ROWS = 4, 2
#: the weight of one noise-free constraint against the log-likelihood ratio
BIG = 1e6
#: a singular value this small beside the largest is an exact 0 of the residuals (float64 rounding)
NULL_REL = 1e-7
_FIT_NAMESPACE = 0x3EA5


def fit_count(p: int) -> int:
    """Fit releases per world for p entries read: twice the entries and some, within the bounds."""
    return int(min(N_FIT_MAX, max(N_FIT_MIN, 2 * p + 8)))


def _rows(t: torch.Tensor) -> np.ndarray:
    a = t.detach().to("cpu", torch.float64).numpy()
    return a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(1, -1)


class Layout:
    """Which entries of each step are read: (rows, with column sums) per step, from the declared
    means of the two worlds (the mean map only chooses entries; the law is measured)."""

    def __init__(self, steps: list[Any], pair: Any) -> None:
        self.rows: list[np.ndarray] = []
        means: list[tuple[np.ndarray, np.ndarray]] = []
        for step in steps:
            m0, m1 = _rows(step.mean(pair.g0)), _rows(step.mean(pair.g1))
            means.append((m0, m1))
            if m0.shape != m1.shape:  # a node canary that changes the row count: read the column sums
                self.rows.append(np.zeros(0, np.int64))
                continue
            change = np.linalg.norm(m1 - m0, axis=1)
            moved = np.argsort(-change, kind="stable")[:MOVED_ROWS]
            moved = moved[change[moved] > 0]
            still = np.setdiff1d(np.arange(m0.shape[0]), moved)
            others = still[np.linspace(0, len(still) - 1, min(OTHER_ROWS, len(still))).astype(np.int64)] \
                if len(still) else still
            self.rows.append(np.concatenate([moved, others]))
        #: the declared means' difference on the entries read (None where the row counts differ)
        self.shift = None if any(m0.shape != m1.shape for m0, m1 in means) else \
            self._read([m1 for _, m1 in means]) - self._read([m0 for m0, _ in means])

    def _read(self, outputs: list[np.ndarray]) -> np.ndarray:
        parts = []
        for o, rows in zip(outputs, self.rows):
            parts += [o[rows].ravel(), o.sum(0)]
        return np.concatenate(parts)

    def features(self, release: targets.Release) -> np.ndarray:
        return self._read([_rows(step.output) for step in release.view(Level.MECHANISM)])


def ledoit_wolf(R: np.ndarray) -> np.ndarray:
    """The Ledoit–Wolf shrunk covariance of centred residuals R (n × p), shrunk on the correlation
    scale (each entry standardised first, so entries of very different scales, a column sum beside a
    row, do not set one another's shrinkage)."""
    scale = np.sqrt((R * R).mean(0))
    scale[scale == 0] = 1.0
    return scale[:, None] * _ledoit_wolf(R / scale) * scale[None, :]


def _ledoit_wolf(R: np.ndarray) -> np.ndarray:
    n, p = R.shape
    S = R.T @ R / n
    m = np.trace(S) / p
    d2 = float(((S - m * np.eye(p)) ** 2).sum())
    if d2 <= 0:
        return S
    sq = (R * R).sum(1)
    # Σ_k ‖r_k r_kᵀ − S‖_F² = Σ_k (‖r_k‖⁴ − 2 r_kᵀ S r_k) + n‖S‖_F²
    b2 = float((sq**2).sum() - 2 * ((R @ S) * R).sum() + n * (S * S).sum()) / n**2
    shrink = min(b2, d2) / d2
    return shrink * m * np.eye(p) + (1 - shrink) * S


class Constraint:
    """A noise-free linear constraint of world b: ``‖P(x − c)‖ ≤ tol``."""

    def __init__(self, P: np.ndarray, c: np.ndarray, spread: float) -> None:
        self.P, self.c = P, c
        self.tol = 10 * spread + 1e-9 * (1 + float(np.abs(P @ c).max(initial=0.0)))

    def holds(self, X: np.ndarray) -> np.ndarray:
        return np.abs((X - self.c) @ self.P.T).max(1, initial=0.0) <= self.tol


class MeasuredLaw:
    """The frozen model fitted on fit releases x0, x1 (n × p each) of worlds 0 and 1."""

    def __init__(self, x0: np.ndarray, x1: np.ndarray, shift: np.ndarray | None = None) -> None:
        mu = [x0.mean(0), x1.mean(0)]
        # the direction: the declared means' difference where declared (the measured one is mostly noise
        # where the canary moves an entry by less than its std), the measured one otherwise
        d = shift if shift is not None and np.abs(shift).max(initial=0.0) > 0 else mu[1] - mu[0]
        p = x0.shape[1]
        const = [np.ptp(x, 0) <= 4 * np.finfo(np.float32).eps * np.abs(x[0]) for x in (x0, x1)]
        free = ~(const[0] | const[1])
        self.constraints: list[tuple[int, Constraint]] = []
        for b, x in enumerate((x0, x1)):
            idx = np.flatnonzero(const[b])
            if idx.size:
                P = np.eye(p)[idx]
                self._keep(b, Constraint(P, x[0], float(np.ptp(x[:, idx], 0).max())), (x0, x1))
        R = np.vstack([x0 - mu[0], x1 - mu[1]])[:, free]
        Q = np.eye(int(free.sum()))
        if R.shape[1] and R.shape[0] - 2 >= 2 * R.shape[1]:
            _, s, vt = np.linalg.svd(R, full_matrices=False)
            null = s <= NULL_REL * s[0] if s[0] > 0 else np.ones_like(s, bool)
            if null.any():
                E = np.zeros((int(null.sum()), p))
                E[:, free] = vt[null]
                for b, x in enumerate((x0, x1)):
                    self._keep(b, Constraint(E, mu[b], float(np.abs((x - mu[b]) @ E.T).max())), (x0, x1))
                Q = vt[~null].T
        self.free, self.Q = free, Q
        self.mid = (mu[0] + mu[1]) / 2
        if Q.shape[1]:
            sigma = ledoit_wolf(R @ Q)
            self.w = Q @ np.linalg.solve(sigma, Q.T @ d[free])
        else:
            self.w = np.zeros(int(free.sum()))

    def _keep(self, b: int, c: Constraint, xs: tuple[np.ndarray, np.ndarray]) -> None:
        """Keep world b's constraint where the other world's fit releases break it."""
        if not c.holds(xs[1 - b]).all():
            self.constraints.append((b, c))

    def scores(self, X: np.ndarray) -> np.ndarray:
        exact = np.zeros(len(X))
        for b, c in self.constraints:
            exact += (1 if b == 1 else -1) * c.holds(X)
        return BIG * exact + (X[:, self.free] - self.mid[self.free]) @ self.w


class MeasuredLawLRT(DrawsOwnReleases):
    name = "measured-law"
    levels = (Level.MECHANISM,)
    exploits = ("any",)
    exploit_rank = 0
    after_deviation = True

    def __init__(self) -> None:
        super().__init__()
        self._fitted: tuple[int, Layout, MeasuredLaw] | None = None

    @classmethod
    def pair_units(cls, target: Any, level: Level) -> float:
        """The fit's work units, charged once per pair: 2 × :data:`N_FIT_MAX` fits of the view (the
        most :func:`fit_count` draws; :meth:`pair_units_on` counts them on a release)."""
        return 2 * N_FIT_MAX * float(target.trial_cost(level))

    @classmethod
    def pair_units_on(cls, target: Any, level: Level, release: targets.Release | None) -> float:
        """The fit's work units on a release of the target's shape: 2 × :func:`fit_count` of the most
        entries a :class:`Layout` reads there (every step's read rows and column sums) fits of the view."""
        if release is None or not release.mechanism:
            return cls.pair_units(target, level)
        p = 0
        for step in release.view(Level.MECHANISM):
            out = _rows(step.output)
            p += min(MOVED_ROWS + OTHER_ROWS, out.shape[0]) * out.shape[1] + out.shape[1]
        return 2 * fit_count(p) * float(target.trial_cost(level))

    def applies_to(self, release: targets.Release, graph: Any = None) -> bool:
        return bool(release.mechanism)

    def fit_releases(self, pair: Any, bit: int, n: int) -> list[targets.Release]:
        """n releases of world `bit` from generators of the run's seed that no trial uses."""
        if self.target is None or self.run_seed is None:
            raise ValueError("the measured-law attack measures the target's own releases: bind_target and "
                             "bind_run first (the game does both)")
        rngs = [torch.Generator().manual_seed(int(np.random.SeedSequence([self.run_seed, bit, j, _FIT_NAMESPACE])
                                                  .generate_state(2, np.uint64)[0] >> 1)) for j in range(n)]
        world = pair.world(bit)
        return self.target.fit_batch(world, rngs) if self.target.batched else [self.target.fit(world, r) for r in rngs]

    def model(self, release: targets.Release, pair: Any) -> tuple[Layout, MeasuredLaw]:
        if self._fitted is None or self._fitted[0] != id(pair):
            layout = Layout(release.view(Level.MECHANISM), pair)
            p = layout.features(release).size
            n = fit_count(p)
            x = [np.stack([layout.features(r) for r in self.fit_releases(pair, b, n)]) for b in (0, 1)]
            self._fitted = (id(pair), layout, MeasuredLaw(*x, shift=layout.shift))
        return self._fitted[1], self._fitted[2]

    def score(self, release: targets.Release, pair: Any, graph: Any = None) -> float:
        return self.score_batch([release], pair, graph)[0]

    def score_batch(self, releases: list[targets.Release], pair: Any, graph: Any = None) -> list[float]:
        layout, law = self.model(releases[0], pair)
        return [float(s) for s in law.scores(np.stack([layout.features(r) for r in releases]))]
