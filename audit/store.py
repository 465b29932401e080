"""SQLite store of trials and results.

Each finished trial is committed at once, keyed by the run's *spec key* (a hash of everything
that determines trial outcomes), so an interrupted run loses no finished trial and rerunning the
same spec resumes where it stopped. Results (one JSON each) are kept beside the trials.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, spec TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
    key TEXT NOT NULL, idx INTEGER NOT NULL, bit INTEGER NOT NULL, score REAL NOT NULL,
    PRIMARY KEY (key, idx));
CREATE TABLE IF NOT EXISTS results (
    run_id TEXT PRIMARY KEY, key TEXT NOT NULL, result TEXT NOT NULL, created REAL NOT NULL);
"""


def run_key(spec_key: str, code_key: str) -> str:
    """The store key of a run's trials: its options' key (:meth:`audit.game.AuditSpec.key`) and its
    code's (:func:`audit.provenance.code_identity`), so trials from other code are never mixed in."""
    return hashlib.sha256(f"{spec_key}:{code_key}".encode()).hexdigest()[:16]


class Store:
    """Trials and results of audit runs in one SQLite file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def begin(self, key: str, spec: dict[str, Any]) -> None:
        self._db.execute("INSERT OR IGNORE INTO runs VALUES (?, ?, ?)", (key, json.dumps(spec, sort_keys=True), time.time()))
        self._db.commit()

    def add_trials(self, key: str, rows: Iterable[tuple[int, int, float]]) -> None:
        self._db.executemany("INSERT OR REPLACE INTO trials VALUES (?, ?, ?, ?)",
                             [(key, int(i), int(b), float(s)) for i, b, s in rows])
        self._db.commit()

    def forget(self, key: str) -> None:
        """Drop every stored trial and result of `key` (a fresh run)."""
        self._db.execute("DELETE FROM trials WHERE key = ?", (key,))
        self._db.execute("DELETE FROM runs WHERE key = ?", (key,))
        self._db.execute("DELETE FROM results WHERE key = ?", (key,))
        self._db.commit()

    def created(self, key: str) -> float | None:
        """When the run `key` first stored anything (seconds since the epoch)."""
        row = self._db.execute("SELECT created FROM runs WHERE key = ?", (key,)).fetchone()
        return float(row[0]) if row else None

    def done(self, key: str) -> set[int]:
        return {i for (i,) in self._db.execute("SELECT idx FROM trials WHERE key = ?", (key,))}

    def trials(self, key: str, limit: int | None = None) -> list[tuple[int, int, float]]:
        q = "SELECT idx, bit, score FROM trials WHERE key = ? ORDER BY idx"
        rows = list(self._db.execute(q, (key,)))
        return rows if limit is None else [r for r in rows if r[0] < limit]

    def save_result(self, run_id: str, key: str, result: dict[str, Any]) -> None:
        self._db.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)",
                         (run_id, key, json.dumps(result, sort_keys=True), time.time()))
        self._db.commit()

    def result(self, run_id: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT result FROM results WHERE run_id = ?", (run_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def results(self) -> list[dict[str, Any]]:
        return [json.loads(r) for (r,) in self._db.execute("SELECT result FROM results ORDER BY created")]
