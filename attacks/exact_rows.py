"""A score that exploits rows released without noise (``exact-rows``, mechanism view).

The declared-model check (:mod:`audit.declared_model.declared_joint`) finds entries a step releases exact though it
declares a std; a likelihood ratio that trusts the declared std reads such a row as one more noisy
row. This score reads it as what it is: on every row where the two worlds' declared means differ,
an output equal to world 1's mean (to float precision) counts +1 and one equal to world 0's mean
−1, weighted far above the Gaussian log-likelihood ratio of the remaining rows, which breaks ties
(the declared std; the projection ⟨o − (m0 + m1)/2, m1 − m0⟩ where none is declared). On a step
with noise in every row the exact matches never happen and the score is the usual ratio. Node
canaries: the canary node's own row is left out, as :mod:`attacks.mechanism` does.
"""
from __future__ import annotations

from typing import Any

import torch

from attacks.base import Attack
from targets.base import Level, Release

#: the weight of one exactly matched row against the log-likelihood ratio
MATCH_WEIGHT = 1e6


def _cpu64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", torch.float64)


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(t.shape[0], -1) if t.dim() > 1 else t.reshape(1, -1)


def _equal_rows(o: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Rows of `o` equal to those of `m` to the precision of a float32 release of `m`."""
    tol = 4 * torch.finfo(torch.float32).eps * m.abs().clamp_min(1e-30)
    return ((o - m).abs() <= tol).all(1)


class ExactRows(Attack):
    name = "exact-rows"
    levels = (Level.MECHANISM,)
    exploits = ("noise-free",)

    def __init__(self) -> None:
        self._means: dict[tuple[int, int, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def applies_to(self, release: Release) -> bool:
        return bool(release.mechanism)

    def same_score_as(self, release: Release, graph: Any, declared: dict[str, Any] | None) -> str | None:
        """``mechanism-lrt`` where no step has a log-density or a projected Gaussian law, the declared
        check found no noise-free entry, and no row of the probe release equals its mean on `graph`
        (a row released without noise would, in every release): no output then matches a mean, and
        what is left is mechanism-lrt's score, step by step (the Gaussian ratio at the declared std,
        or the projection on the mean difference where none is declared)."""
        steps = release.mechanism or []
        plain = bool(steps) and all(s.log_density is None and not (s.noise_std and s.row_projected) for s in steps)
        found = " ".join(declared.get("deviations") or []) if declared else ""
        if not plain or "noise-free" in found:
            return None
        for step in steps:
            if bool(_equal_rows(_rows(_cpu64(step.output)), _rows(_cpu64(step.mean(graph)))).any()):
                return None
        return "mechanism-lrt"

    def _world_means(self, k: int, step: Any, pair: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        key = (id(pair.g0), id(pair.g1), k)
        if key not in self._means:
            if len(self._means) > 64:
                self._means.clear()
            m0, m1 = _rows(_cpu64(step.mean(pair.g0))), _rows(_cpu64(step.mean(pair.g1)))
            rows = (m0 != m1).any(1).nonzero().view(-1)
            node = pair.node
            if node is not None and m0.shape[0] > 1:
                rows = rows[rows != int(node)]
            self._means[key] = (rows, m0[rows], m1[rows])
        return self._means[key]

    def score(self, release: Release, pair: Any, graph: Any = None) -> float:
        total = 0.0
        for k, step in enumerate(release.view(Level.MECHANISM)):
            rows, m0, m1 = self._world_means(k, step, pair)
            if rows.numel() == 0:
                continue
            o = _rows(_cpu64(step.output))[rows]
            total += MATCH_WEIGHT * float(_equal_rows(o, m1).sum() - _equal_rows(o, m0).sum())
            d = m1 - m0
            llr = float(((o - (m0 + m1) / 2) * d).sum())
            total += llr / step.noise_std ** 2 if step.noise_std else llr
        return total
