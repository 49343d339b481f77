"""An async store over a sync one: each call runs in a worker thread (`anyio.to_thread`).

Used for SQLite (stdlib `sqlite3` is blocking) and PostgreSQL (psycopg's own async
connections run on asyncio only; a thread serves asyncio and trio alike). A call that is
cancelled while its thread runs waits for the thread: a write is never left half-done.
"""

from __future__ import annotations

from collections.abc import Iterable

import anyio
import anyio.to_thread

from interpreters.memory.store import MemoryStore, RecallHit, Thread, Vector
from pipeline.messages import Message


class AsyncStoreInThread:
    """An `AsyncMemoryStore` over any `MemoryStore`; at most `threads` of its calls run at
    once (or as many as `limiter` lets, when one is given to share)."""

    def __init__(
        self,
        store: MemoryStore,
        *,
        threads: int = 1,
        limiter: anyio.CapacityLimiter | None = None,
    ) -> None:
        if type(threads) is not int or threads < 1:
            raise ValueError(f"threads must be an int of at least 1, got {threads!r}")
        self.store = store
        self._threads = threads
        self._made = limiter

    @property
    def _limiter(self) -> anyio.CapacityLimiter:
        # Made at the first call, in the event loop that uses the store.
        if self._made is None:
            self._made = anyio.CapacityLimiter(self._threads)
        return self._made

    async def ensure_thread(
        self, thread_id: str, *, resource_id: str | None, created_at: float
    ) -> Thread:
        return await anyio.to_thread.run_sync(
            lambda: self.store.ensure_thread(
                thread_id, resource_id=resource_id, created_at=created_at
            ),
            limiter=self._limiter,
        )

    async def get_thread(self, thread_id: str) -> Thread | None:
        return await anyio.to_thread.run_sync(
            self.store.get_thread, thread_id, limiter=self._limiter
        )

    async def last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        return await anyio.to_thread.run_sync(
            self.store.last_messages, thread_id, limit, limiter=self._limiter
        )

    async def messages_by_id(self, thread_id: str, ids: Iterable[str]) -> tuple[Message, ...]:
        wanted = tuple(ids)
        return await anyio.to_thread.run_sync(
            self.store.messages_by_id, thread_id, wanted, limiter=self._limiter
        )

    async def neighbours(
        self, thread_id: str, message_id: str, *, before: int, after: int
    ) -> tuple[Message, ...]:
        return await anyio.to_thread.run_sync(
            lambda: self.store.neighbours(thread_id, message_id, before=before, after=after),
            limiter=self._limiter,
        )

    async def save_messages(
        self,
        thread_id: str,
        messages: Iterable[Message],
        *,
        resource_id: str | None,
        created_at: float,
    ) -> int:
        batch = tuple(messages)  # read here, not in the worker thread
        return await anyio.to_thread.run_sync(
            lambda: self.store.save_messages(
                thread_id, batch, resource_id=resource_id, created_at=created_at
            ),
            limiter=self._limiter,
        )

    async def get_working_memory(self, key: str) -> str | None:
        return await anyio.to_thread.run_sync(
            self.store.get_working_memory, key, limiter=self._limiter
        )

    async def set_working_memory(self, key: str, text: str) -> None:
        await anyio.to_thread.run_sync(
            self.store.set_working_memory, key, text, limiter=self._limiter
        )

    async def save_vectors(
        self, thread_id: str, vectors: Iterable[tuple[str, Vector]], *, resource_id: str | None
    ) -> None:
        batch = tuple(vectors)
        await anyio.to_thread.run_sync(
            lambda: self.store.save_vectors(thread_id, batch, resource_id=resource_id),
            limiter=self._limiter,
        )

    async def search(
        self,
        vector: Vector,
        *,
        k: int,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> tuple[RecallHit, ...]:
        return await anyio.to_thread.run_sync(
            lambda: self.store.search(vector, k=k, thread_id=thread_id, resource_id=resource_id),
            limiter=self._limiter,
        )

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self.store.close, limiter=self._limiter)
