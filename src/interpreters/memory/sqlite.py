"""The embedded memory store: SQLite (stdlib `sqlite3`), a file or ":memory:", no server.

One connection per store, shared by the store's threads under a lock; several stores
(threads or processes) may open one file: it is in WAL mode, each write is one
`BEGIN IMMEDIATE` transaction (so a run's writes are all there or not at all, and a batch
of messages contiguous in the thread's order), and a busy file is waited for up to
`timeout` seconds, then `MemoryStoreUnavailable`. Messages are ordered by their run's
start (`turn_at`), then an autoincrement sequence, and unique per (thread, message id),
so two writers neither lose nor duplicate one.

The schema is versioned (`memory_schema`); opening a file of an older version migrates it
in one transaction, a newer one is refused. Vectors are float32 rows scored exactly
(`interpreters.memory.scan`): numpy when importable, else Python; see docs/memory-stores.md
for the figures and why not sqlite-vec by default. With `vector_index="hnsw"` a large
scope is searched by an approximate index instead (`interpreters.memory.approx`). A
vector replaced or deleted leaves a tombstone (a trigger, whoever wrote), so what is kept
of a scope between searches follows every writer of the file.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, TypedDict, TypeVar, Unpack, get_args

from interpreters.memory.ann import require_usearch
from interpreters.memory.approx import LAST_TSEQ, LAST_VSEQ, ApproxSearch
from interpreters.memory.in_thread import AsyncStoreInThread
from interpreters.memory.rows import (
    Queries,
    check_schema,
    decode_messages,
    encode_message,
    pack,
)
from interpreters.memory.scan import Index, Row, Scorer, numpy_available, top_k
from interpreters.memory.store import (
    SCHEMA_VERSION,
    CheckedStore,
    MemoryStoreError,
    MemoryStoreUnavailable,
    RecallHit,
    Thread,
    Vector,
    owned,
)
from interpreters.memory.writes import NewMessages, NewVectors, StoreWrite
from pipeline.values.messages import Message

VectorSearch = Literal["auto", "numpy", "python"]
_VECTOR_SEARCH: tuple[str, ...] = get_args(VectorSearch)
VectorIndex = Literal["exact", "hnsw"]
_VECTOR_INDEX: tuple[str, ...] = get_args(VectorIndex)
HNSW_MIN_VECTORS = 20_000
"""A scope searched by its HNSW index from this many vectors on (exactly below it): below
it the scan costs about what the index does (bench/recall.py) and needs no build."""

T = TypeVar("T")

_SQL = Queries("?")
_EARLIER_IN_TURN = (
    "SELECT message_id, body FROM memory_messages WHERE thread_id = ? AND turn_at = ? "
    "AND seq <= ? ORDER BY seq DESC LIMIT ?")
_EARLIER_TURNS = (
    "SELECT message_id, body FROM memory_messages WHERE thread_id = ? AND turn_at < ? "
    "ORDER BY turn_at DESC, seq DESC LIMIT ?")
_LATER_IN_TURN = (
    "SELECT message_id, body FROM memory_messages WHERE thread_id = ? AND turn_at = ? "
    "AND seq > ? ORDER BY seq LIMIT ?")
_LATER_TURNS = (
    "SELECT message_id, body FROM memory_messages WHERE thread_id = ? AND turn_at > ? "
    "ORDER BY turn_at, seq LIMIT ?")
_IN_CHUNK = 500  # ids per IN (...) query, under SQLite's bound on parameters

# Each entry takes the schema from the version before it to its own (index + 1).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 1: threads, messages in order, working memory, one vector per message
        "CREATE TABLE memory_threads (id TEXT PRIMARY KEY, resource_id TEXT, "
        "created_at REAL NOT NULL)",
        "CREATE TABLE memory_messages (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "thread_id TEXT NOT NULL, message_id TEXT NOT NULL, body BLOB NOT NULL, "
        "UNIQUE (thread_id, message_id))",
        "CREATE INDEX memory_messages_order ON memory_messages (thread_id, seq)",
        "CREATE TABLE memory_working (key TEXT PRIMARY KEY, text TEXT NOT NULL)",
        "CREATE TABLE memory_vectors (thread_id TEXT NOT NULL, message_id TEXT NOT NULL, "
        "resource_id TEXT, vec BLOB NOT NULL, PRIMARY KEY (thread_id, message_id))",
    ),
    (  # 2: each vector's dimensions and write sequence number beside it (a search
        # reads what was written since its last), the scopes indexed by them
        "ALTER TABLE memory_vectors ADD COLUMN dim INTEGER NOT NULL DEFAULT 0",
        "UPDATE memory_vectors SET dim = length(vec) / 4",
        "ALTER TABLE memory_vectors ADD COLUMN vseq INTEGER NOT NULL DEFAULT 0",
        "UPDATE memory_vectors SET vseq = rowid",
        "CREATE INDEX memory_vectors_thread ON memory_vectors (thread_id, vseq)",
        "CREATE INDEX memory_vectors_resource ON memory_vectors (resource_id, vseq)",
        "CREATE INDEX memory_vectors_seq ON memory_vectors (vseq)",
    ),
    (  # 3: messages filed by when their run began; a vector's resource its thread's owner
        # (earlier ones took the resource a save named), bumped for the searches' caches
        "ALTER TABLE memory_messages ADD COLUMN turn_at REAL NOT NULL DEFAULT 0",
        "DROP INDEX memory_messages_order",
        "CREATE INDEX memory_messages_order ON memory_messages (thread_id, turn_at, seq)",
        "UPDATE memory_vectors SET resource_id = (SELECT t.resource_id FROM memory_threads t "
        "WHERE t.id = memory_vectors.thread_id), vseq = (SELECT max(vseq) FROM memory_vectors) "
        "+ rowid WHERE resource_id IS NOT (SELECT t.resource_id FROM memory_threads t WHERE "
        "t.id = memory_vectors.thread_id)",
    ),
    (  # 4: a tombstone for each vector replaced or deleted (by this library or any other
        # writer of the file), so what a search keeps of a scope between searches, in
        # memory or in a file, drops it; the database's identity, which those files name
        "CREATE TABLE memory_vector_tombstones (tseq INTEGER PRIMARY KEY AUTOINCREMENT, "
        "thread_id TEXT NOT NULL, message_id TEXT NOT NULL, vseq INTEGER NOT NULL)",
        "CREATE INDEX memory_vector_tombstones_vseq ON memory_vector_tombstones (vseq)",
        "CREATE TRIGGER memory_vectors_replaced AFTER UPDATE ON memory_vectors BEGIN "
        "INSERT INTO memory_vector_tombstones (thread_id, message_id, vseq) "
        "VALUES (old.thread_id, old.message_id, old.vseq); END",
        "CREATE TRIGGER memory_vectors_deleted AFTER DELETE ON memory_vectors BEGIN "
        "INSERT INTO memory_vector_tombstones (thread_id, message_id, vseq) "
        "VALUES (old.thread_id, old.message_id, old.vseq); END",
        "CREATE TABLE memory_identity (id TEXT NOT NULL)",
        "INSERT INTO memory_identity VALUES (lower(hex(randomblob(16))))",
    ),
)
assert len(MIGRATIONS) == SCHEMA_VERSION


def schema_version(conn: sqlite3.Connection) -> int:
    """The version of the schema in the database (0: none yet)."""
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'memory_schema'"
    ).fetchone()
    if found is None:
        return 0
    row = conn.execute("SELECT version FROM memory_schema").fetchone()
    if row is None:
        return 0
    if type(row[0]) is not int or row[0] < 0:  # (SQLite keeps any value in any column)
        raise MemoryStoreError(f"its schema version is {row[0]!r}, not a version number")
    return row[0]


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring the schema to `target` in one transaction; returns the version found.
    MemoryStoreError for a database of a newer version than this library knows, or a
    version that is no version number."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = schema_version(conn)
        check_schema(found)
        if found == 0:
            conn.execute("CREATE TABLE memory_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO memory_schema VALUES (0)")
        for steps in MIGRATIONS[found:target]:
            for sql in steps:
                conn.execute(sql)
        if target > found:
            conn.execute("UPDATE memory_schema SET version = ?", (target,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found


def _scorer(vector_search: object) -> Scorer:
    if vector_search not in _VECTOR_SEARCH:
        raise ValueError(
            f"vector_search must be one of {', '.join(_VECTOR_SEARCH)}, not {vector_search!r}"
        )
    if vector_search == "numpy" and not numpy_available():
        raise ValueError("vector_search='numpy' needs numpy (pip install numpy)")
    if vector_search == "python":
        return "python"
    return "numpy" if numpy_available() else "python"


def _check_bytes(name: str, value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"{name} must be an int of at least 0, got {value!r}")
    return value


class SQLiteStore(CheckedStore):
    """A `MemoryStore` in SQLite: `path` a file (created when missing) or ":memory:".

    `timeout`: seconds a write waits for another writer of the same file before
    `MemoryStoreUnavailable`. `vector_search`: how vectors are scored ("auto": numpy when
    importable, else Python). `cache_bytes`: how much memory the searched scopes' vectors
    may hold between searches (0: none; each search reads its scope from the file).
    `vector_index`: "exact" (every search scans its scope) or "hnsw" (a scope of at least
    `hnsw_min_vectors` vectors is searched by an approximate index, the memory-ann extra;
    `interpreters.memory.approx`), whose indexes may hold `hnsw_cache_bytes` together.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        timeout: float = 5.0,
        vector_search: VectorSearch = "auto",
        cache_bytes: int = 256 << 20,
        vector_index: VectorIndex = "exact",
        hnsw_min_vectors: int = HNSW_MIN_VECTORS,
        hnsw_cache_bytes: int = 1 << 30,
    ) -> None:
        _check_bytes("cache_bytes", cache_bytes)
        _check_bytes("hnsw_cache_bytes", hnsw_cache_bytes)
        if vector_index not in _VECTOR_INDEX:
            raise ValueError(
                f"vector_index must be one of {', '.join(_VECTOR_INDEX)}, not {vector_index!r}"
            )
        if type(hnsw_min_vectors) is not int or hnsw_min_vectors < 1:
            raise ValueError(
                f"hnsw_min_vectors must be an int of at least 1, got {hnsw_min_vectors!r}"
            )
        if vector_index == "hnsw":
            require_usearch()  # before the file is touched
        self._cache_bytes = cache_bytes
        self._indexes: OrderedDict[tuple[str, ...], Index] = OrderedDict()
        if type(timeout) not in (int, float) or not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self.scorer: Scorer = _scorer(vector_search)
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        try:
            conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise MemoryStoreUnavailable(
                f"cannot open the SQLite store {self.path!r}: {e}"
            ) from None
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            migrate(conn)
        except sqlite3.Error as e:
            conn.close()
            raise MemoryStoreUnavailable(
                f"cannot open the SQLite store {self.path!r}: {e}"
            ) from None
        except MemoryStoreError as e:  # a schema it cannot use: the file named
            conn.close()
            raise type(e)(f"the SQLite store {self.path!r}: {e}") from None
        except BaseException:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn
        self._approx: ApproxSearch | None = None
        if vector_index == "hnsw":
            (database,) = conn.execute("SELECT id FROM memory_identity").fetchone()
            in_file = self.path not in ("", ":memory:") and not self.path.startswith("file:")
            self._approx = ApproxSearch(
                self._lock, Path(self.path + ".vector-index") if in_file else None,
                str(database), hnsw_min_vectors, hnsw_cache_bytes,
            )

    # --- plumbing ----------------------------------------------------------------------
    @contextmanager
    def _use(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                raise MemoryStoreUnavailable(f"the SQLite store {self.path!r} is closed")
            try:
                yield self._conn
            except sqlite3.Error as e:
                raise MemoryStoreUnavailable(f"the SQLite store {self.path!r}: {e}") from None

    def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """`body` in one write transaction: all of it or none."""
        with self._use() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = body(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

    # --- threads -----------------------------------------------------------------------
    @staticmethod
    def _ensure(
        conn: sqlite3.Connection, thread_id: str, resource_id: str | None, created_at: float
    ) -> Thread:
        row = conn.execute(_SQL.thread, (thread_id,)).fetchone()
        if row is None:
            conn.execute(
                "INSERT INTO memory_threads VALUES (?, ?, ?)",
                (thread_id, resource_id, created_at),
            )
            return Thread(id=thread_id, resource_id=resource_id, created_at=created_at)
        return owned(Thread(id=thread_id, resource_id=row[0], created_at=row[1]), resource_id)

    def _ensure_thread(
        self, thread_id: str, resource_id: str | None, created_at: float
    ) -> Thread:
        return self._write(lambda c: self._ensure(c, thread_id, resource_id, created_at))

    def _get_thread(self, thread_id: str) -> Thread | None:
        with self._use() as conn:
            row = conn.execute(_SQL.thread, (thread_id,)).fetchone()
        return None if row is None else Thread(id=thread_id, resource_id=row[0], created_at=row[1])

    # --- messages ----------------------------------------------------------------------
    def _last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        with self._use() as conn:
            rows = conn.execute(
                "SELECT message_id, body FROM memory_messages WHERE thread_id = ? "
                "ORDER BY turn_at DESC, seq DESC LIMIT ?",
                (thread_id, limit),
            ).fetchall()
        rows.reverse()
        return decode_messages(thread_id, rows)

    def _messages_by_id(self, thread_id: str, wanted: list[str]) -> tuple[Message, ...]:
        found: list[tuple[float, int, str, bytes]] = []
        with self._use() as conn:
            for i in range(0, len(wanted), _IN_CHUNK):
                chunk = wanted[i : i + _IN_CHUNK]
                found += conn.execute(
                    "SELECT turn_at, seq, message_id, body FROM memory_messages WHERE "
                    f"thread_id = ? AND message_id IN ({', '.join('?' * len(chunk))})",
                    (thread_id, *chunk),
                ).fetchall()
        found.sort(key=lambda r: (r[0], r[1]))
        rows = [(mid, body) for _, _, mid, body in found]
        return decode_messages(thread_id, rows)

    def _neighbours(
        self, thread_id: str, message_id: str, before: int, after: int
    ) -> tuple[Message, ...]:
        with self._use() as conn:
            found = conn.execute(
                "SELECT turn_at, seq FROM memory_messages WHERE thread_id = ? "
                "AND message_id = ?",
                (thread_id, message_id),
            ).fetchone()
            if found is None:
                return ()
            at, seq = found
            # Within the hit's turn, then past it: each an index seek. (A bound on the row
            # value (turn_at, seq) would seek on turn_at alone and walk every message of
            # the turn beyond the hit: all of a thread saved in one turn.)
            earlier = conn.execute(_EARLIER_IN_TURN, (thread_id, at, seq, before + 1)).fetchall()
            if len(earlier) <= before:
                earlier += conn.execute(
                    _EARLIER_TURNS, (thread_id, at, before + 1 - len(earlier))).fetchall()
            later = []
            if after:
                later = conn.execute(_LATER_IN_TURN, (thread_id, at, seq, after)).fetchall()
                if len(later) < after:
                    later += conn.execute(
                        _LATER_TURNS, (thread_id, at, after - len(later))).fetchall()
        earlier.reverse()
        return decode_messages(thread_id, earlier + later)

    # --- working memory ----------------------------------------------------------------
    def _get_working_memory(self, key: str) -> str | None:
        with self._use() as conn:
            row = conn.execute(_SQL.get_working, (key,)).fetchone()
        return None if row is None else str(row[0])

    # --- vectors -----------------------------------------------------------------------
    def _commit(self, writes: tuple[StoreWrite, ...]) -> list[int]:
        # Encoded before the file is locked.
        encoded = [
            [(m.id, encode_message(m)) for m in w.messages] if isinstance(w, NewMessages)
            else [] for w in writes
        ]

        def body(conn: sqlite3.Connection) -> list[int]:
            return [self._apply(conn, w, rows) for w, rows in zip(writes, encoded, strict=True)]

        return self._write(body)

    def _apply(
        self, conn: sqlite3.Connection, w: StoreWrite, rows: list[tuple[str, bytes]]
    ) -> int:
        """One write, in the transaction; how many messages it added."""
        if isinstance(w, NewMessages):
            self._ensure(conn, w.thread_id, w.resource_id, w.created_at)
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO memory_messages (thread_id, message_id, body, turn_at) "
                "VALUES (?, ?, ?, ?)",
                [(w.thread_id, mid, body, w.created_at) for mid, body in rows],
            )
            return conn.total_changes - before
        if isinstance(w, NewVectors):
            owner = self._ensure(conn, w.thread_id, w.resource_id, 0.0).resource_id
            # Numbered after every row before (writes are one at a time), so a search
            # that has read up to n reads what came since with `vseq > n`.
            # (a deleted row's number is never given again: an index that read it
            # would take the new row for one it has)
            (last,) = conn.execute(LAST_VSEQ).fetchone()
            conn.executemany(
                "INSERT INTO memory_vectors (thread_id, message_id, resource_id, vec, dim, vseq) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (thread_id, message_id) DO UPDATE SET "
                "resource_id = excluded.resource_id, vec = excluded.vec, dim = excluded.dim, "
                "vseq = excluded.vseq",
                [(w.thread_id, mid, owner, pack(v), len(v), last + 1 + i)
                 for i, (mid, v) in enumerate(w.vectors)],
            )
            return 0
        if w.thread_id is not None:
            self._ensure(conn, w.thread_id, w.resource_id, 0.0)
        conn.execute(_SQL.set_working, (w.key, w.text))
        return 0

    def _search(
        self, query: Vector, k: int, thread_id: str | None, resource_id: str | None
    ) -> tuple[RecallHit, ...]:
        scope, where, args = _scope(thread_id, resource_id)
        with self._use() as conn:
            if self._approx is not None:
                hits = self._approx.search(conn, scope, where, args, query, k)
                if hits is not None:
                    self._indexes.pop(scope, None)  # the scan's copy is not needed now
                    return hits
            if self._cache_bytes:
                found = self._indexed(conn, scope, where, args, query, k)
                if found is not None:
                    hits, size = found
                    if self._approx is not None:
                        self._approx.consider(conn, scope, where, args, size)
                    return hits
            rows: list[Row] = conn.execute(
                "SELECT message_id, thread_id, dim, vec FROM memory_vectors" + where, args
            ).fetchall()
            if self._approx is not None:
                self._approx.consider(conn, scope, where, args, len(rows))
        return top_k(rows, query, k, self.scorer)

    def build_vector_index(
        self, *, thread_id: str | None = None, resource_id: str | None = None
    ) -> int:
        """Build the HNSW index of a scope (a thread, else a resource, else the whole
        store) now, whatever its size, rather than in the background once a search finds
        it large; how many vectors it holds (0: none, or of several dimension counts).
        ValueError unless the store was opened with `vector_index="hnsw"`."""
        if self._approx is None:
            raise ValueError("build_vector_index needs a store opened with vector_index='hnsw'")
        scope, where, args = _scope(thread_id, resource_id)
        with self._use() as conn:
            return self._approx.build_now(conn, scope, where, args)

    def wait_for_vector_index(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a background build of an HNSW index; whether
        none is running now (True at once for an exact store)."""
        return True if self._approx is None else self._approx.wait(timeout)

    def _indexed(
        self,
        conn: sqlite3.Connection,
        scope: tuple[str, ...],
        where: str,
        args: tuple[str, ...],
        query: Vector,
        k: int,
    ) -> tuple[tuple[RecallHit, ...], int] | None:
        """The search over the scope's vectors in memory, brought up to date, and how
        many there are; None when the scope holds vectors of more than one dimension
        count (not kept)."""
        index = self._indexes.pop(scope, None)
        select = "SELECT message_id, thread_id, resource_id, dim, vec, vseq FROM memory_vectors"
        conn.execute("BEGIN")  # one snapshot: the tombstones and the rows agree
        try:
            if index is None:
                index = Index(self.scorer)
                rows = conn.execute(select + where, args).fetchall()
                gone = []
                (index.tseen,) = conn.execute(LAST_TSEQ).fetchone()
            else:
                gone = conn.execute(
                    "SELECT thread_id, message_id, tseq FROM memory_vector_tombstones "
                    "WHERE tseq > ?", (index.tseen,),
                ).fetchall()
                if scope[0] == "thread":  # a row never leaves its thread
                    rows = conn.execute(
                        select + where + " AND vseq > ?", (*args, index.seen)
                    ).fetchall()
                else:  # a row may have left the resource: every row written since
                    rows = conn.execute(select + " WHERE vseq > ?", (index.seen,)).fetchall()
        finally:
            conn.execute("COMMIT")
        for tid, mid, tseq in gone:  # replaced (the new row follows) or deleted
            index.drop(tid, mid)
            index.tseen = max(index.tseen, tseq)
        for mid, tid, rid, dim, vec, vseq in rows:
            if scope[0] == "resource" and rid != scope[1]:
                index.drop(tid, mid)
            elif not index.fits(dim):
                return None
            else:
                index.put(tid, mid, bytes(vec))
            index.seen = max(index.seen, vseq)
        hits = index.top(query, k)
        self._keep(scope, index)
        return hits, len(index.ids)

    def _keep(self, scope: tuple[str, ...], index: Index) -> None:
        """Keep the index (most recently used last), the oldest let go past the cap."""
        if index.nbytes > self._cache_bytes:
            return
        self._indexes[scope] = index
        total = sum(i.nbytes for i in self._indexes.values())
        while total > self._cache_bytes:
            _, oldest = self._indexes.popitem(last=False)
            total -= oldest.nbytes

    def close(self) -> None:
        """Close the file; an HNSW build running is stopped, the indexes changed since
        they were saved are saved."""
        with self._lock:
            self._indexes.clear()
            if self._approx is not None:
                self._approx.close()
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        if self._approx is not None:
            self._approx.join()


def _scope(
    thread_id: str | None, resource_id: str | None
) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """A search's scope: its key, its WHERE clause and the clause's arguments."""
    if thread_id is not None:
        return ("thread", thread_id), " WHERE thread_id = ?", (thread_id,)
    if resource_id is not None:
        return ("resource", resource_id), " WHERE resource_id = ?", (resource_id,)
    return ("all",), "", ()


class SQLiteOptions(TypedDict, total=False):
    """`SQLiteStore`'s options after `path` (its docstring says them), which
    `AsyncSQLiteStore` passes on as they are."""

    timeout: float
    vector_search: VectorSearch
    cache_bytes: int
    vector_index: VectorIndex
    hnsw_min_vectors: int
    hnsw_cache_bytes: int


class AsyncSQLiteStore(AsyncStoreInThread):
    """The async `SQLiteStore`: each call in a worker thread (`anyio.to_thread`), one at a
    time (the store has one connection)."""

    def __init__(
        self, path: str | os.PathLike[str] = ":memory:", **options: Unpack[SQLiteOptions]
    ) -> None:
        store = SQLiteStore(path, **options)
        super().__init__(store, threads=1)
        self.sync: SQLiteStore = store
