"""Runs of memory agents on every interpreter (sync, async, and both simulators), over any
store, and a store that watches its writes: what `test_memory_runs.py` is written with.

A `Runs` keeps one interpreter for its runs (so its run ids are its own), over one
store: the async kinds drive their interpreter on an event loop of their own (a blocking
portal), the store's calls made in worker threads, as `async_memory_handlers` does for a
sync store.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack

import anyio.from_thread

from interpreters.aio import AsyncInterpreter
from interpreters.core.cancel import CancelSignal
from interpreters.memory import (
    Embedder,
    MemoryStore,
    RecallHit,
    StoreWrite,
    Thread,
    async_memory_handlers,
    memory_handlers,
)
from interpreters.memory.store import Vector
from interpreters.observers.observe import Observer
from interpreters.sync import SyncInterpreter
from interpreters.testing import AsyncSimulator, ScriptedModel, Simulator
from pipeline.agent import Agent
from pipeline.values.messages import Message, RunInput
from pipeline.values.result import RunResult

KINDS = ["sync", "sim", "async-asyncio", "async-sim-trio"]
"""The interpreters: sync, the simulator, async (on asyncio), the async simulator (trio)."""


class Runs:
    """Runs on one interpreter of `kind` (see `KINDS`), answered by `model`, the memory
    requests by `store` (and `embedder`)."""

    def __init__(
        self,
        kind: str,
        model: ScriptedModel,
        store: MemoryStore,
        embedder: Embedder | None = None,
        *,
        observers: Sequence[Observer] = (),
    ) -> None:
        self.kind = kind
        self.model = model
        self._stack = ExitStack()
        self._portal: anyio.from_thread.BlockingPortal | None = None
        if kind == "sync":
            self._sync: SyncInterpreter | Simulator = SyncInterpreter(
                model, handlers=memory_handlers(store, embedder), observers=observers
            )
        elif kind == "sim":
            self._sync = Simulator(
                model, handlers=memory_handlers(store, embedder), observers=observers
            )
        else:
            self._portal = self._stack.enter_context(
                anyio.from_thread.start_blocking_portal(kind.rsplit("-", 1)[1])
            )
            handlers = async_memory_handlers(store, embedder)
            self._async: AsyncInterpreter | AsyncSimulator = (
                AsyncSimulator(model, handlers=handlers, observers=observers)
                if kind.startswith("async-sim")
                else AsyncInterpreter(model, handlers=handlers, observers=observers)
            )

    def run(self, agent: Agent, messages: RunInput, **options: object) -> RunResult:
        """A run to its end (`options` as the interpreters take them)."""
        if self._portal is None:
            ran = self._sync.run(agent, messages, **options)  # type: ignore[arg-type]
            return ran.result if not isinstance(ran, RunResult) else ran
        interp = self._async

        async def main() -> RunResult:
            ran = await interp.run(agent, messages, **options)  # type: ignore[arg-type]
            return ran.result if not isinstance(ran, RunResult) else ran

        return self._portal.call(main)

    def canceller(self, signal: CancelSignal, reason: str) -> Callable[[], None]:
        """What cancels `signal` from where a store is called (a worker thread of the
        event loop, for the async kinds)."""
        portal = self._portal
        if portal is None:
            return lambda: signal.cancel(reason)
        return lambda: anyio.from_thread.run_sync(functools.partial(signal.cancel, reason))

    def close(self) -> None:
        self._stack.close()


class WatchedStore:
    """A `MemoryStore` over another that calls `before_write()` (when set) before each of
    its writes, and counts them."""

    def __init__(self, inner: MemoryStore) -> None:
        self.inner = inner
        self.before_write: Callable[[], None] | None = None
        self.writes = 0

    def _writing(self) -> None:
        self.writes += 1
        if self.before_write is not None:
            self.before_write()

    def ensure_thread(
        self, thread_id: str, *, resource_id: str | None, created_at: float
    ) -> Thread:
        return self.inner.ensure_thread(thread_id, resource_id=resource_id, created_at=created_at)

    def get_thread(self, thread_id: str) -> Thread | None:
        return self.inner.get_thread(thread_id)

    def last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        return self.inner.last_messages(thread_id, limit)

    def messages_by_id(self, thread_id: str, ids: Iterable[str]) -> tuple[Message, ...]:
        return self.inner.messages_by_id(thread_id, ids)

    def neighbours(
        self, thread_id: str, message_id: str, *, before: int, after: int
    ) -> tuple[Message, ...]:
        return self.inner.neighbours(thread_id, message_id, before=before, after=after)

    def save_messages(
        self, thread_id: str, messages: Iterable[Message], *, resource_id: str | None,
        created_at: float,
    ) -> int:
        self._writing()
        return self.inner.save_messages(
            thread_id, messages, resource_id=resource_id, created_at=created_at)

    def get_working_memory(self, key: str) -> str | None:
        return self.inner.get_working_memory(key)

    def set_working_memory(self, key: str, text: str) -> None:
        self._writing()
        self.inner.set_working_memory(key, text)

    def save_vectors(
        self, thread_id: str, vectors: Iterable[tuple[str, Vector]], *, resource_id: str | None
    ) -> None:
        self._writing()
        self.inner.save_vectors(thread_id, vectors, resource_id=resource_id)

    def search(
        self, vector: Vector, *, k: int, thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> tuple[RecallHit, ...]:
        return self.inner.search(vector, k=k, thread_id=thread_id, resource_id=resource_id)

    def write(self, writes: Sequence[StoreWrite]) -> None:
        self._writing()
        self.inner.write(writes)

    def close(self) -> None:
        self.inner.close()
