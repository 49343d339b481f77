"""The memory store to scale out: PostgreSQL with pgvector, shared by several processes.

psycopg 3 with a connection pool (the `postgres` extra). Every call is one transaction
(a run's writes too: all there or none). Messages are ordered by their run's start
(`turn_at`), then one sequence, and unique per (thread, message id); a save locks its
thread's row first, so concurrent writers of one thread (in any process) queue behind each
other: each batch is contiguous, all there or not at all, nothing lost, nothing twice.

Vectors are pgvector `vector`s, stored normalized, scored by inner product (a cosine).
A search within a thread or a resource is exact, over that scope's rows (an index finds
them, pgvector scores them in C); a search over the whole store uses an HNSW index, one
per dimension count (made when vectors of that size are first saved). The store works on
any PostgreSQL where `CREATE EXTENSION vector` can run; where it cannot, opening it is a
`MemoryStoreError` that says so. The schema is versioned like SQLite's and migrated under
an advisory lock, so processes opening one database at once migrate it once.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, LiteralString, TypedDict, TypeVar, Unpack
from urllib.parse import urlsplit, urlunsplit

from interpreters.memory.in_thread import AsyncStoreInThread
from interpreters.memory.rows import (
    Queries,
    check_schema,
    decode_messages,
    dimension_error,
    encode_message,
)
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

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool
    from psycopg.rows import TupleRow

T = TypeVar("T")
_SQL = Queries("%s")

HNSW_MAX_DIM = 2000
"""pgvector's HNSW index takes `vector`s of at most this many dimensions; larger ones are
searched exactly."""

_MIGRATION_LOCK = 0x6D656D6F  # pg_advisory_xact_lock key: one migration at a time

MIGRATIONS: tuple[tuple[LiteralString, ...], ...] = (
    (  # 1: threads, messages in order, working memory, one vector per message
        "CREATE TABLE memory_threads (id text PRIMARY KEY, resource_id text, "
        "created_at double precision NOT NULL)",
        "CREATE TABLE memory_messages (seq bigserial PRIMARY KEY, thread_id text NOT NULL, "
        "message_id text NOT NULL, body bytea NOT NULL, UNIQUE (thread_id, message_id))",
        "CREATE INDEX memory_messages_order ON memory_messages (thread_id, seq)",
        "CREATE TABLE memory_working (key text PRIMARY KEY, text text NOT NULL)",
        "CREATE TABLE memory_vectors (thread_id text NOT NULL, message_id text NOT NULL, "
        "resource_id text, embedding vector NOT NULL, PRIMARY KEY (thread_id, message_id))",
    ),
    (  # 2: each vector's dimensions beside it, and the resource scope indexed
        "ALTER TABLE memory_vectors ADD COLUMN dim integer NOT NULL DEFAULT 0",
        "UPDATE memory_vectors SET dim = vector_dims(embedding)",
        "CREATE INDEX memory_vectors_resource ON memory_vectors (resource_id)",
    ),
    (  # 3: messages filed by when their run began; a vector's resource its thread's owner
        # (earlier ones took the resource a save named)
        "ALTER TABLE memory_messages ADD COLUMN turn_at double precision NOT NULL DEFAULT 0",
        "DROP INDEX memory_messages_order",
        "CREATE INDEX memory_messages_order ON memory_messages (thread_id, turn_at, seq)",
        "UPDATE memory_vectors v SET resource_id = (SELECT t.resource_id FROM memory_threads t "
        "WHERE t.id = v.thread_id) WHERE v.resource_id IS DISTINCT FROM (SELECT t.resource_id "
        "FROM memory_threads t WHERE t.id = v.thread_id)",
    ),
    (),  # 4: nothing here (the SQLite store's tombstones; pgvector's index follows deletes)
)
assert len(MIGRATIONS) == SCHEMA_VERSION

_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def redacted(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an invalid URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[2]}"))


def _literal(vector: Vector) -> str:
    return "[" + ",".join(format(x, ".9g") for x in vector) + "]"  # float4: 9 digits


def _import_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise MemoryStoreError(
            "the PostgreSQL store needs psycopg and psycopg-pool: "
            "pip install 'pipeline-agents[postgres]'"
        ) from None


def vector_schema(conn: psycopg.Connection[TupleRow]) -> str:
    """The schema the vector extension's types are in."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'vector'"
    ).fetchone()
    if row is None:
        raise MemoryStoreError("the vector extension is not installed in this database")
    return str(row[0])


def migrate(conn: psycopg.Connection[TupleRow], target: int = SCHEMA_VERSION) -> int:
    """The extension, then the schema brought to `target`, in one transaction under an
    advisory lock; returns the version found."""
    import psycopg

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        try:
            with conn.transaction():
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
        except (psycopg.errors.FeatureNotSupported, psycopg.errors.UndefinedFile,
                psycopg.errors.InsufficientPrivilege) as e:
            raise MemoryStoreError(
                "the PostgreSQL server cannot give the memory store the pgvector extension "
                f"(CREATE EXTENSION vector: {e.diag.message_primary}); install pgvector on "
                "the server, or have an administrator run CREATE EXTENSION vector"
            ) from None
        # Where the extension already was (another schema, say) its types are found too.
        conn.execute(
            "SELECT set_config('search_path', current_setting('search_path') || ', ' "
            "|| quote_ident(%s), true)",
            (vector_schema(conn),),
        )
        conn.execute("CREATE TABLE IF NOT EXISTS memory_schema (version integer NOT NULL)")
        row = conn.execute("SELECT version FROM memory_schema").fetchone()
        if row is None:
            conn.execute("INSERT INTO memory_schema VALUES (0)")
        found = 0 if row is None else int(str(row[0]))
        check_schema(found)
        for steps in MIGRATIONS[found:target]:
            for sql in steps:
                conn.execute(sql)
        if target > found:
            conn.execute("UPDATE memory_schema SET version = %s", (target,))
    return found


class PostgresStore(CheckedStore):
    """A `MemoryStore` in PostgreSQL with pgvector, at `url` (`postgresql://...`).

    `schema`: the schema its tables live in (created when missing; the extension's type
    is found in `public`). `pool_size`: connections at most. `timeout`: seconds to wait
    for a connection (the server down or every connection busy) before
    `MemoryStoreUnavailable`; opening waits as long for the first one.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str = "public",
        pool_size: int = 4,
        timeout: float = 10.0,
    ) -> None:
        if not isinstance(url, str):
            raise TypeError(f"url must be a str, not {type(url).__name__}")
        if not isinstance(schema, str) or not _IDENT.fullmatch(schema):
            raise ValueError(
                f"schema must be a lower-case SQL name (letters, digits, _), not {schema!r}"
            )
        if type(pool_size) is not int or pool_size < 1:
            raise ValueError(f"pool_size must be an int of at least 1, got {pool_size!r}")
        if type(timeout) not in (int, float) or not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        _import_psycopg()
        import psycopg
        import psycopg_pool

        self.url = redacted(url)
        self.schema = schema
        self.pool_size = pool_size
        self._indexed: set[int] = set()
        self._closed = False
        connect_timeout = max(1, round(timeout))
        try:
            # The schema made and migrated over one connection first: the pool's search
            # path names the schema the extension's types live in, known only then.
            with (
                psycopg.connect(url, connect_timeout=connect_timeout) as conn,
                conn.transaction(),
            ):
                # Under migrate's lock, so stores opening a new schema at once make it once.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                conn.execute(
                    psycopg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                        psycopg.sql.Identifier(schema)
                    )
                )
                conn.execute(
                    psycopg.sql.SQL("SET LOCAL search_path TO {}").format(
                        psycopg.sql.Identifier(schema)
                    )
                )
                migrate(conn)
                types = vector_schema(conn)
        except psycopg.OperationalError as e:
            raise MemoryStoreUnavailable(
                f"cannot reach the PostgreSQL store at {self.url}: {e}"
            ) from None
        path = ",".join(dict.fromkeys((schema, types)))
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[TupleRow]] = (
            psycopg_pool.ConnectionPool(
                url,
                min_size=1,
                max_size=pool_size,
                timeout=timeout,
                open=False,
                check=psycopg_pool.ConnectionPool.check_connection,
                kwargs={"options": f"-c search_path={path}",
                        "connect_timeout": connect_timeout},
                name="memory-store",
            )
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
        except psycopg_pool.PoolTimeout as e:
            self._pool.close()
            raise MemoryStoreUnavailable(
                f"cannot reach the PostgreSQL store at {self.url}: {e}"
            ) from None

    # --- plumbing ----------------------------------------------------------------------
    def _run(self, body: Callable[[psycopg.Connection[TupleRow]], T]) -> T:
        """`body` in one transaction: all of it or none."""
        import psycopg
        import psycopg_pool

        if self._closed:
            raise MemoryStoreUnavailable(f"the PostgreSQL store at {self.url} is closed")
        try:
            with self._pool.connection() as conn, conn.transaction():
                return body(conn)
        except (psycopg_pool.PoolTimeout, psycopg.OperationalError,
                psycopg.InterfaceError) as e:
            raise MemoryStoreUnavailable(f"the PostgreSQL store at {self.url}: {e}") from None
        except psycopg.Error as e:
            raise MemoryStoreError(f"the PostgreSQL store at {self.url}: {e}") from None

    # --- threads -----------------------------------------------------------------------
    @staticmethod
    def _ensure(
        conn: psycopg.Connection[TupleRow],
        thread_id: str,
        resource_id: str | None,
        created_at: float,
    ) -> Thread:
        # Insert-or-nothing, then lock the row: writers of one thread queue here.
        conn.execute(
            "INSERT INTO memory_threads VALUES (%s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (thread_id, resource_id, created_at),
        )
        row = conn.execute(
            "SELECT resource_id, created_at FROM memory_threads WHERE id = %s FOR UPDATE",
            (thread_id,),
        ).fetchone()
        assert row is not None
        thread = Thread(id=thread_id, resource_id=row[0], created_at=float(row[1]))
        return owned(thread, resource_id)

    def _ensure_thread(
        self, thread_id: str, resource_id: str | None, created_at: float
    ) -> Thread:
        return self._run(lambda c: self._ensure(c, thread_id, resource_id, created_at))

    def _get_thread(self, thread_id: str) -> Thread | None:
        row = self._run(lambda c: c.execute(_SQL.thread, (thread_id,)).fetchone())
        if row is None:
            return None
        return Thread(id=thread_id, resource_id=row[0], created_at=float(row[1]))

    # --- messages ----------------------------------------------------------------------
    def _last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT message_id, body FROM (SELECT turn_at, seq, message_id, body FROM "
                "memory_messages WHERE thread_id = %s ORDER BY turn_at DESC, seq DESC "
                "LIMIT %s) AS newest ORDER BY turn_at, seq",
                (thread_id, limit),
            ).fetchall()
        )
        return decode_messages(thread_id, rows)

    def _messages_by_id(self, thread_id: str, wanted: list[str]) -> tuple[Message, ...]:
        rows = self._run(
            lambda c: c.execute(
                "SELECT message_id, body FROM memory_messages WHERE thread_id = %s "
                "AND message_id = ANY(%s) ORDER BY turn_at, seq",
                (thread_id, wanted),
            ).fetchall()
        )
        return decode_messages(thread_id, rows)

    def _neighbours(
        self, thread_id: str, message_id: str, before: int, after: int
    ) -> tuple[Message, ...]:
        rows = self._run(
            lambda c: c.execute(
                "WITH hit AS (SELECT turn_at, seq FROM memory_messages WHERE thread_id = %(t)s "
                "AND message_id = %(m)s) "
                "SELECT message_id, body FROM ("
                "(SELECT turn_at, seq, message_id, body FROM memory_messages "
                "WHERE thread_id = %(t)s AND (turn_at, seq) <= (SELECT turn_at, seq FROM hit) "
                "ORDER BY turn_at DESC, seq DESC LIMIT %(b)s) UNION ALL "
                "(SELECT turn_at, seq, message_id, body FROM memory_messages "
                "WHERE thread_id = %(t)s AND (turn_at, seq) > (SELECT turn_at, seq FROM hit) "
                "ORDER BY turn_at, seq LIMIT %(a)s)) AS around "
                "ORDER BY turn_at, seq",
                {"t": thread_id, "m": message_id, "b": before + 1, "a": after},
            ).fetchall()
        )
        return decode_messages(thread_id, rows)

    # --- working memory ----------------------------------------------------------------
    def _get_working_memory(self, key: str) -> str | None:
        row = self._run(lambda c: c.execute(_SQL.get_working, (key,)).fetchone())
        return None if row is None else str(row[0])

    # --- vectors -----------------------------------------------------------------------
    def _index(self, conn: psycopg.Connection[TupleRow], dim: int) -> None:
        """The HNSW index for vectors of `dim` dimensions (once its transaction commits,
        `save_vectors` notes it made)."""
        from psycopg import sql

        if dim in self._indexed or dim > HNSW_MAX_DIM:
            return
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {name} ON memory_vectors USING hnsw "
                "((embedding::vector({dim})) vector_ip_ops) WHERE dim = {dim}"
            ).format(name=sql.Identifier(f"memory_vectors_hnsw_{dim}"), dim=sql.Literal(dim))
        )

    def _commit(self, writes: tuple[StoreWrite, ...]) -> list[int]:
        # Encoded before a connection is taken.
        encoded = [
            ([m.id for m in w.messages], [encode_message(m) for m in w.messages])
            if isinstance(w, NewMessages) else ([], []) for w in writes
        ]
        dims = sorted({len(v) for w in writes if isinstance(w, NewVectors) for _, v in w.vectors})

        def body(conn: psycopg.Connection[TupleRow]) -> list[int]:
            for dim in dims:
                self._index(conn, dim)
            return [self._apply(conn, w, *rows) for w, rows in zip(writes, encoded, strict=True)]

        counts = self._run(body)
        self._indexed.update(dims)
        return counts

    def _apply(
        self, conn: psycopg.Connection[TupleRow], w: StoreWrite, ids: list[str],
        bodies: list[bytes],
    ) -> int:
        """One write, in the transaction; how many messages it added."""
        if isinstance(w, NewMessages):
            self._ensure(conn, w.thread_id, w.resource_id, w.created_at)
            if not ids:
                return 0
            cur = conn.execute(
                "INSERT INTO memory_messages (thread_id, message_id, body, turn_at) "
                "SELECT %s, m.id, m.body, %s FROM unnest(%s::text[], %s::bytea[]) "
                "WITH ORDINALITY AS m(id, body, n) ORDER BY m.n "
                "ON CONFLICT (thread_id, message_id) DO NOTHING",
                (w.thread_id, w.created_at, ids, bodies),
            )
            return max(cur.rowcount, 0)
        if isinstance(w, NewVectors):
            owner = self._ensure(conn, w.thread_id, w.resource_id, 0.0).resource_id
            if w.vectors:
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO memory_vectors (thread_id, message_id, resource_id, "
                        "embedding, dim) VALUES (%s, %s, %s, %s::vector, %s) "
                        "ON CONFLICT (thread_id, message_id) DO UPDATE SET "
                        "resource_id = excluded.resource_id, embedding = excluded.embedding, "
                        "dim = excluded.dim",
                        [(w.thread_id, mid, owner, _literal(v), len(v)) for mid, v in w.vectors],
                    )
            return 0
        if w.thread_id is not None:
            self._ensure(conn, w.thread_id, w.resource_id, 0.0)
        conn.execute(_SQL.set_working, (w.key, w.text))
        return 0

    def _search(
        self, query: Vector, k: int, thread_id: str | None, resource_id: str | None
    ) -> tuple[RecallHit, ...]:
        from psycopg import sql

        if k == 0:
            return ()
        dim = len(query)
        if thread_id is not None:
            scope: sql.Composable = sql.SQL("thread_id = {}").format(sql.Literal(thread_id))
        elif resource_id is not None:
            scope = sql.SQL("resource_id = {}").format(sql.Literal(resource_id))
        else:
            scope = sql.SQL("TRUE")
        typed = sql.SQL("embedding::vector({})").format(sql.Literal(dim))
        q = sql.SQL("{}::vector({})").format(sql.Literal(_literal(query)), sql.Literal(dim))
        if thread_id is not None or resource_id is not None:
            # Exact: the scope's rows (found by an index), scored in a materialized step
            # the HNSW index cannot stand in for.
            statement = sql.SQL(
                "WITH scored AS MATERIALIZED (SELECT message_id, thread_id, "
                "-({typed} <#> {q}) AS score FROM memory_vectors WHERE {scope} "
                "AND dim = {dim}) SELECT message_id, thread_id, score FROM scored "
                "ORDER BY score DESC, message_id LIMIT {k}"
            )
        else:
            statement = sql.SQL(
                "SELECT message_id, thread_id, -({typed} <#> {q}) AS score FROM memory_vectors "
                "WHERE {scope} AND dim = {dim} ORDER BY {typed} <#> {q} LIMIT {k}"
            )
        stmt = statement.format(
            typed=typed, q=q, scope=scope, dim=sql.Literal(dim), k=sql.Literal(k)
        )
        other = sql.SQL("SELECT dim FROM memory_vectors WHERE {scope} AND dim <> {dim} LIMIT 1")

        def body(conn: psycopg.Connection[TupleRow]) -> list[TupleRow]:
            odd = conn.execute(other.format(scope=scope, dim=sql.Literal(dim))).fetchone()
            if odd is not None:
                raise dimension_error(int(odd[0]), dim)
            if thread_id is None and resource_id is None:
                conn.execute(
                    sql.SQL("SET LOCAL hnsw.ef_search = {}").format(
                        sql.Literal(max(40, min(1000, 4 * k)))
                    )
                )
            return conn.execute(stmt).fetchall()

        rows = self._run(body)
        hits = [RecallHit(message_id=str(r[0]), thread_id=str(r[1]), score=float(r[2]))
                for r in rows]
        hits.sort(key=lambda h: (-h.score, h.message_id))
        return tuple(hits)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.close()


class PostgresOptions(TypedDict, total=False):
    """`PostgresStore`'s options after `url` (its docstring says them), which
    `AsyncPostgresStore` passes on as they are."""

    schema: str
    pool_size: int
    timeout: float


class AsyncPostgresStore(AsyncStoreInThread):
    """The async `PostgresStore`: each call in a worker thread, as many at once as the
    pool has connections."""

    def __init__(self, url: str, **options: Unpack[PostgresOptions]) -> None:
        store = PostgresStore(url, **options)
        super().__init__(store, threads=store.pool_size)
        self.sync: PostgresStore = store
