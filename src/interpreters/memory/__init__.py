"""Memory stores: where the memory processors' requests are answered from.

`MemoryStore` (sync) and `AsyncMemoryStore` (async) are the protocol every store follows;
`InMemoryStore` is the one for tests. The embedded default (SQLite) and the one to scale
out (PostgreSQL with pgvector) live beside it.
"""

from interpreters.memory.handlers import NoEmbedder, async_memory_handlers, memory_handlers
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
    "CorruptStoredMessage",
    "Embedder",
    "HashEmbedder",
    "InMemoryStore",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryStoreUnavailable",
    "NoEmbedder",
    "RecallHit",
    "Thread",
    "ThreadOwnerMismatch",
    "async_memory_handlers",
    "memory_handlers",
    "working_memory_key",
]
