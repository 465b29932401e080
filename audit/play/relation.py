"""The whole neighbouring relation: what a pair of worlds is charged, and the paper's reading beside it.

A claim holds for every pair its definition covers. Two things follow for one audited pair:

* A quantity the calibration reads from private data (a minimum degree, a node count, δ from the
  edge count) is pinned for both worlds (one noise for both) and charged at the worse of the two
  worlds (:meth:`targets.base.Target.pair_params`); the claim compared is the worse of the claim on
  each world (:meth:`targets.base.Target.charged_claim`).
* A world outside an assumption the paper states (:meth:`targets.base.Target.claim_assumptions`, a
  degree range say) is still audited: the verdict follows the standard definition (what
  "ε-edge-DP" promises a reader), and the paper's conditional claim is reported beside it, with the
  share of the dataset's edges or nodes such pairs concern.

:func:`charge` returns the target and claim to play and the record the result carries in its
``canary["relation_charge"]``; :func:`readings` words both readings once the verdict is known.
"""
from __future__ import annotations

from typing import Any

from targets import base as targets


def charge(unpinned: targets.Target, pair: Any, pinned: targets.Target, claim: targets.Claim
           ) -> tuple[targets.Target, targets.Claim, dict[str, Any]]:
    """The target (pins charged for the pair), the claim to compare against, and the record.

    `unpinned`: the target as configured, before any graph's quantities were pinned; `pinned` and
    `claim`: the run's target and claim pinned from the given graph (kept where the pair charges the
    same)."""
    pins = unpinned.pair_params(pair.g0, pair.g1)
    base_pins = {k: getattr(pinned.config, k) for k in pins}
    target = pinned
    if pins != base_pins:
        target = type(pinned)(targets.replace_config(pinned.config, **pins))
    charged = target.charged_claim(pair.g0, pair.g1)
    if pins == base_pins and (charged.epsilon, charged.delta) == (claim.epsilon, claim.delta):
        charged = claim  # the pair charges what the given graph does: the run's claim, as it was
    outside = {f"world {w}": target.claim_assumptions(g) for w, g in ((0, pair.g0), (1, pair.g1))}
    record: dict[str, Any] = {
        "relation": pair.relation or "insert",
        "pins": dict(pins),
        "pins_from": "the given graph" if pins == base_pins else "the worse world of the pair (it charges more)",
        "claim_epsilon": charged.epsilon,
        "assumptions_left": {w: why for w, why in outside.items() if why},
    }
    if charged.per_world_epsilon is not None:
        record["per_world_epsilon"] = list(charged.per_world_epsilon)
    share = pair_share(pair)
    if share is not None:
        record["share"] = share
    return target, charged, record


def pair_share(pair: Any) -> dict[str, Any] | None:
    """Which share of the dataset's edges (or training nodes) a pair of this kind concerns, where
    the canary measured it."""
    shares = pair.shares
    if not shares:
        return None
    kind = "isolating" if pair.isolates else "at_min_degree" if pair.relation == "remove" else None
    if kind is None or kind not in shares:
        return None
    return {"of": shares.get("of", "undirected edges"), "kind": kind, "share": shares[kind],
            "count": shares.get("edges", shares.get("nodes"))}


def record_readings(result: Any) -> None:
    """Add both readings to the result's ``canary["relation_charge"]`` (where the run charged a pair)."""
    record = result.canary.get("relation_charge")
    if record is not None:
        record["readings"] = readings(record, result.verdict)


def readings(record: dict[str, Any], verdict: str) -> dict[str, str]:
    """Both readings of the verdict: the standard definition's (the verdict) and the paper's
    conditional claim's."""
    outside = record.get("assumptions_left") or {}
    if not outside:
        return {"standard": verdict, "paper": f"{verdict} (the pair is inside every assumption the paper states)"}
    where = "; ".join(f"{w}: {', '.join(why)}" for w, why in outside.items())
    share = record.get("share")
    of = f"; such pairs are {100 * share['share']:.1f}% of the dataset's {share['of']}" if share else ""
    return {"standard": verdict,
            "paper": f"not covered: the paper's claim is conditional and this pair leaves it ({where}){of}"}
