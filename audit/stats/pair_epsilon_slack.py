"""The slack line of a run: claim → exact ε of the played pair → ε_lb, their ratios, and a table cell
for the exact ε (:class:`audit.stats.pair_epsilon_value.PairEpsilon`, as a value or its record).
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from audit.stats.pair_epsilon_value import MONTE_CARLO, PairEpsilon


def slack(claimed: float, exact: PairEpsilon | dict[str, Any] | None, eps_lb: float) -> dict[str, Any]:
    """The three numbers side by side, and ε_lb / claim, exact / claim, ε_lb / exact."""
    if isinstance(exact, dict):
        exact = PairEpsilon.from_dict(exact)
    value = exact.value if exact is not None else None
    ratio = (lambda a, b: a / b if b and math.isfinite(b) and b > 0 and a is not None and math.isfinite(a) else None)
    return {"claim": claimed, "exact": value, "exact_upper": None if exact is None else exact.upper,
            "eps_lb": eps_lb, "lb_over_claim": ratio(eps_lb, claimed),
            "exact_over_claim": ratio(value, claimed), "lb_over_exact": ratio(eps_lb, value)}


def slack_line(claimed: float, exact: PairEpsilon | dict[str, Any] | None, eps_lb: float) -> str:
    """``claim 1 → exact 0.27 (closed-form) → ε_lb 0.24; ε_lb/claim 0.24, exact/claim 0.27``, or
    ``claim 1 → exact not computable: <reason> → ε_lb 0.24``; then the caveats, if any."""
    if isinstance(exact, dict):
        exact = PairEpsilon.from_dict(exact)
    s = slack(claimed, exact, eps_lb)
    if exact is None:
        middle = "exact not computed (a result written before this field existed)"
    elif exact.value is None:
        reasons = (re.sub(r":? not computable\b", "", r) for r in exact.not_covered if "not observed" not in r)
        middle = f"exact not computable: {'; '.join(reasons)}"  # said once, not again after each reason
        if exact.upper is not None:
            middle += f"; exact ≤ {_g(exact.upper)} ({exact.upper_why})"
    elif exact.method == MONTE_CARLO:
        lo, hi = exact.interval
        middle = f"exact {_g(exact.value)} [{_g(lo)}, {_g(hi)}] (monte-carlo)"
    else:
        how = f"μ {_g(exact.mu)}" if exact.mu is not None else f"[{_g(exact.interval[0])}, {_g(exact.interval[1])}], PLD" \
            if exact.note.startswith("PLD") else "μ -"
        middle = f"exact {_g(exact.value)} ({exact.method}, {how})"
    ratios = f"ε_lb/claim {_g(s['lb_over_claim'])}"
    if s["exact_over_claim"] is not None:
        ratios += f", exact/claim {_g(s['exact_over_claim'])}"
    caveats = f"; caveat: {'; '.join(exact.caveats)}" if exact is not None and exact.caveats else ""
    rows = f"; rows compared: {exact.rows}" if exact is not None and "canary node" in exact.rows else ""
    return f"claim {_g(claimed)} → {middle} → ε_lb {_g(eps_lb)}; {ratios}{caveats}{rows}"


def exact_cell(record: dict[str, Any] | None, fmt: Callable[[Any], str] | None = None) -> str:
    """A table cell: ``0.27 cf`` (closed form), ``0.27 [0.25, 0.29] mc`` (Monte Carlo), ``n/c``
    or ``n/c (≤ 0.5)`` (not computable, with an upper bound), † where a caveat applies; ``not
    computed`` for a record written before the field existed."""
    fmt = fmt or _g
    if record is None:
        return "not computed"
    if record.get("value") is None:
        return "n/c" if record.get("upper") is None else f"n/c (≤ {fmt(record['upper'])})"
    mark = "†" if record.get("caveats") else ""
    if record.get("method") == MONTE_CARLO:
        lo, hi = record["interval"]
        return f"{fmt(record['value'])} [{fmt(lo)}, {fmt(hi)}] mc{mark}"
    return f"{fmt(record['value'])} cf{mark}"


def _g(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3g}" if math.isfinite(x) else "inf"
