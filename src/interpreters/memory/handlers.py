"""The memory requests answered from a store and an embedder.

    handlers = memory_handlers(InMemoryStore(), HashEmbedder())
    Simulator(model, handlers=handlers).run(agent, "hi", thread_id="t1")

`memory_handlers` is for the sync interpreters; `async_memory_handlers` for the async
ones, over an `AsyncMemoryStore` or a sync store (then each call runs in a worker
thread, so the event loop never waits on the store). A store's or an embedder's error
reaches the processor that asked, which fails the run closed unless told otherwise.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio.to_thread
from typing_extensions import TypeIs

from interpreters.core.handlers import Handlers
from interpreters.memory.store import (
    AsyncMemoryStore,
    Embedder,
    MemoryStore,
    Thread,
    ThreadOwnerMismatch,
    working_memory_key,
)
from pipeline.processors.memory.requests import (
    Embed,
    GetWorkingMemory,
    IndexMessages,
    LoadHistory,
    Recall,
    Recalled,
    SaveMessages,
    SetWorkingMemory,
    Vector,
)
from pipeline.values.messages import Message

__all__ = ["NoEmbedder", "async_memory_handlers", "memory_handlers"]

T = TypeVar("T")
R = TypeVar("R")


class NoEmbedder(LookupError):
    """An `Embed` request reached handlers made without an embedder."""


def _vectors(embedder: Embedder | None, texts: tuple[str, ...]) -> tuple[Vector, ...]:
    if embedder is None:
        raise NoEmbedder("semantic recall needs an embedder: memory_handlers(store, embedder)")
    out = tuple(tuple(float(x) for x in v) for v in embedder.embed(texts))
    if len(out) != len(texts):
        raise ValueError(f"the embedder gave {len(out)} vectors for {len(texts)} texts")
    return out


def _check_owner(
    r: Recall | GetWorkingMemory | SetWorkingMemory, thread: Thread | None
) -> None:
    """What belongs to a thread is read and written only for the resource that owns it
    (as its history is: `ensure_thread`)."""
    if thread is not None and r.resource_id is not None and thread.resource_id != r.resource_id:
        raise ThreadOwnerMismatch(thread.id, thread.resource_id, r.resource_id)


def _wm_key(r: GetWorkingMemory | SetWorkingMemory) -> str:
    if r.scope == "resource":
        return working_memory_key(resource_id=r.resource_id)
    return working_memory_key(thread_id=r.thread_id)


class _Sync:
    """The answers over a sync store: one method per request."""

    def __init__(self, store: MemoryStore, embedder: Embedder | None) -> None:
        self.store = store
        self.embedder = embedder

    def load(self, r: LoadHistory) -> tuple[Message, ...]:
        self.store.ensure_thread(r.thread_id, resource_id=r.resource_id, created_at=0.0)
        return self.store.last_messages(r.thread_id, r.limit)

    def save(self, r: SaveMessages) -> int:
        return self.store.save_messages(
            r.thread_id, r.messages, resource_id=r.resource_id, created_at=r.created_at
        )

    def embed(self, r: Embed) -> tuple[Vector, ...]:
        return _vectors(self.embedder, r.texts)

    def index(self, r: IndexMessages) -> int:
        self.store.save_vectors(r.thread_id, r.vectors, resource_id=r.resource_id)
        return len(r.vectors)

    def recall(self, r: Recall) -> Recalled:
        if r.thread_id is not None:
            _check_owner(r, self.store.get_thread(r.thread_id))
        hits = self.store.search(
            r.vector, k=r.k, thread_id=r.thread_id, resource_id=r.resource_id
        )
        return tuple(
            group for h in hits
            if (group := self.store.neighbours(
                h.thread_id, h.message_id, before=r.before, after=r.after))
        )

    def get_working(self, r: GetWorkingMemory) -> str:
        if r.scope == "thread":
            _check_owner(r, self.store.get_thread(r.thread_id))
        return self.store.get_working_memory(_wm_key(r)) or ""

    def set_working(self, r: SetWorkingMemory) -> bool:
        if r.scope == "thread":
            _check_owner(r, self.store.get_thread(r.thread_id))
        self.store.set_working_memory(_wm_key(r), r.text)
        return True


def memory_handlers(store: MemoryStore, embedder: Embedder | None = None) -> Handlers:
    """Handlers answering the memory requests from `store` (and `Embed` from `embedder`),
    for the sync interpreters (and the simulator). Add your own to the result with
    `.add(...)`."""
    return _registry(_Sync(store, embedder))


def _registry(s: _Sync | _Async) -> Handlers:
    return (
        Handlers()
        .add(LoadHistory, s.load)
        .add(SaveMessages, s.save)
        .add(Embed, s.embed)
        .add(IndexMessages, s.index)
        .add(Recall, s.recall)
        .add(GetWorkingMemory, s.get_working)
        .add(SetWorkingMemory, s.set_working)
    )


def _in_thread(fn: Callable[[T], R]) -> Callable[[T], Awaitable[R]]:
    async def run(request: T) -> R:
        return await anyio.to_thread.run_sync(fn, request)

    return run


class _Async:
    """The answers over an async store (the embedder, sync, runs in a worker thread)."""

    def __init__(self, store: AsyncMemoryStore, embedder: Embedder | None) -> None:
        self.store = store
        self.embedder = embedder

    async def load(self, r: LoadHistory) -> tuple[Message, ...]:
        await self.store.ensure_thread(r.thread_id, resource_id=r.resource_id, created_at=0.0)
        return await self.store.last_messages(r.thread_id, r.limit)

    async def save(self, r: SaveMessages) -> int:
        return await self.store.save_messages(
            r.thread_id, r.messages, resource_id=r.resource_id, created_at=r.created_at
        )

    async def embed(self, r: Embed) -> tuple[Vector, ...]:
        return await anyio.to_thread.run_sync(_vectors, self.embedder, r.texts)

    async def index(self, r: IndexMessages) -> int:
        await self.store.save_vectors(r.thread_id, r.vectors, resource_id=r.resource_id)
        return len(r.vectors)

    async def recall(self, r: Recall) -> Recalled:
        if r.thread_id is not None:
            _check_owner(r, await self.store.get_thread(r.thread_id))
        hits = await self.store.search(
            r.vector, k=r.k, thread_id=r.thread_id, resource_id=r.resource_id
        )
        groups = []
        for h in hits:
            group = await self.store.neighbours(
                h.thread_id, h.message_id, before=r.before, after=r.after
            )
            if group:
                groups.append(group)
        return tuple(groups)

    async def get_working(self, r: GetWorkingMemory) -> str:
        if r.scope == "thread":
            _check_owner(r, await self.store.get_thread(r.thread_id))
        return (await self.store.get_working_memory(_wm_key(r))) or ""

    async def set_working(self, r: SetWorkingMemory) -> bool:
        if r.scope == "thread":
            _check_owner(r, await self.store.get_thread(r.thread_id))
        await self.store.set_working_memory(_wm_key(r), r.text)
        return True


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
    return _registry(_Async(store, embedder))
