"""The SQLite store's approximate search (`vector_index="hnsw"`): an HNSW index per large
scope, the exact scan for the others.

A scope (a thread, a resource, or the whole store) is searched exactly until it holds
`min_vectors` vectors; then an index of it is built in a background thread from a snapshot
of its rows (the searches stay exact meanwhile), saved to a file beside the database and
used from then on. Before each search the index reads what was written since its snapshot
(the rows whose write number is above `seen`, the tombstones of rows replaced or deleted
above `tseen`), so another connection's or process's writes are in it. A candidate is
looked up by its label in the table and kept only if its row is still there, in the
scope, and of the query's dimension count: a recall never returns another scope's
message, whatever the index holds. The kept ones are scored from the stored vector.

All of it under the store's lock, except the build itself (the builder installs its
index under the lock when done). Indexes past `cache_bytes` together are let go, least
recently searched first (their files stay, and are read again when searched).
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path

import msgspec

from interpreters.memory.ann import ApproxIndex, require_usearch
from interpreters.memory.rows import dimension_error, pack
from interpreters.memory.store import RecallHit, Vector

LAST_VSEQ = (
    "SELECT max(coalesce((SELECT max(vseq) FROM memory_vectors), 0), "
    "coalesce((SELECT max(vseq) FROM memory_vector_tombstones), 0))"
)
"""The last write number given to a vector row (a replaced or deleted row's included)."""
LAST_TSEQ = "SELECT coalesce(max(tseq), 0) FROM memory_vector_tombstones"
"""The last tombstone's number."""

_CATCH_UP_INLINE = 2_000
"""Rows a search adds to an index itself; more (an index file far behind the database)
are added in the background while searches stay exact."""

_OVERSAMPLE = 4
"""Candidates asked of the index per hit wanted (at least k + 16): room for candidates
the lookup drops."""

_JOIN_S = 30.0
"""How long `close` waits for a build to stop (it stops between two batches)."""


Scope = tuple[str, ...]


def _read_rows(
    conn: sqlite3.Connection, where: str, args: tuple[str | int, ...]
) -> list[tuple[int, int, bytes]]:
    rows: list[tuple[int, int, bytes]] = conn.execute(
        "SELECT vseq, dim, vec FROM memory_vectors" + where, args
    ).fetchall()
    return rows


class ApproxSearch:
    """The large scopes' indexes of one store (see the module's doc)."""

    def __init__(
        self,
        lock: threading.Lock,
        folder: Path | None,
        database: str,
        min_vectors: int,
        cache_bytes: int,
    ) -> None:
        require_usearch()
        self._lock = lock  # the store's
        self.folder = folder
        self.database = database
        self.min_vectors = min_vectors
        self.cache_bytes = cache_bytes
        self._indexes: OrderedDict[Scope, ApproxIndex] = OrderedDict()
        self._unindexable: set[Scope] = set()  # vectors of several dimension counts
        self._building: Scope | None = None
        self._builder: threading.Thread | None = None
        self._stop = threading.Event()
        self.build_errors: list[BaseException] = []

    # --- files -----------------------------------------------------------------------
    def path(self, scope: Scope) -> Path | None:
        if self.folder is None:
            return None
        name = hashlib.sha256(msgspec.json.encode(scope)).hexdigest()[:32]
        return self.folder / f"{name}.usearch"

    def _marks(self, conn: sqlite3.Connection) -> tuple[int, int]:
        (vseq,) = conn.execute(LAST_VSEQ).fetchone()
        (tseq,) = conn.execute(LAST_TSEQ).fetchone()
        return int(vseq), int(tseq)

    # --- search ----------------------------------------------------------------------
    def search(
        self,
        conn: sqlite3.Connection,
        scope: Scope,
        where: str,
        args: tuple[str, ...],
        query: Vector,
        k: int,
    ) -> tuple[RecallHit, ...] | None:
        """The k best of the scope by its index, or None: no index (yet) for it, or too
        few candidates survived the lookup (the caller scans exactly)."""
        index = self._indexes.pop(scope, None)
        if index is None:
            if scope in self._unindexable or scope == self._building:
                return None
            index = self._load(conn, scope)
            if index is None:
                return None
        if len(query) != index.dim:
            self._keep(index)
            raise dimension_error(index.dim, len(query))
        if not self._catch_up(conn, index, where, args):
            return None
        self._keep(index)
        if k == 0 or len(index) == 0:
            return ()
        labels = index.candidates(pack(query), min(len(index), max(k * _OVERSAMPLE, k + 16)))
        hits = self._verified(conn, scope, labels, query, k)
        return hits if len(hits) >= min(k, len(index)) else None

    def _load(self, conn: sqlite3.Connection, scope: Scope) -> ApproxIndex | None:
        path = self.path(scope)
        if path is None:
            return None
        vseq, tseq = self._marks(conn)
        return ApproxIndex.load(path, self.database, scope, vseq, tseq)

    def _catch_up(
        self, conn: sqlite3.Connection, index: ApproxIndex, where: str, args: tuple[str, ...]
    ) -> bool:
        """Bring `index` up to the database (one snapshot); False when that was handed
        to the builder (too much to add now) or the scope turned out unindexable."""
        conn.execute("BEGIN")
        try:
            gone = [v for (v,) in conn.execute(
                "SELECT vseq FROM memory_vector_tombstones WHERE tseq > ?", (index.tseen,)
            )]
            new = _read_rows(
                conn, where + (" AND" if where else " WHERE") + " vseq > ?", (*args, index.seen)
            )
            vseq, tseq = self._marks(conn)
        finally:
            conn.execute("COMMIT")
        index.remove(gone)
        if any(dim != index.dim for _, dim, _ in new):
            self._forget(index.scope)
            return False
        index.seen, index.tseen = max(index.seen, vseq), max(index.tseen, tseq)
        if len(new) > _CATCH_UP_INLINE and self._building is None:
            self._start(index, new)
            return False
        index.add([v for v, _, _ in new], b"".join(bytes(r) for _, _, r in new))
        return True

    def _verified(
        self, conn: sqlite3.Connection, scope: Scope, labels: list[int], query: Vector, k: int
    ) -> tuple[RecallHit, ...]:
        """The candidates whose rows are in the scope, scored from the stored vectors."""
        if not labels:
            return ()
        import numpy as np

        rows = conn.execute(
            "SELECT message_id, thread_id, resource_id, dim, vec FROM memory_vectors "
            f"WHERE vseq IN ({', '.join('?' * len(labels))})", labels,
        ).fetchall()
        kept = [r for r in rows if r[3] == len(query) and (
            scope[0] == "all" or (scope[0] == "thread" and r[1] == scope[1])
            or (scope[0] == "resource" and r[2] == scope[1]))]
        if not kept:
            return ()
        matrix = np.frombuffer(b"".join(bytes(r[4]) for r in kept), dtype="<f4")
        scores = np.einsum(
            "ij,j->i", matrix.reshape(len(kept), len(query)),
            np.frombuffer(pack(query), dtype="<f4"),
        )
        best = heapq.nsmallest(
            k, range(len(kept)), key=lambda i: (-float(scores[i]), str(kept[i][0]))
        )
        return tuple(RecallHit(message_id=kept[i][0], thread_id=kept[i][1],
                               score=float(scores[i])) for i in best)

    # --- building ----------------------------------------------------------------------
    def consider(
        self, conn: sqlite3.Connection, scope: Scope, where: str, args: tuple[str, ...],
        size: int,
    ) -> None:
        """After an exact search of `size` vectors: start building the scope's index when
        it is large enough (and no other build is running)."""
        if (size < self.min_vectors or scope in self._indexes or scope in self._unindexable
                or self._building is not None):
            return
        snapshot = self._snapshot(conn, scope, where, args)
        if snapshot is not None:
            index, rows = snapshot
            self._start(index, rows)

    def build_now(
        self, conn: sqlite3.Connection, scope: Scope, where: str, args: tuple[str, ...]
    ) -> int:
        """Build the scope's index here and now (whatever its size); how many vectors it
        holds (0: the scope is empty or holds vectors of several dimension counts)."""
        snapshot = self._snapshot(conn, scope, where, args)
        if snapshot is None:
            return 0
        index, rows = snapshot
        index.build([v for v, _, _ in rows], b"".join(bytes(r) for _, _, r in rows))
        self._save(index)
        self._indexes.pop(scope, None)
        self._keep(index)
        return len(index)

    def _snapshot(
        self, conn: sqlite3.Connection, scope: Scope, where: str, args: tuple[str, ...]
    ) -> tuple[ApproxIndex, list[tuple[int, int, bytes]]] | None:
        conn.execute("BEGIN")
        try:
            rows = _read_rows(conn, where, args)
            vseq, tseq = self._marks(conn)
        finally:
            conn.execute("COMMIT")
        if not rows:
            return None
        dim = rows[0][1]
        if any(d != dim for _, d, _ in rows):
            self._forget(scope)
            return None
        index = ApproxIndex(scope, dim)
        index.seen, index.tseen = vseq, tseq
        return index, rows

    def _start(self, index: ApproxIndex, rows: list[tuple[int, int, bytes]]) -> None:
        """Add `rows` to `index` in a background thread, then install it."""
        if self._building is not None:
            return
        self._building = index.scope
        labels = [v for v, _, _ in rows]
        raw = b"".join(bytes(r) for _, _, r in rows)

        def run() -> None:
            try:
                if not index.build(labels, raw, self._stop):
                    return
                self._save(index)
                with self._lock:
                    if not self._stop.is_set():
                        self._indexes.pop(index.scope, None)
                        self._keep(index)
            except Exception as e:  # kept for the caller to see; the scope stays exact
                with self._lock:
                    self.build_errors.append(e)
                    self._unindexable.add(index.scope)
            finally:
                with self._lock:
                    self._building = None

        self._builder = threading.Thread(target=run, name="vector-index-build", daemon=True)
        self._builder.start()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a running build; whether none runs now."""
        builder = self._builder
        if builder is not None:
            builder.join(timeout)
        return self._building is None

    # --- memory and files -------------------------------------------------------------
    def _keep(self, index: ApproxIndex) -> None:
        """Keep the index (most recently searched last), the oldest let go past the cap
        (an index larger than the cap alone is not kept, and its scope is scanned)."""
        if index.nbytes > self.cache_bytes:
            self._unindexable.add(index.scope)
            return
        self._indexes[index.scope] = index
        total = sum(i.nbytes for i in self._indexes.values())
        while total > self.cache_bytes and self._indexes:
            _, oldest = self._indexes.popitem(last=False)
            total -= oldest.nbytes

    def _forget(self, scope: Scope) -> None:
        self._unindexable.add(scope)
        self._indexes.pop(scope, None)

    def _save(self, index: ApproxIndex) -> None:
        """Saved when it changed; a folder that cannot be written only costs a rebuild
        after a restart."""
        path = self.path(index.scope)
        if path is not None and index.dirty:
            with contextlib.suppress(OSError):
                index.save(path, self.database)

    def close(self) -> None:
        """Stop a build, save what changed since it was saved. Called under the store's
        lock; the builder is waited for outside it."""
        self._stop.set()
        for index in self._indexes.values():
            self._save(index)
        self._indexes.clear()

    def join(self) -> None:
        builder = self._builder
        if builder is not None:
            builder.join(_JOIN_S)
