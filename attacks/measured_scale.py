"""The declared Gaussian likelihood ratio at the measured noise scale (``measured-scale``, mechanism
view): the score for a wrong-scale deviation.

Where the declared-model check finds a step's noise std off the declared one (its ``scale`` test),
the declared ratio ``mechanism-lrt`` still weighs each step by the declared 1/s_k², so a step with
less noise than declared counts for less than it should: on two steps of declared std s, the second
at s/2, the declared weights give μ = 4/(s√2.5) where the true law gives √10/s.

This score measures each step's std and weighs by it instead. It draws releases of each world from
the target, from generators ``SeedSequence([run seed, bit, j, 0x5CA1])`` (the run's seed, a namespace
apart from both trial streams and from the other fitted attacks'), and sets

  ŝ_k² = mean over the fit releases and the step's entries of (o − mean(g_b))²,

the residual around the world's declared mean (the scale test reads the same). A release's score is

  Σ_k (⟨o_k − m0_k, d_k⟩ − ‖d_k‖²/2) / ŝ_k²,

with d_k = mean_k(g1) − mean_k(g0) over the rows where the worlds differ: the Neyman–Pearson ratio
of the Gaussian law of the measured scales. The weights are fitted before any trial and frozen, so
the score is a fixed affine function of the release; its threshold is held out like any other
(cp makes no assumption of it), and a misfit costs power, never validity.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from attacks.base import DrawsOwnReleases
from attacks.mechanism import _means
from targets import base as targets
from targets.base import Level

#: fit releases per world (each step's std is a mean over all its entries of every release)
N_FIT = 16
#: the smallest measured variance, relative to the declared one (a noise-free step: a large, finite weight)
FLOOR = 1e-12
_FIT_NAMESPACE = 0x5CA1


def _cpu64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", torch.float64)


def measured_variance(sum_sq: float, count: int, declared: float) -> float:
    """A step's noise variance from its residuals' sum of squares over `count` entries, floored at
    :data:`FLOOR` × the declared variance."""
    return max(sum_sq / count, FLOOR * declared)


def step_ratio(o: np.ndarray, m0: np.ndarray, d: np.ndarray, var: float) -> np.ndarray:
    """The Gaussian log-likelihood ratio of one step at variance `var`, per release (rows of o)."""
    o = o.reshape(len(o), -1)
    return ((o - m0.ravel()) @ d.ravel() - 0.5 * float(d.ravel() @ d.ravel())) / var


class MeasuredScaleLRT(DrawsOwnReleases):
    name = "measured-scale"
    levels = (Level.MECHANISM,)
    exploits = ("scale",)
    #: after exact-rows where a step fails both (its noise-free entries are the stronger evidence)
    exploit_rank = 2
    after_deviation = True

    def __init__(self) -> None:
        super().__init__()
        self._fitted: tuple[int, list[float]] | None = None
        self._cache: dict[Any, Any] = {}

    @classmethod
    def pair_units(cls, target: Any, level: Level) -> float:
        """The fit's work units, charged once per pair: 2 × :data:`N_FIT` fits of the view."""
        return 2 * N_FIT * float(target.trial_cost(level))

    def applies_to(self, release: targets.Release, graph: Any = None) -> bool:
        """Every step a plain Gaussian one (a declared std, no projection, no density of its own)."""
        steps = release.mechanism or []
        return bool(steps) and all(s.noise_std and not s.row_projected and s.log_density is None for s in steps)

    def linear_in_release(self, info: dict[str, Any]) -> bool:
        return True

    def fit_releases(self, pair: Any, bit: int, n: int) -> list[targets.Release]:
        """n releases of world `bit` from generators of the run's seed that no trial uses."""
        if self.target is None or self.run_seed is None:
            raise ValueError("the measured-scale attack measures the target's own releases: bind_target and "
                             "bind_run first (the game does both)")
        rngs = [torch.Generator().manual_seed(int(np.random.SeedSequence([self.run_seed, bit, j, _FIT_NAMESPACE])
                                                  .generate_state(2, np.uint64)[0] >> 1)) for j in range(n)]
        world = pair.world(bit)
        return self.target.fit_batch(world, rngs) if self.target.batched else [self.target.fit(world, r) for r in rngs]

    def variances(self, pair: Any) -> list[float]:
        """Each step's measured noise variance (fitted once per pair, then frozen)."""
        if self._fitted is None or self._fitted[0] != id(pair):
            sums: dict[int, float] = {}
            count: dict[int, int] = {}
            declared: dict[int, float] = {}
            for bit, g in ((0, pair.g0), (1, pair.g1)):
                for r in self.fit_releases(pair, bit, N_FIT):
                    for k, step in enumerate(r.view(Level.MECHANISM)):
                        res = _cpu64(step.output) - self._mean(step, g, bit)
                        sums[k] = sums.get(k, 0.0) + float((res * res).sum())
                        count[k] = count.get(k, 0) + res.numel()
                        declared[k] = float(step.noise_std) ** 2
            var = [measured_variance(sums[k], count[k], declared[k]) for k in sorted(sums)]
            self._fitted = (id(pair), var)
            self._cache = {}
        return self._fitted[1]

    def _mean(self, step: Any, g: Any, bit: int) -> torch.Tensor:
        """The step's declared mean in world `bit` (once per mean_key; a step without one, every time)."""
        if step.mean_key is None:
            return _cpu64(step.mean(g))
        key = ("mean", step.mean_key, bit)
        if key not in self._cache:
            self._cache[key] = _cpu64(step.mean(g))
        return self._cache[key]

    def _shift(self, step: Any, pair: Any) -> Any:
        if step.mean_key is None:
            return _means(step, pair)
        key = ("shift", step.mean_key)
        if key not in self._cache:
            self._cache[key] = _means(step, pair)
        return self._cache[key]

    def score(self, release: targets.Release, pair: Any, graph: Any = None) -> float:
        var = self.variances(pair)
        total = 0.0
        for step, v in zip(release.view(Level.MECHANISM), var):
            m = self._shift(step, pair)
            o = _cpu64(step.output if m.rows is None else step.output[m.rows.to(step.output.device)])
            total += float(step_ratio(o.numpy()[None], m.m0.numpy(), m.d.numpy(), v)[0])
        return total
