"""Memory stores: where the memory processors' requests are answered from.

`MemoryStore` (sync) and `AsyncMemoryStore` (async) are the protocol every store follows;
`InMemoryStore` is the one for tests, `SQLiteStore` the embedded default and
`interpreters.memory.postgres.PostgresStore` (PostgreSQL with pgvector, the `postgres`
extra) the one to scale out; `open_memory_store(url)` opens any of them by URL.
Embedders are in `interpreters.memory.embed`.
"""

from interpreters.memory.handlers import NoEmbedder, async_memory_handlers, memory_handlers
from interpreters.memory.in_thread import AsyncStoreInThread
from interpreters.memory.open import open_async_memory_store, open_memory_store
from interpreters.memory.sqlite import AsyncSQLiteStore, SQLiteStore
from interpreters.memory.store import (
    SCHEMA_VERSION,
    AsyncMemoryStore,
    CorruptStoredMessage,
    Embedder,
    HashEmbedder,
    InMemoryStore,
    MemoryStore,
    MemoryStoreError,
    MemoryStoreUnavailable,
    RecallHit,
    Thread,
    ThreadOwnerMismatch,
    working_memory_key,
)

__all__ = [
    "SCHEMA_VERSION",
    "AsyncMemoryStore",
    "AsyncSQLiteStore",
    "AsyncStoreInThread",
    "CorruptStoredMessage",
    "Embedder",
    "HashEmbedder",
    "InMemoryStore",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryStoreUnavailable",
    "NoEmbedder",
    "RecallHit",
    "SQLiteStore",
    "Thread",
    "ThreadOwnerMismatch",
    "async_memory_handlers",
    "memory_handlers",
    "open_async_memory_store",
    "open_memory_store",
    "working_memory_key",
]
