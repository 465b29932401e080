"""The rows a campaign stored before (its ``campaign.json``): read back, matched to today's plan, checked
for code that is no longer today's, and merged with the rows planned now (``--only``).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any
from audit.stats.kinds import Method


def stored_rows(out: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The previous campaign.json of `out`: (its header, its rows); (None, []) when there is none."""
    path = out / "campaign.json"
    if not path.exists():
        return None, []
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None, []
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        return None, []
    return {k: v for k, v in doc.items() if k != "rows"}, [r for r in doc["rows"] if isinstance(r, dict)]


def matches(rec: dict[str, Any], spec: Any) -> bool:
    """A stored row holds this spec's outcome: same options (spec key), trial count and estimator."""
    if rec.get("key") != spec.key() or rec.get("trials") != spec.trials or rec.get("verdict") == "ERROR":
        return False
    return spec.estimator == Method.AUTO or rec.get("method") == spec.estimator


@functools.lru_cache(maxsize=None)
def current_code_key(target: str, attack: str, canary: str | None) -> str | None:
    """:func:`audit.records.provenance.code_identity` key of the code that would play this row now (its
    target, attack and canary classes), or None where it cannot be computed here."""
    try:
        from attacks import base as attacks_registry
        from audit.records.provenance import code_identity
        from canaries import base as canaries
        from targets import base as targets

        objs = [targets.get(target), attacks_registry.get(attack)]
        if canary:
            objs.append(canaries.get(canary))
        return code_identity(*objs)["key"]
    except Exception:  # noqa: BLE001 - unknown here: fall back to the options key
        return None


def stale_code(rec: dict[str, Any]) -> str | None:
    """Why a stored row's code is not today's (None: the same code, or today's cannot be computed).
    A row that records no code key predates code recording: nothing says it is today's, so it is stale."""
    stored = (rec.get("code") or {}).get("key")
    now = current_code_key(rec["target"], rec["attack"], rec.get("canary"))
    if now is None or now == stored:
        return None
    if not stored:
        return f"no code recorded then, {now[:8]} now"
    return f"code {str(stored)[:8]} then, {now[:8]} now"


def merge_rows(prev: list[dict[str, Any]], planned: list[dict[str, Any]], targets: set[str]) -> list[dict[str, Any]]:
    """The rows campaign.json holds: the planned rows, with the stored rows of targets outside the
    plan (``--only``) kept where they were (the planned rows of a target take the place of its
    stored ones)."""
    if not any(r.get("target") not in targets for r in prev):
        return planned
    out: list[dict[str, Any]] = []
    placed: set[str] = set()
    for r in prev:
        t = r.get("target")
        if t not in targets:
            out.append(r)
        elif t not in placed:
            placed.add(t)
            out += [p for p in planned if p["target"] == t]
    return out + [p for p in planned if p["target"] not in placed]


def previous_roc(rows: list[dict[str, Any]], key: str, trials: int) -> dict[str, list[float]] | None:
    for r in rows:
        if r.get("key") == key and r.get("trials") == trials and r.get("roc"):
            return r["roc"]
    return None
