"""An experiment's results as they finish, in a SQLite file next to its report, so an
experiment that crashed (or was stopped) goes on where it was: a case whose result is
there, for the same experiment and the same case content, is not run again."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import msgspec

from interpreters.evals.report import CaseResult

SCHEMA = """CREATE TABLE IF NOT EXISTS eval_results (
    experiment TEXT NOT NULL,
    case_name TEXT NOT NULL,
    case_digest TEXT NOT NULL,
    result BLOB NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (experiment, case_name)
)"""

_decode = msgspec.json.Decoder(CaseResult)


class ResultStore:
    """Finished cases by experiment, in a SQLite file (one connection: use it from one
    thread; the experiment writes from its event loop's)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=10.0)
        # WAL, synced at checkpoints: a case committed survives the process crashing
        # (not a power cut), at a fraction of a sync per case (bench/evals.py)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        with self._db:
            self._db.execute(SCHEMA)

    def finished(self, experiment: str) -> dict[str, CaseResult]:
        """The cases of `experiment` that ran (those that could not run are not kept)."""
        rows = self._db.execute(
            "SELECT result FROM eval_results WHERE experiment = ?", (experiment,)
        ).fetchall()
        out: dict[str, CaseResult] = {}
        for (blob,) in rows:
            try:
                r = _decode.decode(blob)
            except msgspec.DecodeError:
                continue  # written by another version: the case runs again
            out[r.case] = r
        return out

    def put(self, experiment: str, result: CaseResult) -> None:
        """Keep a finished case (committed at once: a crash after it keeps it)."""
        if result.error is not None:
            return
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO eval_results VALUES (?, ?, ?, ?, ?)",
                (experiment, result.case, result.digest, msgspec.json.encode(result),
                 time.time()),
            )

    def close(self) -> None:
        self._db.close()


__all__ = ["ResultStore"]
