"""SQLite store of trials and results.

Each finished trial is committed at once, keyed by the run's *spec key* (a hash of everything
that determines trial outcomes), so an interrupted run loses no finished trial and rerunning the
same spec resumes where it stopped. Results (one JSON each) are kept beside the trials.

A file that is not a readable store, or one another process holds locked past the timeout, raises
:class:`StoreError` (a usage error: the message names the file and what to do); the file is never
rewritten or removed, so nothing saved in it is lost.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
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
    """The store key of a run's trials: its options' key (:meth:`audit.play.game.AuditSpec.key`) and its
    code's (:func:`audit.records.provenance.code_identity`), so trials from other code are never mixed in."""
    return hashlib.sha256(f"{spec_key}:{code_key}".encode()).hexdigest()[:16]


class StoreError(ValueError):
    """The store file cannot be used: not a store (corrupt, or another kind of file), or locked."""


#: seconds a write waits for another process's lock before StoreError
LOCK_TIMEOUT_S = 60.0


@contextmanager
def _guarded(path: Path) -> Iterator[None]:
    try:
        yield
    except sqlite3.OperationalError as err:
        if "locked" in str(err) or "busy" in str(err):
            raise StoreError(f"the results store {path} is locked by another process (waited "
                             f"{LOCK_TIMEOUT_S:g} s); wait for it to finish, or pass another --out") from err
        raise _unreadable(path, err) from err
    except sqlite3.DatabaseError as err:
        raise _unreadable(path, err) from err


def _unreadable(path: Path, err: Exception) -> StoreError:
    return StoreError(f"the results store {path} is not a readable store ({err}); it was left as it is: "
                      "move it aside (or pass another --out) and rerun")


class Store:
    """Trials and results of audit runs in one SQLite file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _guarded(self.path):
            self._db = sqlite3.connect(str(self.path), timeout=LOCK_TIMEOUT_S)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            self._db.commit()

    def _run(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with _guarded(self.path):
            return list(self._db.execute(sql, args))

    def _write(self, *statements: tuple[str, Any], many: bool = False) -> None:
        with _guarded(self.path):
            for sql, args in statements:
                (self._db.executemany if many else self._db.execute)(sql, args)
            self._db.commit()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def begin(self, key: str, spec: dict[str, Any]) -> None:
        self._write(("INSERT OR IGNORE INTO runs VALUES (?, ?, ?)", (key, json.dumps(spec, sort_keys=True), time.time())))

    def add_trials(self, key: str, rows: Iterable[tuple[int, int, float]]) -> None:
        self._write(("INSERT OR REPLACE INTO trials VALUES (?, ?, ?, ?)",
                     [(key, int(i), int(b), float(s)) for i, b, s in rows]), many=True)

    def forget(self, key: str) -> None:
        """Drop every stored trial and result of `key` (a fresh run)."""
        self._write(*((f"DELETE FROM {table} WHERE key = ?", (key,)) for table in ("trials", "runs", "results")))

    def created(self, key: str) -> float | None:
        """When the run `key` first stored anything (seconds since the epoch)."""
        rows = self._run("SELECT created FROM runs WHERE key = ?", (key,))
        return float(rows[0][0]) if rows else None

    def done(self, key: str) -> set[int]:
        return {i for (i,) in self._run("SELECT idx FROM trials WHERE key = ?", (key,))}

    def trials(self, key: str, limit: int | None = None) -> list[tuple[int, int, float]]:
        rows = self._run("SELECT idx, bit, score FROM trials WHERE key = ? ORDER BY idx", (key,))
        return rows if limit is None else [r for r in rows if r[0] < limit]

    def save_result(self, run_id: str, key: str, result: dict[str, Any]) -> None:
        self._write(("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)",
                     (run_id, key, json.dumps(result, sort_keys=True), time.time())))

    def result(self, run_id: str) -> dict[str, Any] | None:
        rows = self._run("SELECT result FROM results WHERE run_id = ?", (run_id,))
        return json.loads(rows[0][0]) if rows else None

    def results(self) -> list[dict[str, Any]]:
        return [json.loads(r) for (r,) in self._run("SELECT result FROM results ORDER BY created")]
