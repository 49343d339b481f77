"""The memory requests answered from a store and an embedder: one method per request,
registered for its request by `handlers` (which `interpreters.memory.handlers` hands out)."""

from __future__ import annotations

from effects import CommitWrites
from interpreters.core.handlers import Handlers
from interpreters.memory._async.protocol import AsyncMemoryStore
from interpreters.memory._async.worker import in_worker
from interpreters.memory.answer import check_reader, store_writes, vectors_of, wm_key
from interpreters.memory.store import Embedder
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


class AsyncAnswers:
    """The answers over `store`; the embedder's call, blocking, through `in_worker`."""

    def __init__(self, store: AsyncMemoryStore, embedder: Embedder | None) -> None:
        self.store = store
        self.embedder = embedder

    async def load(self, r: LoadHistory) -> tuple[Message, ...]:
        await self.store.ensure_thread(r.thread_id, resource_id=r.resource_id, created_at=0.0)
        return await self.store.last_messages(r.thread_id, r.limit)

    async def embed(self, r: Embed) -> tuple[Vector, ...]:
        return await in_worker(vectors_of, self.embedder, r.texts)

    async def recall(self, r: Recall) -> Recalled:
        # (the store refuses a thread of another resource than the run's)
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
            check_reader(r, await self.store.get_thread(r.thread_id))
        return (await self.store.get_working_memory(wm_key(r))) or ""

    async def commit(self, r: CommitWrites) -> None:
        """A run's writes, in one transaction of the store."""
        await self.store.write(store_writes(r.writes))

    async def write_now(self, r: SaveMessages | IndexMessages | SetWorkingMemory) -> None:
        """A write asked outside `process_approved`: at once, alone."""
        await self.store.write(store_writes((r,)))

    def handlers(self) -> Handlers:
        """Each request answered by its method."""
        return (
            Handlers()
            .add(LoadHistory, self.load)
            .add(Embed, self.embed)
            .add(Recall, self.recall)
            .add(GetWorkingMemory, self.get_working)
            .add(CommitWrites, self.commit)
            .add(SaveMessages, self.write_now)
            .add(IndexMessages, self.write_now)
            .add(SetWorkingMemory, self.write_now)
        )
