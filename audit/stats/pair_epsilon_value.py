"""The exact ε of a played pair as a value (:class:`PairEpsilon`): how it was computed, what it covers
and what it rests on; :mod:`audit.stats.pair_epsilon` computes it, :mod:`audit.stats.pair_epsilon_slack`
reads it beside the claim and ε_lb.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

CLOSED_FORM = "closed-form"
MONTE_CARLO = "monte-carlo"
NOT_COMPUTABLE = "not computable"


@dataclass(frozen=True)
class PairEpsilon:
    """The exact ε of a run's played pair on its view (:mod:`audit.stats.pair_epsilon`'s docstring).

    Args:
        value: ε at ``delta``; None where not computable.
        method: ``closed-form``, ``monte-carlo`` or ``not computable``.
        delta: the run's δ.
        interval: Monte Carlo: the two-sided interval on ε at ``confidence``; a PLD: (optimistic,
            pessimistic); another closed form:
            (value, value).
        mu: the pair's μ (closed form only).
        covers: the released steps whose loss it includes.
        not_covered: what it leaves out, each with its reason (never silently).
        caveats: what the number rests on that the module could not prove (a μ_k seen fixed on the
            releases checked, a declared noise model not verified, few Monte-Carlo samples beyond
            ε); :attr:`exact` is a computed number with none.
        note: how it was computed (adaptive steps, samples beyond ε, ...).
        samples: Monte Carlo: releases per world.
        confidence: Monte Carlo: the interval's level.
        upper: where the exact ε is not computable, an upper bound on it where one is (e.g. a
            row-projected Gaussian step: its pre-projection μ-GDP, by post-processing), and
            ``upper_why``: what the bound is.
        rows: which output rows the computed loss compares (a node canary's own row is left out).
    """

    value: float | None
    method: str
    delta: float
    interval: tuple[float, float] | None = None
    mu: float | None = None
    covers: tuple[str, ...] = ()
    not_covered: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()
    note: str = ""
    samples: int | None = None
    confidence: float | None = None
    upper: float | None = None
    upper_why: str = ""
    rows: str = ""

    @property
    def computable(self) -> bool:
        return self.value is not None

    @property
    def exact(self) -> bool:
        return self.computable and not self.caveats

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["value"], out["upper"] = _json_float(self.value), _json_float(self.upper)
        out["interval"] = None if self.interval is None else [_json_float(x) for x in self.interval]
        out["covers"], out["not_covered"], out["caveats"] = list(self.covers), list(self.not_covered), list(self.caveats)
        out["exact"] = self.exact
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PairEpsilon:
        interval = d.get("interval")
        return cls(value=_read_float(d.get("value")), method=d["method"], delta=d["delta"],
                   interval=None if interval is None else (_read_float(interval[0]), _read_float(interval[1])),
                   mu=d.get("mu"), covers=tuple(d.get("covers") or ()), not_covered=tuple(d.get("not_covered") or ()),
                   caveats=tuple(d.get("caveats") or ()), note=d.get("note", ""), samples=d.get("samples"),
                   confidence=d.get("confidence"), upper=_read_float(d.get("upper")),
                   upper_why=d.get("upper_why", ""), rows=d.get("rows", ""))


def _json_float(x: float | None) -> float | str | None:
    return x if x is None or math.isfinite(x) else "inf"


def _read_float(x: Any) -> float | None:
    return None if x is None else float(x)


def not_computable(delta: float, *reasons: str, covers: Sequence[str] = ()) -> PairEpsilon:
    return PairEpsilon(value=None, method=NOT_COMPUTABLE, delta=delta, covers=tuple(covers),
                       not_covered=tuple(reasons))
