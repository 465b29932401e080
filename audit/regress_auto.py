"""``regress --auto``: the bug catalogue played by the default command.

Each catalogue entry keeps its configuration (target, ``--set``, dataset, ε, bug) and leaves the
attack, canary, estimator, mode and trials to the defaults: the portfolio (:mod:`audit.portfolio`)
within the budget. Entries that differ only in what the defaults replace are one configuration, played
once. An entry may say how the default reads it (``Entry.auto_expect``, ``Entry.auto_note``): where its
hand-chosen verdict rests on a unit narrower than the standard one, the default audits the standard
unit, and a planted bug "caught" only through a finding of that configuration does not count.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from audit import catalogue, game, portfolio
from audit.budget import Budget
from targets.common.catalogue import FINDING


def configurations(entries: list[catalogue.Entry]) -> list[catalogue.Entry]:
    """The entries with distinct configurations (the first of each), in catalogue order."""
    seen, out = set(), []
    for e in entries:
        key = (e.target, e.bug, e.epsilon, tuple(sorted(e.params.items())), e.dataset)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def spec_of(entry: catalogue.Entry, seed: int) -> game.AuditSpec:
    return game.AuditSpec(target=entry.target, epsilon=entry.epsilon, bug=entry.bug, params=dict(entry.params),
                          dataset=entry.dataset, seed=seed)


def play(entry: catalogue.Entry, budget: Budget, *, seed: int, out: Path, jobs: int) -> dict[str, Any]:
    """One entry by the default command: what it chose, what it found, and whether that counts."""
    start = time.time()
    result = portfolio.run(spec_of(entry, seed), budget, out=out, jobs=jobs, progress=False)
    record = result.extra["portfolio"]
    expect = entry.auto_expect or entry.expect
    ok = expect == FINDING or result.verdict == expect
    caught = bool(entry.bug) and expect == "VIOLATION" and ok and not entry.auto_note
    piloted = sum(r["status"] == "piloted" for r in record["candidates"])
    return {"entry": entry.name, "bug": entry.bug, "expected": expect, "got": result.verdict, "ok": ok,
            "counts_as_caught": caught, "note": entry.auto_note, "eps_lb": result.eps_lb,
            "claimed_epsilon": result.claimed_epsilon, "method": result.method,
            "chosen": f"{result.attack} / {result.canary.get('canary', '?')} @ {result.level}",
            "piloted": piloted, "candidates": len(record["candidates"]), "trials": result.trials,
            "power": (result.power or {}).get("reading"), "seconds": time.time() - start}


def row_text(row: dict[str, Any]) -> str:
    mark = "" if row["ok"] else "  ← MISMATCH"
    eps = row["eps_lb"] if isinstance(row["eps_lb"], str) else f"{row['eps_lb']:.3f}"
    note = f" ({row['note']})" if row["note"] else ""
    return (f"| {row['entry']} | {row['expected']} | {row['got']}{mark}{note} | {eps} | {row['claimed_epsilon']:.3g} | "
            f"{row['chosen']} | {row['piloted']}/{row['candidates']} | {row['trials']} | {row['power']} | "
            f"{row['seconds']:.0f} |")


HEADER = ("| entry | expected | got | ε_lb | claimed ε | chosen (attack / canary @ level) | piloted | trials | power | s |\n"
          "|---|---|---|---|---|---|---|---|---|---|")


def summary(rows: list[dict[str, Any]]) -> str:
    planted = [r for r in rows if r["bug"] and r["expected"] == "VIOLATION"]
    consistent = [r for r in rows if r["expected"] == "CONSISTENT"]
    return (f"{sum(r['counts_as_caught'] for r in planted)}/{len(planted)} planted violations caught by the default; "
            f"{sum(r['ok'] for r in consistent)}/{len(consistent)} CONSISTENT configurations kept consistent; "
            f"{sum(not r['ok'] for r in rows)} mismatch(es); {sum(r['seconds'] for r in rows) / 60:.1f} min")
