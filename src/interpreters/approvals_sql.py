"""Suspended runs kept beside the memory store: in its SQLite file or PostgreSQL database.

    store = SQLiteApprovalStore("runs.db")        # or PostgresApprovalStore(url)
    approvals = Approvals(store)                  # as with MemoryApprovalStore
    store = open_approval_store("sqlite:///runs.db")   # or by URL, as open_memory_store

Both are `ApprovalStore`s over the memory stores' connection handling (`SQLiteStore`'s
one WAL connection, each write one `BEGIN IMMEDIATE`; `PostgresStore`'s pool, each call
one transaction): open one over an existing memory store to share its connection, or over
a path / URL. One row per run id: `save` replaces it (a run suspended again), `take`
reads and marks it taken in one transaction (the row locked), so of two processes taking
the same run exactly one gets it and the other `RunNotSuspended`.

A suspension is stored msgpack-encoded. `save` checks that it encodes and decodes back
(`SuspensionNotStorable` names the processor state that does not: a run is never
silently lost); the processors' states come back as plain data (dicts, lists), and
`Approvals.take` types them again by the agent's processors (`typed_states`). A stored
row that does not decode is `CorruptStoredSuspension`; a store that cannot be reached is
`ApprovalStoreUnavailable`. The tables are versioned on their own (`approval_schema`),
a newer version refused.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, LiteralString, TypeVar

import msgspec

from interpreters.approvals import MemoryApprovalStore
from interpreters.memory.open import open_memory_store
from interpreters.memory.postgres import PostgresStore
from interpreters.memory.sqlite import SQLiteStore
from interpreters.memory.store import MemoryStoreError, MemoryStoreUnavailable
from pipeline.approval import RunNotSuspended, UnknownRun
from pipeline.result import Suspension

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

T = TypeVar("T")

APPROVAL_SCHEMA_VERSION = 1
"""The version of the approval tables; a store opened on an older one migrates it."""

_MIGRATION_LOCK = 0x61707072  # pg_advisory_xact_lock key of the approval tables

# Each entry takes the tables from the version before it to its own (index + 1).
SQLITE_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: one row per run id; `body` NULL once taken
        "CREATE TABLE approval_runs (run_id TEXT PRIMARY KEY, body BLOB, "
        "taken INTEGER NOT NULL)",
    ),
)
POSTGRES_MIGRATIONS: tuple[tuple[LiteralString, ...], ...] = (
    (
        "CREATE TABLE approval_runs (run_id text PRIMARY KEY, body bytea, "
        "taken boolean NOT NULL)",
    ),
)
assert len(SQLITE_MIGRATIONS) == len(POSTGRES_MIGRATIONS) == APPROVAL_SCHEMA_VERSION


class ApprovalStoreError(MemoryStoreError):
    """Base of the approval stores' errors."""


class ApprovalStoreUnavailable(ApprovalStoreError, MemoryStoreUnavailable):
    """The store could not be reached or did not answer in time."""


class SuspensionNotStorable(ApprovalStoreError):
    """A suspension that does not encode (or not back): refused at `save`."""


class CorruptStoredSuspension(ApprovalStoreError):
    """A stored suspension that does not decode."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"the stored suspension of run {run_id!r} does not decode: {reason}")
        self.run_id = run_id


_ENC = msgspec.msgpack.Encoder()
_DEC = msgspec.msgpack.Decoder(Suspension)


def encode_suspension(s: Suspension) -> bytes:
    """`s` as stored; `SuspensionNotStorable` when it does not encode or decode back."""
    if not isinstance(s, Suspension):
        raise TypeError(f"an approval store keeps a Suspension, not {type(s).__name__}")
    try:
        body = _ENC.encode(s)
        _DEC.decode(body)
    except (TypeError, ValueError, OverflowError, msgspec.DecodeError) as e:
        raise SuspensionNotStorable(
            f"the suspension of run {s.run_id!r} cannot be stored: {_culprit(s)}{e}"
        ) from None
    return body


def _culprit(s: Suspension) -> str:
    """Which processor state does not encode, if one does not."""
    for slot, state in enumerate(s.states):
        try:
            _ENC.encode(state)
        except (TypeError, ValueError, OverflowError):
            return f"the processor state in slot {slot} ({type(state).__name__}): "
    return ""


def decode_suspension(run_id: str, body: bytes) -> Suspension:
    try:
        s = _DEC.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise CorruptStoredSuspension(run_id, str(e)) from None
    if s.run_id != run_id:
        raise CorruptStoredSuspension(run_id, f"it is the suspension of run {s.run_id!r}")
    return s


def _check_run_id(run_id: object) -> str:
    if not isinstance(run_id, str) or not run_id:
        raise TypeError(f"a run id is a non-empty str, not {run_id!r}")
    return run_id


@contextmanager
def _typed_errors() -> Iterator[None]:
    """The memory store's errors as the approval store's."""
    try:
        yield
    except ApprovalStoreError:
        raise
    except MemoryStoreUnavailable as e:
        raise ApprovalStoreUnavailable(str(e)) from None
    except MemoryStoreError as e:
        raise ApprovalStoreError(str(e)) from None


def _taken_error(run_id: str, row: tuple[object, object] | None) -> Exception | None:
    if row is None:
        return UnknownRun(f"no suspended run {run_id!r}")
    if row[1]:
        return RunNotSuspended(f"run {run_id!r} was resumed already")
    return None


# --- SQLite ------------------------------------------------------------------------------


def _sqlite_migrate(conn: sqlite3.Connection) -> None:
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'approval_schema'"
    ).fetchone()
    version = 0
    if found is None:
        conn.execute("CREATE TABLE approval_schema (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO approval_schema VALUES (0)")
    else:
        row = conn.execute("SELECT version FROM approval_schema").fetchone()
        version = int(row[0]) if row is not None else 0
    _check_version(version)
    for steps in SQLITE_MIGRATIONS[version:]:
        for sql in steps:
            conn.execute(sql)
    if version < APPROVAL_SCHEMA_VERSION:
        conn.execute("UPDATE approval_schema SET version = ?", (APPROVAL_SCHEMA_VERSION,))


def _check_version(found: int) -> None:
    if found > APPROVAL_SCHEMA_VERSION:
        raise ApprovalStoreError(
            f"the approval tables are version {found}, newer than this library's "
            f"({APPROVAL_SCHEMA_VERSION}): upgrade pipeline-agents to open them"
        )


class SQLiteApprovalStore:
    """An `ApprovalStore` in SQLite: over `store` (a `SQLiteStore`, sharing its
    connection) or a path (a `SQLiteStore` opened on it, `timeout` seconds to wait for
    another writer of the file; closed by `close`)."""

    def __init__(
        self, store: SQLiteStore | str | os.PathLike[str], *, timeout: float = 5.0
    ) -> None:
        self._owned = not isinstance(store, SQLiteStore)
        with _typed_errors():
            self.store = store if isinstance(store, SQLiteStore) else SQLiteStore(
                store, timeout=timeout
            )
        try:
            self._write(_sqlite_migrate)
        except BaseException:
            self.close()
            raise

    def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        with _typed_errors():
            return self.store._write(body)

    def save(self, suspension: Suspension) -> None:
        body = encode_suspension(suspension)
        self._write(
            lambda c: c.execute(
                "INSERT INTO approval_runs VALUES (?, ?, 0) ON CONFLICT (run_id) "
                "DO UPDATE SET body = excluded.body, taken = 0",
                (suspension.run_id, body),
            )
        )

    def take(self, run_id: str) -> Suspension:
        _check_run_id(run_id)

        def body(conn: sqlite3.Connection) -> Suspension:
            row = conn.execute(
                "SELECT body, taken FROM approval_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            error = _taken_error(run_id, row)
            if error is not None:
                raise error
            s = decode_suspension(run_id, bytes(row[0]))  # corrupt: raised, not taken
            conn.execute(
                "UPDATE approval_runs SET body = NULL, taken = 1 WHERE run_id = ?", (run_id,)
            )
            return s

        return self._write(body)  # BEGIN IMMEDIATE: one taker of the file at a time

    def get(self, run_id: str) -> Suspension | None:
        _check_run_id(run_id)
        with _typed_errors(), self.store._use() as conn:
            row = conn.execute(
                "SELECT body FROM approval_runs WHERE run_id = ? AND taken = 0", (run_id,)
            ).fetchone()
        return None if row is None else decode_suspension(run_id, bytes(row[0]))

    def close(self) -> None:
        """Close the SQLite store when this store opened it."""
        if self._owned and hasattr(self, "store"):
            self.store.close()


# --- PostgreSQL --------------------------------------------------------------------------


def _postgres_migrate(conn: psycopg.Connection[TupleRow]) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
    conn.execute("CREATE TABLE IF NOT EXISTS approval_schema (version integer NOT NULL)")
    row = conn.execute("SELECT version FROM approval_schema").fetchone()
    if row is None:
        conn.execute("INSERT INTO approval_schema VALUES (0)")
    version = 0 if row is None else int(str(row[0]))
    _check_version(version)
    for steps in POSTGRES_MIGRATIONS[version:]:
        for sql in steps:
            conn.execute(sql)
    if version < APPROVAL_SCHEMA_VERSION:
        conn.execute("UPDATE approval_schema SET version = %s", (APPROVAL_SCHEMA_VERSION,))


class PostgresApprovalStore:
    """An `ApprovalStore` in PostgreSQL: over `store` (a `PostgresStore`, sharing its
    pool and schema) or a URL (a `PostgresStore` opened on it with `schema`, `pool_size`
    and `timeout`; closed by `close`)."""

    def __init__(
        self,
        store: PostgresStore | str,
        *,
        schema: str = "public",
        pool_size: int = 4,
        timeout: float = 10.0,
    ) -> None:
        self._owned = not isinstance(store, PostgresStore)
        with _typed_errors():
            self.store = store if isinstance(store, PostgresStore) else PostgresStore(
                store, schema=schema, pool_size=pool_size, timeout=timeout
            )
        try:
            self._run(_postgres_migrate)
        except BaseException:
            self.close()
            raise

    def _run(self, body: Callable[[psycopg.Connection[TupleRow]], T]) -> T:
        with _typed_errors():
            return self.store._run(body)

    def save(self, suspension: Suspension) -> None:
        body = encode_suspension(suspension)
        self._run(
            lambda c: c.execute(
                "INSERT INTO approval_runs VALUES (%s, %s, false) ON CONFLICT (run_id) "
                "DO UPDATE SET body = excluded.body, taken = false",
                (suspension.run_id, body),
            )
        )

    def take(self, run_id: str) -> Suspension:
        _check_run_id(run_id)

        def body(conn: psycopg.Connection[TupleRow]) -> Suspension:
            # FOR UPDATE: a second taker waits for the first to commit, then reads taken.
            row = conn.execute(
                "SELECT body, taken FROM approval_runs WHERE run_id = %s FOR UPDATE",
                (run_id,),
            ).fetchone()
            error = _taken_error(run_id, None if row is None else (row[0], row[1]))
            if error is not None:
                raise error
            assert row is not None
            s = decode_suspension(run_id, bytes(row[0]))
            conn.execute(
                "UPDATE approval_runs SET body = NULL, taken = true WHERE run_id = %s",
                (run_id,),
            )
            return s

        return self._run(body)

    def get(self, run_id: str) -> Suspension | None:
        _check_run_id(run_id)
        row = self._run(
            lambda c: c.execute(
                "SELECT body FROM approval_runs WHERE run_id = %s AND NOT taken", (run_id,)
            ).fetchone()
        )
        return None if row is None else decode_suspension(run_id, bytes(row[0]))

    def close(self) -> None:
        """Close the PostgreSQL store when this store opened it."""
        if self._owned and hasattr(self, "store"):
            self.store.close()


def open_approval_store(
    url: str,
) -> SQLiteApprovalStore | PostgresApprovalStore | MemoryApprovalStore:
    """The approval store in the memory store `url` names (`open_memory_store`'s URLs:
    `sqlite:///runs.db`, `postgresql://...?schema=s`, `memory://` for one in memory);
    `close()` closes what it opened."""
    with _typed_errors():
        memory = open_memory_store(url)
    approvals: SQLiteApprovalStore | PostgresApprovalStore
    try:
        if isinstance(memory, SQLiteStore):
            approvals = SQLiteApprovalStore(memory)
        elif isinstance(memory, PostgresStore):
            approvals = PostgresApprovalStore(memory)
        else:
            memory.close()
            return MemoryApprovalStore()
    except BaseException:
        memory.close()
        raise
    approvals._owned = True  # opened here: closed with it
    return approvals
