"""The memory requests answered from a store and an embedder.

    handlers = memory_handlers(InMemoryStore(), HashEmbedder())
    Simulator(model, handlers=handlers).run(agent, "hi", thread_id="t1")

`memory_handlers` is for the sync interpreters; `async_memory_handlers` for the async
ones, over an `AsyncMemoryStore` or a sync store (then each call runs in a worker
thread, so the event loop never waits on the store). A run's writes come as one
`CommitWrites` (the loop collects what its `process_approved` hooks asked to write),
which the store keeps in one transaction: all of them or none. A store's or an
embedder's error reaches the processor that asked (the commit's fails the run), which
fails the run closed unless told otherwise.

The answers are written once, awaited (`_async/answers.py`); the sync ones are
generated from them (`scripts/unasync.py`).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio.to_thread
from typing_extensions import TypeIs

from interpreters.core.handlers import Handlers
from interpreters.memory._async.answers import AsyncAnswers
from interpreters.memory._async.protocol import AsyncMemoryStore
from interpreters.memory._sync.answers import Answers
from interpreters.memory._sync.protocol import MemoryStore
from interpreters.memory.answer import NoEmbedder
from interpreters.memory.store import Embedder

__all__ = ["NoEmbedder", "async_memory_handlers", "memory_handlers"]

T = TypeVar("T")
R = TypeVar("R")


def memory_handlers(store: MemoryStore, embedder: Embedder | None = None) -> Handlers:
    """Handlers answering the memory requests from `store` (and `Embed` from `embedder`),
    for the sync interpreters (and the simulator). Add your own to the result with
    `.add(...)`."""
    return Answers(store, embedder).handlers()


def _in_thread(fn: Callable[[T], R]) -> Callable[[T], Awaitable[R]]:
    async def run(request: T) -> R:
        return await anyio.to_thread.run_sync(fn, request)

    return run


def _is_async(store: MemoryStore | AsyncMemoryStore) -> TypeIs[AsyncMemoryStore]:
    return inspect.iscoroutinefunction(store.last_messages)


def async_memory_handlers(
    store: MemoryStore | AsyncMemoryStore, embedder: Embedder | None = None
) -> Handlers:
    """Handlers for the async interpreters: over an `AsyncMemoryStore`, awaited; over a
    sync `MemoryStore`, each request answered in a worker thread."""
    if not _is_async(store):
        # The sync answers, each run in a worker thread (their types checked above).
        return Handlers.of({
            t: _in_thread(fn) for t, fn in memory_handlers(store, embedder).items()
        })
    return AsyncAnswers(store, embedder).handlers()
