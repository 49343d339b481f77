"""An async store over a sync one: each call runs in a worker thread (`anyio.to_thread`).

Used for SQLite (stdlib `sqlite3` is blocking) and PostgreSQL (psycopg's own async
connections run on asyncio only; a thread serves asyncio and trio alike). A call that is
cancelled while its thread runs waits for the thread: a write is never left half-done.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

import anyio
import anyio.to_thread

from interpreters.memory._sync.protocol import MemoryStore

P = ParamSpec("P")
R = TypeVar("R")


class _InThread(Generic[P, R]):
    """A `MemoryStore` method as the coroutine method of `AsyncStoreInThread` that runs it
    in a worker thread: one descriptor for every method, its signature the protocol's."""

    def __init__(self, method: Callable[Concatenate[MemoryStore, P], R]) -> None:
        self.name = method.__name__
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, adapter: None, owner: type[AsyncStoreInThread]) -> Self: ...

    @overload
    def __get__(
        self, adapter: AsyncStoreInThread, owner: type[AsyncStoreInThread] | None = None
    ) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(
        self, adapter: AsyncStoreInThread | None, owner: type[AsyncStoreInThread] | None = None
    ) -> Self | Callable[P, Coroutine[Any, Any, R]]:
        if adapter is None:  # looked up on the class (help, docs)
            return self
        call: Callable[..., R] = getattr(adapter.store, self.name)

        async def run(*args: P.args, **kwargs: P.kwargs) -> R:
            # Iterables (messages, ids, vectors, writes) are read here, not in the worker
            # thread.
            read = tuple(
                tuple(a) if isinstance(a, Iterable) and not isinstance(a, str | tuple) else a
                for a in args
            )
            return await anyio.to_thread.run_sync(
                functools.partial(call, *read, **kwargs), limiter=adapter._limiter
            )

        return run


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

    ensure_thread = _InThread(MemoryStore.ensure_thread)
    get_thread = _InThread(MemoryStore.get_thread)
    last_messages = _InThread(MemoryStore.last_messages)
    messages_by_id = _InThread(MemoryStore.messages_by_id)
    neighbours = _InThread(MemoryStore.neighbours)
    save_messages = _InThread(MemoryStore.save_messages)
    get_working_memory = _InThread(MemoryStore.get_working_memory)
    set_working_memory = _InThread(MemoryStore.set_working_memory)
    save_vectors = _InThread(MemoryStore.save_vectors)
    search = _InThread(MemoryStore.search)
    write = _InThread(MemoryStore.write)
    close = _InThread(MemoryStore.close)
    aclose = close
    """`close` under the name async resources have (`contextlib.aclosing`, anyio)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
