"""A memory store from one URL, so switching stores is changing a string.

- `sqlite:///chat.db` (a path relative to the working directory), `sqlite:////var/x.db`
  (absolute), `sqlite://` or `sqlite:///:memory:` (in memory); query: `timeout`,
  `vector_search`, `vector_index` (exact or hnsw).
- `postgresql://user:pw@host:5432/db` (or `postgres://`); query: `schema`, `pool_size`,
  `timeout` (taken out; the rest goes to libpq as it is, `sslmode=require` say).
- `memory://`: the in-memory store (tests).

A URL that is none of these is a ValueError that never repeats its password.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from interpreters.memory._async.protocol import AsyncMemoryStore
from interpreters.memory._sync.protocol import MemoryStore
from interpreters.memory.in_thread import AsyncStoreInThread
from interpreters.memory.postgres import redacted
from interpreters.memory.sqlite import VectorIndex, VectorSearch
from interpreters.memory.store import InMemoryStore

SCHEMES = ("sqlite", "postgresql", "postgres", "memory")


def _seconds(url: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"timeout={value!r} in {redacted(url)} is not a number") from None
    return seconds


def _split(url: str) -> tuple[str, dict[str, str], str]:
    """(scheme, our options, what is left for the server)."""
    if not isinstance(url, str):
        raise TypeError(f"a store URL is a str, not {type(url).__name__}")
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ValueError(f"{redacted(url)} is not a valid store URL") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ValueError(
            f"{redacted(url)} is not a memory store URL: it starts with one of "
            + ", ".join(f"{s}://" for s in SCHEMES)
        )
    ours = {"schema", "pool_size", "timeout"} if scheme.startswith("postgres") else {
        "timeout", "vector_search", "vector_index"}
    options: dict[str, str] = {}
    rest: list[tuple[str, str]] = []
    for key, value in query:
        if key in ours:
            if key in options:
                raise ValueError(f"{key} is given twice in {redacted(url)}")
            options[key] = value
        elif scheme.startswith("postgres"):
            rest.append((key, value))
        else:
            raise ValueError(
                f"unknown option {key!r} in {redacted(url)} (known: {', '.join(sorted(ours))})"
            )
    left = urlunsplit(parts._replace(query=urlencode(rest)))
    return scheme, options, left


def _sqlite_path(url: str) -> str:
    parts = urlsplit(url)  # (valid: _split read it)
    if parts.netloc:
        raise ValueError(
            f"{url} names a host; a SQLite URL is sqlite:///relative.db or sqlite:////abs.db"
        )
    path = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
    return path or ":memory:"


def open_memory_store(url: str) -> MemoryStore:
    """The store `url` names, opened (its schema migrated when older)."""
    scheme, options, left = _split(url)
    if scheme == "memory":
        if left.rstrip("/") != "memory:":
            raise ValueError(f"the in-memory store's URL is memory://, not {redacted(url)}")
        return InMemoryStore()
    if scheme == "sqlite":
        from interpreters.memory.sqlite import SQLiteStore

        search = options.get("vector_search", "auto")
        if search not in ("auto", "numpy", "python"):
            raise ValueError(f"vector_search={search!r} in {url}: auto, numpy or python")
        vector_search: VectorSearch = (
            "numpy" if search == "numpy" else "python" if search == "python" else "auto"
        )
        index = options.get("vector_index", "exact")
        if index not in ("exact", "hnsw"):
            raise ValueError(f"vector_index={index!r} in {url}: exact or hnsw")
        vector_index: VectorIndex = "hnsw" if index == "hnsw" else "exact"
        return SQLiteStore(
            _sqlite_path(url),
            timeout=_seconds(url, options.get("timeout", "5")),
            vector_search=vector_search,
            vector_index=vector_index,
        )
    from interpreters.memory.postgres import PostgresStore

    pool = options.get("pool_size", "4")
    if not pool.isdigit():
        raise ValueError(f"pool_size={pool!r} in {redacted(url)} is not a whole number")
    return PostgresStore(
        left,
        schema=options.get("schema", "public"),
        pool_size=int(pool),
        timeout=_seconds(url, options.get("timeout", "10")),
    )


def open_async_memory_store(url: str) -> AsyncMemoryStore:
    """The async store `url` names: the same store, each call in a worker thread (as many
    at once as a PostgreSQL pool has connections, one for SQLite)."""
    store = open_memory_store(url)
    threads = 1
    from interpreters.memory.postgres import PostgresStore

    if isinstance(store, PostgresStore):
        threads = store.pool_size
    return AsyncStoreInThread(store, threads=threads)
