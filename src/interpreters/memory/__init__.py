"""Memory stores: where the memory processors' requests are answered from.

`MemoryStore` (sync) and `AsyncMemoryStore` (async) are the protocol every store follows;
`InMemoryStore` is the one for tests, `SQLiteStore` the embedded default and
`interpreters.memory.postgres.PostgresStore` (PostgreSQL with pgvector, the `postgres`
extra) the one to scale out; `open_memory_store(url)` opens any of them by URL.
Embedders are in `interpreters.memory.embed`.
"""

from interpreters.memory._async.protocol import AsyncMemoryStore
from interpreters.memory._sync.protocol import MemoryStore
from interpreters.memory.ann import VectorIndexNotInstalled
from interpreters.memory.handlers import NoEmbedder, async_memory_handlers, memory_handlers
from interpreters.memory.in_thread import AsyncStoreInThread
from interpreters.memory.open import open_async_memory_store, open_memory_store
from interpreters.memory.sqlite import AsyncSQLiteStore, SQLiteStore
from interpreters.memory.store import (
    SCHEMA_VERSION,
    CorruptStoredMessage,
    Embedder,
    HashEmbedder,
    InMemoryStore,
    MemoryStoreError,
    MemoryStoreUnavailable,
    RecallHit,
    Thread,
    ThreadOwnerMismatch,
    working_memory_key,
)
from interpreters.memory.writes import NewMessages, NewVectors, NewWorkingMemory, StoreWrite

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
    "NewMessages",
    "NewVectors",
    "NewWorkingMemory",
    "NoEmbedder",
    "RecallHit",
    "SQLiteStore",
    "StoreWrite",
    "Thread",
    "ThreadOwnerMismatch",
    "VectorIndexNotInstalled",
    "async_memory_handlers",
    "memory_handlers",
    "open_async_memory_store",
    "open_memory_store",
    "working_memory_key",
]
