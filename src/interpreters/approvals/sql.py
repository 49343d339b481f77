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
(`SuspensionNotStorable` names the processor whose state does not: a run is never
silently lost); the processors' states come back as plain data (dicts, lists), and
`Approvals.take` types them again by the agent's processors (`typed_states`, a waiting
child run's by its own agent's). The memory writes a finished child run left in a
suspended tree are stored beside it with their classes and read back typed
(`interpreters.approvals.writes`). A stored
row that does not decode is `CorruptStoredSuspension`; a store that cannot be reached is
`ApprovalStoreUnavailable`. The tables are versioned on their own (`approval_schema`),
a newer version refused.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Generic, LiteralString, Protocol, TypeVar

import msgspec

from interpreters.approvals.audit import AuditRecord
from interpreters.approvals.store import CheckedApprovalStore, MemoryApprovalStore
from interpreters.approvals.writes import StoredWrite, UnknownWrite, with_writes, without_writes
from interpreters.memory.open import open_memory_store
from interpreters.memory.postgres import PostgresStore
from interpreters.memory.sqlite import SQLiteStore
from interpreters.memory.store import MemoryStoreError, MemoryStoreUnavailable
from pipeline.approval import RunNotSuspended, UnknownRun
from pipeline.values.result import Suspension

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

T = TypeVar("T")

APPROVAL_SCHEMA_VERSION = 3
"""The version of the approval tables; a store opened on an older one migrates it."""

_MIGRATION_LOCK = 0x61707072  # pg_advisory_xact_lock key of the approval tables

# Each entry takes the tables from the version before it to its own (index + 1).
SQLITE_MIGRATIONS: tuple[tuple[LiteralString, ...], ...] = (
    (  # 1: one row per run id; `body` NULL once taken
        "CREATE TABLE approval_runs (run_id TEXT PRIMARY KEY, body BLOB, "
        "taken INTEGER NOT NULL)",
    ),
    (  # 2: the run's owner, and the order runs were saved in, to list them by owner
        "ALTER TABLE approval_runs ADD COLUMN thread_id TEXT",
        "ALTER TABLE approval_runs ADD COLUMN resource_id TEXT",
        "ALTER TABLE approval_runs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX approval_runs_thread ON approval_runs (thread_id, seq)",
        "CREATE INDEX approval_runs_resource ON approval_runs (resource_id, seq)",
        "CREATE INDEX approval_runs_seq ON approval_runs (seq)",
    ),
    (  # 3: the audit trail, append-only (the triggers refuse a change or a removal)
        "CREATE TABLE approval_audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "run_id TEXT NOT NULL, thread_id TEXT, resource_id TEXT, outcome TEXT NOT NULL, "
        "at REAL NOT NULL, body BLOB NOT NULL)",
        "CREATE INDEX approval_audit_run ON approval_audit (run_id, seq)",
        "CREATE INDEX approval_audit_thread ON approval_audit (thread_id, seq)",
        "CREATE INDEX approval_audit_resource ON approval_audit (resource_id, seq)",
        "CREATE TRIGGER approval_audit_no_update BEFORE UPDATE ON approval_audit "
        "BEGIN SELECT RAISE(ABORT, 'approval audit records are never changed'); END",
        "CREATE TRIGGER approval_audit_no_delete BEFORE DELETE ON approval_audit "
        "BEGIN SELECT RAISE(ABORT, 'approval audit records are never removed'); END",
    ),
)
POSTGRES_MIGRATIONS: tuple[tuple[LiteralString, ...], ...] = (
    (
        "CREATE TABLE approval_runs (run_id text PRIMARY KEY, body bytea, "
        "taken boolean NOT NULL)",
    ),
    (
        "ALTER TABLE approval_runs ADD COLUMN thread_id text",
        "ALTER TABLE approval_runs ADD COLUMN resource_id text",
        "ALTER TABLE approval_runs ADD COLUMN seq bigint NOT NULL DEFAULT 0",
        "CREATE INDEX approval_runs_thread ON approval_runs (thread_id, seq)",
        "CREATE INDEX approval_runs_resource ON approval_runs (resource_id, seq)",
        "CREATE INDEX approval_runs_seq ON approval_runs (seq)",
    ),
    (
        "CREATE TABLE approval_audit (seq bigserial PRIMARY KEY, run_id text NOT NULL, "
        "thread_id text, resource_id text, outcome text NOT NULL, "
        "at double precision NOT NULL, body bytea NOT NULL)",
        "CREATE INDEX approval_audit_run ON approval_audit (run_id, seq)",
        "CREATE INDEX approval_audit_thread ON approval_audit (thread_id, seq)",
        "CREATE INDEX approval_audit_resource ON approval_audit (resource_id, seq)",
        "CREATE FUNCTION approval_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'approval audit records are never changed or removed'; "
        "END $$",
        "CREATE TRIGGER approval_audit_no_change BEFORE UPDATE OR DELETE ON approval_audit "
        "FOR EACH ROW EXECUTE FUNCTION approval_audit_append_only()",
        "CREATE TRIGGER approval_audit_no_truncate BEFORE TRUNCATE ON approval_audit "
        "FOR EACH STATEMENT EXECUTE FUNCTION approval_audit_append_only()",
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


class StoredTree(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A suspension that keeps finished children's writes, stored with them beside it
    (`interpreters.approvals.writes`: read back typed)."""

    suspension: Suspension
    writes: tuple[StoredWrite, ...]


_ENC = msgspec.msgpack.Encoder()
_DEC = msgspec.msgpack.Decoder(Suspension)
_TREE = msgspec.msgpack.Decoder(StoredTree)


def _decode_write(body: bytes, cls: type) -> object:
    return msgspec.msgpack.decode(body, type=cls)
_AUDIT_DEC = msgspec.msgpack.Decoder(AuditRecord)


def _audit_row(r: AuditRecord) -> tuple[object, ...]:
    return (r.run_id, r.thread_id, r.resource_id, r.outcome, r.at, _ENC.encode(r))


def decode_record(seq: object, body: object) -> AuditRecord:
    if not isinstance(body, bytes | bytearray | memoryview) or not isinstance(seq, int):
        raise ApprovalStoreError(f"audit record {seq!r} is not stored as one")
    try:
        r = _AUDIT_DEC.decode(bytes(body))
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise ApprovalStoreError(f"audit record {seq} does not decode: {e}") from None
    return msgspec.structs.replace(r, seq=seq)


def encode_suspension(s: Suspension) -> bytes:
    """`s` as stored; `SuspensionNotStorable` when it does not encode or decode back."""
    if not isinstance(s, Suspension):
        raise TypeError(f"an approval store keeps a Suspension, not {type(s).__name__}")
    try:
        bare, writes = without_writes(s, _ENC.encode)
        body = _ENC.encode(StoredTree(bare, writes) if writes else s)
        _read(body)
    except (TypeError, ValueError, OverflowError, msgspec.DecodeError) as e:
        raise SuspensionNotStorable(
            f"the suspension of run {s.run_id!r} cannot be stored: {_culprit(s)}{e}"
        ) from None
    return body


def _read(body: bytes) -> Suspension:
    """A stored suspension: plain, or with kept writes beside it (put back typed)."""
    try:
        return _DEC.decode(body)
    except msgspec.ValidationError as plain:
        try:
            tree = _TREE.decode(body)
        except msgspec.ValidationError:
            raise plain from None
        return with_writes(tree.suspension, tree.writes, _decode_write)


def _culprit(s: Suspension) -> str:
    """Which processor's state does not encode, if one does not."""
    for slot, state in enumerate(s.states):
        try:
            _ENC.encode(state)
        except (TypeError, ValueError, OverflowError):
            ids = s.processor_ids  # (none in a suspension made before they were kept)
            who = f"processor {ids[slot]!r}" if slot < len(ids) else f"slot {slot}"
            return f"the state of {who} (of type {type(state).__name__}): "
    return ""


def decode_suspension(run_id: str, body: bytes) -> Suspension:
    try:
        s = _read(body)
    except (msgspec.DecodeError, msgspec.ValidationError, UnknownWrite) as e:
        raise CorruptStoredSuspension(run_id, str(e)) from None
    if s.run_id != run_id:
        raise CorruptStoredSuspension(run_id, f"it is the suspension of run {s.run_id!r}")
    return s


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


# --- the store, over either database -----------------------------------------------------

Row = tuple[object, ...]
Execute = Callable[[LiteralString, tuple[object, ...]], list[Row]]
"""Runs one statement of the transaction; its rows."""


class _Closable(Protocol):
    def close(self) -> None: ...


St = TypeVar("St", bound=_Closable)


class _SQLApprovalStore(CheckedApprovalStore, Generic[St]):
    """`save`, `take`, `get` and `suspended` once for both databases: each class gives its
    statements and runs a body in one transaction. `store` (the memory store whose connections it
    uses) is closed with it when it was `owned` (opened for it)."""

    def __init__(self, store: St, owned: bool, migrate: Callable[[St], object]) -> None:
        self.store = store
        self._owned = owned
        try:
            with _typed_errors():
                migrate(store)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the memory store when this store opened it."""
        if self._owned:
            self.store.close()

    SAVE: LiteralString
    READ_FOR_TAKE: LiteralString  # locks the row where the database can
    MARK_TAKEN: LiteralString
    GET: LiteralString
    WAITING: LiteralString  # the condition of a row not taken
    PARAM: LiteralString  # the database's placeholder
    APPEND: LiteralString  # one audit record

    def _insert(self, execute: Execute, records: tuple[AuditRecord, ...]) -> None:
        for r in records:
            execute(self.APPEND, _audit_row(r))

    def _transaction(self, body: Callable[[Execute], T]) -> T:
        raise NotImplementedError

    def _save(self, s: Suspension, records: tuple[AuditRecord, ...]) -> None:
        body = encode_suspension(s)

        def write(execute: Execute) -> None:
            execute(self.SAVE, (s.run_id, body, s.thread_id, s.resource_id))
            self._insert(execute, records)

        self._transaction(write)

    def _take(
        self, run_id: str, records: tuple[AuditRecord, ...], expected: Suspension | None
    ) -> Suspension:
        def body(execute: Execute) -> Suspension:
            row = _first(execute(self.READ_FOR_TAKE, (run_id,)))
            if row is None:
                raise UnknownRun(f"no suspended run {run_id!r}")
            if row[1]:
                raise RunNotSuspended(f"run {run_id!r} was resumed already")
            s = decode_suspension(run_id, _bytes(run_id, row[0]))  # corrupt: raised, not taken
            if expected is not None and s != expected:
                raise RunNotSuspended(
                    f"run {run_id!r} was resumed (and suspended again) meanwhile"
                )
            execute(self.MARK_TAKEN, (run_id,))
            self._insert(execute, records)
            return s

        return self._transaction(body)

    def _append(self, records: tuple[AuditRecord, ...]) -> None:
        self._transaction(lambda execute: self._insert(execute, records))

    def _audit(
        self, run_id: str | None, thread_id: str | None, resource_id: str | None,
        after: int, limit: int,
    ) -> tuple[AuditRecord, ...]:
        where: LiteralString = "seq > " + self.PARAM
        args: list[object] = [after]
        for column, value in (("run_id", run_id), ("thread_id", thread_id),
                              ("resource_id", resource_id)):
            if value is not None:
                where += " AND " + _COLUMNS[column] + " = " + self.PARAM
                args.append(value)
        query = ("SELECT seq, body FROM approval_audit WHERE " + where
                 + " ORDER BY seq LIMIT " + self.PARAM)
        rows = self._transaction(lambda execute: execute(query, (*args, limit)))
        return tuple(decode_record(r[0], r[1]) for r in rows)

    def _get(self, run_id: str) -> Suspension | None:
        row = _first(self._transaction(lambda execute: execute(self.GET, (run_id,))))
        return None if row is None else decode_suspension(run_id, _bytes(run_id, row[0]))

    def _suspended(
        self, thread_id: str | None, resource_id: str | None, limit: int
    ) -> tuple[Suspension, ...]:
        where, args = self.WAITING, []
        if thread_id is not None:
            where += " AND thread_id = " + self.PARAM
            args.append(thread_id)
        if resource_id is not None:
            where += " AND resource_id = " + self.PARAM
            args.append(resource_id)
        query = ("SELECT run_id, body FROM approval_runs WHERE " + where
                 + " ORDER BY seq, run_id LIMIT " + self.PARAM)
        rows = self._transaction(lambda execute: execute(query, (*args, limit)))
        return tuple(decode_suspension(str(r[0]), _bytes(str(r[0]), r[1])) for r in rows)


_COLUMNS: dict[str, LiteralString] = {
    "run_id": "run_id", "thread_id": "thread_id", "resource_id": "resource_id"}


def _first(rows: list[Row]) -> Row | None:
    return rows[0] if rows else None


def _bytes(run_id: str, body: object) -> bytes:
    if not isinstance(body, bytes | bytearray | memoryview):
        raise CorruptStoredSuspension(run_id, f"its body is a {type(body).__name__}")
    return bytes(body)


# --- SQLite ------------------------------------------------------------------------------


def _sqlite_migrate(conn: sqlite3.Connection, path: str) -> None:
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'approval_schema'"
    ).fetchone()
    version = 0
    if found is None:
        conn.execute("CREATE TABLE approval_schema (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO approval_schema VALUES (0)")
    else:
        row = conn.execute("SELECT version FROM approval_schema").fetchone()
        version = row[0] if row is not None else 0
        if type(version) is not int or version < 0:  # (SQLite keeps any value anywhere)
            raise ApprovalStoreError(f"the approval tables of {path!r} have version "
                                     f"{version!r}, not a version number")
    _bring_up(version, SQLITE_MIGRATIONS, lambda q: conn.execute(q),
              "UPDATE approval_schema SET version = ?", lambda q, a: conn.execute(q, a))


def _bring_up(
    found: int,
    migrations: tuple[tuple[LiteralString, ...], ...],
    run: Callable[[LiteralString], object],
    set_version: LiteralString,
    run_with: Callable[[LiteralString, tuple[int]], object],
) -> None:
    """The tables taken from version `found` to this library's; a newer one refused."""
    if found > APPROVAL_SCHEMA_VERSION:
        raise ApprovalStoreError(
            f"the approval tables are version {found}, newer than this library's "
            f"({APPROVAL_SCHEMA_VERSION}): upgrade pipeline-agents to open them"
        )
    for steps in migrations[found:]:
        for sql in steps:
            run(sql)
    if found < APPROVAL_SCHEMA_VERSION:
        run_with(set_version, (APPROVAL_SCHEMA_VERSION,))


class SQLiteApprovalStore(_SQLApprovalStore[SQLiteStore]):
    """An `ApprovalStore` in SQLite: over `store` (a `SQLiteStore`, sharing its
    connection) or a path (a `SQLiteStore` opened on it, `timeout` seconds to wait for
    another writer of the file; closed by `close`)."""

    SAVE = ("INSERT INTO approval_runs (run_id, body, taken, thread_id, resource_id, seq) "
            "VALUES (?, ?, 0, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM approval_runs)) "
            "ON CONFLICT (run_id) DO UPDATE SET body = excluded.body, taken = 0, "
            "thread_id = excluded.thread_id, resource_id = excluded.resource_id, "
            "seq = excluded.seq")
    READ_FOR_TAKE = "SELECT body, taken FROM approval_runs WHERE run_id = ?"
    MARK_TAKEN = "UPDATE approval_runs SET body = NULL, taken = 1 WHERE run_id = ?"
    GET = "SELECT body FROM approval_runs WHERE run_id = ? AND taken = 0"
    WAITING = "taken = 0"
    PARAM = "?"
    APPEND = ("INSERT INTO approval_audit (run_id, thread_id, resource_id, outcome, at, body) "
              "VALUES (?, ?, ?, ?, ?, ?)")

    def __init__(
        self, store: SQLiteStore | str | os.PathLike[str], *, timeout: float = 5.0
    ) -> None:
        with _typed_errors():
            opened = store if isinstance(store, SQLiteStore) else SQLiteStore(
                store, timeout=timeout
            )
        super().__init__(opened, opened is not store,
                         lambda s: s._write(lambda c: _sqlite_migrate(c, s.path)))

    def _transaction(self, body: Callable[[Execute], T]) -> T:
        # BEGIN IMMEDIATE: one writer of the file at a time, so one taker of a run.
        with _typed_errors():
            return self.store._write(lambda c: body(lambda q, a: c.execute(q, a).fetchall()))


# --- PostgreSQL --------------------------------------------------------------------------


def _postgres_migrate(conn: psycopg.Connection[TupleRow]) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
    conn.execute("CREATE TABLE IF NOT EXISTS approval_schema (version integer NOT NULL)")
    row = conn.execute("SELECT version FROM approval_schema").fetchone()
    if row is None:
        conn.execute("INSERT INTO approval_schema VALUES (0)")
    version = 0 if row is None else int(str(row[0]))
    _bring_up(version, POSTGRES_MIGRATIONS, lambda q: conn.execute(q),
              "UPDATE approval_schema SET version = %s", lambda q, a: conn.execute(q, a))


def _rows(
    conn: psycopg.Connection[TupleRow], query: LiteralString, args: tuple[object, ...]
) -> list[Row]:
    cur = conn.execute(query, args)
    return [] if cur.description is None else cur.fetchall()  # (none: not a SELECT)


class PostgresApprovalStore(_SQLApprovalStore[PostgresStore]):
    """An `ApprovalStore` in PostgreSQL: over `store` (a `PostgresStore`, sharing its
    pool and schema) or a URL (a `PostgresStore` opened on it with `schema`, `pool_size`
    and `timeout`; closed by `close`)."""

    SAVE = ("INSERT INTO approval_runs (run_id, body, taken, thread_id, resource_id, seq) "
            "VALUES (%s, %s, false, %s, %s, "
            "(SELECT COALESCE(MAX(seq), 0) + 1 FROM approval_runs)) "
            "ON CONFLICT (run_id) DO UPDATE SET body = excluded.body, taken = false, "
            "thread_id = excluded.thread_id, resource_id = excluded.resource_id, "
            "seq = excluded.seq")
    # FOR UPDATE: a second taker waits for the first to commit, then reads it taken.
    READ_FOR_TAKE = "SELECT body, taken FROM approval_runs WHERE run_id = %s FOR UPDATE"
    MARK_TAKEN = "UPDATE approval_runs SET body = NULL, taken = true WHERE run_id = %s"
    GET = "SELECT body FROM approval_runs WHERE run_id = %s AND NOT taken"
    WAITING = "NOT taken"
    PARAM = "%s"
    APPEND = ("INSERT INTO approval_audit (run_id, thread_id, resource_id, outcome, at, body) "
              "VALUES (%s, %s, %s, %s, %s, %s)")

    def __init__(
        self,
        store: PostgresStore | str,
        *,
        schema: str = "public",
        pool_size: int = 4,
        timeout: float = 10.0,
    ) -> None:
        with _typed_errors():
            opened = store if isinstance(store, PostgresStore) else PostgresStore(
                store, schema=schema, pool_size=pool_size, timeout=timeout
            )
        super().__init__(opened, opened is not store, lambda s: s._run(_postgres_migrate))

    def _transaction(self, body: Callable[[Execute], T]) -> T:
        with _typed_errors():
            return self.store._run(lambda c: body(lambda q, a: _rows(c, q, a)))


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
