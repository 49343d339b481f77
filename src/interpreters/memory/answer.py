"""What the answers to the memory requests share, sync and async (`_async/answers.py`
and the `_sync/answers.py` generated from it): the embedder's vectors checked, the owner
of a thread's working memory, and a run's writes as the store's (`CommitWrites`)."""

from __future__ import annotations

from collections.abc import Iterable

from effects import Write
from interpreters.memory.store import Embedder, Thread, ThreadOwnerMismatch, working_memory_key
from interpreters.memory.writes import NewMessages, NewVectors, NewWorkingMemory, StoreWrite
from pipeline.processors.memory.requests import (
    GetWorkingMemory,
    IndexMessages,
    SaveMessages,
    SetWorkingMemory,
    Vector,
)


class NoEmbedder(LookupError):
    """An `Embed` request reached handlers made without an embedder."""


def vectors_of(embedder: Embedder | None, texts: tuple[str, ...]) -> tuple[Vector, ...]:
    """The embedder's vectors for `texts`, one each (ValueError otherwise)."""
    if embedder is None:
        raise NoEmbedder("semantic recall needs an embedder: memory_handlers(store, embedder)")
    out = tuple(tuple(float(x) for x in v) for v in embedder.embed(texts))
    if len(out) != len(texts):
        raise ValueError(f"the embedder gave {len(out)} vectors for {len(texts)} texts")
    return out


def check_reader(r: GetWorkingMemory, thread: Thread | None) -> None:
    """A thread's working memory is read only for the resource that owns the thread."""
    if thread is not None and r.resource_id is not None and thread.resource_id != r.resource_id:
        raise ThreadOwnerMismatch(thread.id, thread.resource_id, r.resource_id)


def wm_key(r: GetWorkingMemory | SetWorkingMemory) -> str:
    if r.scope == "resource":
        return working_memory_key(resource_id=r.resource_id)
    return working_memory_key(thread_id=r.thread_id)


def store_writes(writes: Iterable[Write]) -> tuple[StoreWrite, ...]:
    """The memory requests' writes as the store's (TypeError for a write of another
    kind: these handlers commit memory's writes only)."""
    return tuple(_store_write(w) for w in writes)


def _store_write(w: Write) -> StoreWrite:
    if isinstance(w, SaveMessages):
        return NewMessages(thread_id=w.thread_id, resource_id=w.resource_id,
                           messages=w.messages, created_at=w.created_at)
    if isinstance(w, IndexMessages):
        return NewVectors(thread_id=w.thread_id, resource_id=w.resource_id, vectors=w.vectors)
    if isinstance(w, SetWorkingMemory):
        return NewWorkingMemory(
            key=wm_key(w), text=w.text, resource_id=w.resource_id,
            thread_id=w.thread_id if w.scope == "thread" else None,
        )
    raise TypeError(f"the memory handlers commit memory's writes, not {type(w).__name__}")
