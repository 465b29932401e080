"""How the portfolio spends its pilot share (:mod:`audit.plan.portfolio`), and how it chooses where no pilot
certified anything.

* **Coverage.** The next pilot is the first candidate, in priority order, of a (view, attack family)
  not tried yet; only once every family has had its turn does a family get a second canary
  (:func:`next_index`). A family is an attack's registry name. A score that waits for a deviation
  (``Attack.after_deviation``) takes no such turn until a deviation promotes it.
* **No duplicates.** Two candidates that resolve to one pair (``auto`` is the probe's witness, or
  two canaries pick the same edge) with the same score play the same trials, so the second is not
  played (:func:`pair_fingerprint`). Nor is a score that its attack says equals another's on this
  release where that one was piloted on the pair (:meth:`attacks.base.Attack.same_score_as`).
* **Choosing without rewarding noise.** Where every held-out ε_lb is 0, the winner is the pilot
  whose one-sided lower bound on the held-out AUC (:func:`attacks.metrics.auc_lower`, at the run's
  confidence) is highest, provided it is above ½; where none is, no pilot showed a signal and the
  first candidate in priority order is certified (:func:`by_auc_lower`). The choice costs the
  certificate nothing (it reads only fresh trials); the bound keeps a score fitted to noise, whose
  held-out AUC sits near ½ on either side, from winning on its point value.
* **What was not reached** (:func:`unreached`): the views no pilot played, and the budget whose
  pilot share would have reached each of them in this order.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

#: (view, attack family) of a candidate or a pilot row
Family = tuple[str, str]


def family(c: Any) -> Family:
    level, attack = (c["level"], c["attack"]) if isinstance(c, dict) else (c.level, c.attack)
    return str(level), str(attack)


def next_index(pool: list[Any], tried: set[Family], waiting: Callable[[Any], bool] = lambda c: False) -> int:
    """The pool index of the next pilot: the first candidate of a family not in `tried`, else 0. A
    `waiting` candidate (a score that waits for a deviation, not promoted by one) has no turn of its
    own: it is played where the pool's order reaches it, after every other candidate."""
    return next((k for k, c in enumerate(pool) if family(c) not in tried and not waiting(c)), 0)


def pair_fingerprint(played_on: Any) -> tuple[Any, ...]:
    """What decides a pilot's trials besides its attack, view and stream: the resolved spec's setup
    and the pair's canary (edge or node, and which world holds it)."""
    pair = played_on.pair
    graph_canary = pair.edge is not None or pair.node is not None
    return (played_on.spec.setup_key(), pair.edge, pair.node, pair.relation,
            None if graph_canary else played_on.canary)


def cover_order(pool: list[Any], waiting: Callable[[Any], bool] = lambda c: False) -> list[Any]:
    """The pool in the order :func:`next_index` plays it (no check acting on a deviation)."""
    left, tried, out = list(pool), set(), []
    while left:
        c = left.pop(next_index(left, tried, waiting))
        tried.add(family(c))
        out.append(c)
    return out


def by_auc_lower(piloted: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pilot with the highest held-out AUC lower bound where it is above ½ (the earliest of equals),
    else None: no pilot showed a signal on its held-out trials."""
    best = max(piloted, key=lambda r: r["heldout_auc_lower"], default=None)
    return best if best is not None and best["heldout_auc_lower"] > 0.5 else None


def unreached(candidates: Iterable[Any], rows: list[dict[str, Any]], new_meter: Callable[[], Any], *,
              pilot_size: Callable[[Any], int], share: float, in_trials: bool) -> list[dict[str, Any]]:
    """Each view with candidates and no pilot played, and the budget whose pilot share would reach it:
    every candidate up to its first one in `candidates` (the coverage order) played at full size
    on a fresh meter's declared costs (an upper figure: duplicates are counted), in trials where the
    budget is a trial count, else in work units (beside a time budget, what the declared costs say)."""
    played = {str(r["level"]) for r in rows if "trials" in r or str(r.get("status", "")).startswith("failed")}
    order = list(candidates)
    views = [v for v in dict.fromkeys(str(c.level) for c in order) if v not in played]
    if not views:
        return []
    sim = new_meter()
    out, todo = [], set(views)
    for c in order:
        n = pilot_size(c)
        sim.charge(c, n)
        if str(c.level) in todo:
            todo.discard(str(c.level))
            if in_trials:
                need = f"{int(sim.trials / share) + 1:,} trials"
            else:
                need = f"{sim.units / share:.0f}u"
            out.append({"view": str(c.level), "first": f"{c.attack} / {c.canary}", "budget": need})
        if not todo:
            break
    return out
