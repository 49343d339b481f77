"""The memory store protocol, its errors, the writes of a run, the base that checks a
store's arguments (`CheckedStore`, under every store) and the in-memory store (for tests).

A store keeps threads (owned by a resource: a user, a tenant), the approved messages of
each thread in order, working-memory documents (per thread or per resource) and one
embedding per saved message that was embedded. Every store follows the same rules,
checked by the shared contract tests:

- a run's writes (`write`: messages, vectors, working memory) go in one transaction: all
  of them or none. `save_messages`, `save_vectors` and `set_working_memory` are each
  such a write of one.
- saving messages is idempotent by message id: a message already stored under its id is
  left as it is, so a run resumed after a crash that saves again saves nothing twice. Two
  writers on one thread lose nothing and duplicate nothing.
- the order: a thread's messages are in the order their runs began (`created_at` of the
  save: a run that waited for an approval is filed before the runs that came
  meanwhile), then in the order they were saved; `last_messages(thread, n)` is the
  newest n of that order, oldest first.
- owners: a thread belongs to the resource that made it; a call that names another
  resource (a save, vectors, a thread's working memory, a search of the thread) is
  `ThreadOwnerMismatch`, and nothing is written. A thread made without a resource is
  read under none.
- a message read back that does not decode is `CorruptStoredMessage`, never skipped.
- a store that cannot be reached is `MemoryStoreUnavailable`.
- a bad argument (an empty id, a NUL in an id or a document, a negative count, a vector
  of NaNs) is a TypeError or ValueError, the store untouched.

The protocols, `MemoryStore` and `AsyncMemoryStore` (`interpreters.memory`), are written
once, in `_async/protocol.py` (the sync one generated from it by `scripts/unasync.py`).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import math
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

import msgspec

from interpreters.memory.checks import Vector as Vector  # re-exported: the stores' name
from interpreters.memory.checks import (
    check_around,
    check_count,
    check_id,
    check_owner,
    check_query,
)
from interpreters.memory.writes import (
    NewMessages,
    NewVectors,
    NewWorkingMemory,
    StoreWrite,
    check_writes,
)
from interpreters.providers.provider import ProviderError
from pipeline.values.messages import Message

K = TypeVar("K")
V = TypeVar("V")

SCHEMA_VERSION = 4
"""The stores' schema version; a store opened on an older schema migrates it."""


class MemoryStoreError(Exception):
    """Base of the memory stores' errors."""


class MemoryStoreUnavailable(MemoryStoreError):
    """The store could not be reached or did not answer in time."""


class CorruptStoredMessage(MemoryStoreError):
    """A stored message does not decode as a `Message`."""

    def __init__(self, thread_id: str, message_id: str, reason: str) -> None:
        super().__init__(f"stored message {message_id!r} of thread {thread_id!r}: {reason}")
        self.thread_id = thread_id
        self.message_id = message_id


class ThreadOwnerMismatch(MemoryStoreError):
    """A thread was addressed with a resource id other than the one that owns it."""

    def __init__(self, thread_id: str, owner: str | None, given: str | None) -> None:
        super().__init__(
            f"thread {thread_id!r} belongs to resource {owner!r}, not {given!r}"
        )
        self.thread_id = thread_id


class Thread(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    resource_id: str | None = None
    created_at: float = 0.0


def owned(thread: Thread, resource_id: str | None) -> Thread:
    """`thread`, addressed by its owner or by no resource; else ThreadOwnerMismatch (a
    thread made without a resource is read under none)."""
    if resource_id is not None and thread.resource_id != resource_id:
        raise ThreadOwnerMismatch(thread.id, thread.resource_id, resource_id)
    return thread


class RecallHit(msgspec.Struct, frozen=True, kw_only=True):
    """A message found by similarity: its id, its thread, and the cosine similarity."""

    message_id: str
    thread_id: str
    score: float


def working_memory_key(*, thread_id: str | None = None, resource_id: str | None = None) -> str:
    """The key of a working-memory document: per resource when one is given, else per
    thread. ValueError when neither is."""
    if resource_id is not None:
        return f"resource:{resource_id}"
    if thread_id is not None:
        return f"thread:{thread_id}"
    raise ValueError("working memory needs a thread_id or a resource_id")


class CheckedStore(ABC):
    """The `MemoryStore` methods with their arguments checked (a bad one is a TypeError or
    ValueError, the store untouched), over the hooks a backend gives: each hook is called
    with checked arguments, message ids de-duplicated and sorted, vectors normalized.
    Every write is one `_commit` of checked writes: one transaction."""

    def ensure_thread(
        self, thread_id: str, *, resource_id: str | None, created_at: float
    ) -> Thread:
        check_owner(thread_id, resource_id)
        return self._ensure_thread(thread_id, resource_id, created_at)

    def get_thread(self, thread_id: str) -> Thread | None:
        return self._get_thread(check_id("thread", thread_id))

    def last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        check_id("thread", thread_id)
        return self._last_messages(thread_id, check_count("limit", limit))

    def messages_by_id(self, thread_id: str, ids: Iterable[str]) -> tuple[Message, ...]:
        check_id("thread", thread_id)
        wanted = sorted({check_id("message", i) for i in ids})
        return self._messages_by_id(thread_id, wanted) if wanted else ()

    def neighbours(
        self, thread_id: str, message_id: str, *, before: int, after: int
    ) -> tuple[Message, ...]:
        check_around(thread_id, message_id, before, after)
        return self._neighbours(thread_id, message_id, before, after)

    def save_messages(
        self,
        thread_id: str,
        messages: Iterable[Message],
        *,
        resource_id: str | None,
        created_at: float,
    ) -> int:
        (new,) = self._commit(check_writes((NewMessages(
            thread_id=thread_id, resource_id=resource_id, messages=tuple(messages),
            created_at=created_at,
        ),)))
        return new

    def get_working_memory(self, key: str) -> str | None:
        return self._get_working_memory(check_id("working-memory", key))

    def set_working_memory(self, key: str, text: str) -> None:
        self._commit(check_writes((NewWorkingMemory(key=key, text=text),)))

    def save_vectors(
        self, thread_id: str, vectors: Iterable[tuple[str, Vector]], *, resource_id: str | None
    ) -> None:
        self._commit(check_writes((NewVectors(
            thread_id=thread_id, resource_id=resource_id, vectors=tuple(vectors)),)))

    def write(self, writes: Sequence[StoreWrite]) -> None:
        self._commit(check_writes(writes))

    def search(
        self,
        vector: Vector,
        *,
        k: int,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> tuple[RecallHit, ...]:
        query = check_query(vector, k, thread_id, resource_id)
        if thread_id is not None and resource_id is not None:
            thread = self._get_thread(thread_id)
            if thread is not None:
                owned(thread, resource_id)
        return self._search(query, k, thread_id, resource_id)

    @abstractmethod
    def close(self) -> None: ...

    # --- the backend's hooks -----------------------------------------------------------
    @abstractmethod
    def _ensure_thread(
        self, thread_id: str, resource_id: str | None, created_at: float
    ) -> Thread: ...

    @abstractmethod
    def _get_thread(self, thread_id: str) -> Thread | None: ...

    @abstractmethod
    def _last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]: ...

    @abstractmethod
    def _messages_by_id(self, thread_id: str, ids: list[str]) -> tuple[Message, ...]:
        """`ids`: not empty."""

    @abstractmethod
    def _neighbours(
        self, thread_id: str, message_id: str, before: int, after: int
    ) -> tuple[Message, ...]: ...

    @abstractmethod
    def _get_working_memory(self, key: str) -> str | None: ...

    @abstractmethod
    def _commit(self, writes: tuple[StoreWrite, ...]) -> list[int]:
        """The writes (checked) in one transaction, all or none; for each, how many
        messages it added (0 for other writes)."""

    @abstractmethod
    def _search(
        self, query: Vector, k: int, thread_id: str | None, resource_id: str | None
    ) -> tuple[RecallHit, ...]: ...


class Embedder(Protocol):
    """Texts in, one vector each out (all of one dimension)."""

    def embed(self, texts: tuple[str, ...]) -> tuple[Vector, ...]: ...


class AsyncEmbedder(Protocol):
    """The async twin of `Embedder`."""

    async def embed(self, texts: tuple[str, ...]) -> tuple[Vector, ...]: ...


class EmbeddingError(ProviderError):
    """An embedding call failed; `error` says how. Never carries the key."""


class HashEmbedder:
    """A deterministic embedder for tests and the simulator: each word hashed into one of
    `dim` buckets, the counts normalized. Texts sharing words are similar."""

    def __init__(self, dim: int = 64) -> None:
        if type(dim) is not int or dim < 2:
            raise ValueError(f"dim must be an int of at least 2, got {dim!r}")
        self.dim = dim

    def embed(self, texts: tuple[str, ...]) -> tuple[Vector, ...]:
        return tuple(self._one(t) for t in texts)

    def _one(self, text: str) -> Vector:
        counts = [0.0] * self.dim
        for word in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
            counts[h % self.dim] += 1.0
        norm = math.sqrt(sum(c * c for c in counts)) or 1.0
        return tuple(c / norm for c in counts)


def cosine(a: Vector, b: Vector) -> float:
    """Cosine similarity; 0.0 when either is all zeros. ValueError on unequal lengths."""
    if len(a) != len(b):
        raise ValueError(f"vectors of {len(a)} and {len(b)} dimensions")
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


_Stored = tuple[float, int, Message]
"""A stored message with where it is filed: its run's start, then the save's number."""


def _filed(e: _Stored) -> tuple[float, int]:
    return e[0], e[1]


def _put_back(d: dict[K, V], key: K, value: V | None) -> None:
    """Undo a write to `d`: `key` as it was (None: it was not there)."""
    if value is None:
        d.pop(key, None)
    else:
        d[key] = value


def _unfile(stored: list[_Stored], ids: set[str], entry: _Stored) -> Callable[[], None]:
    def undo() -> None:
        stored.remove(entry)
        ids.discard(entry[2].id)

    return undo


class InMemoryStore(CheckedStore):
    """A `MemoryStore` in dicts, for tests; safe to share between threads. It checks its
    arguments and keeps every rule as the other stores do (a failed `write` is undone)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: dict[str, Thread] = {}
        self._messages: dict[str, list[_Stored]] = {}
        self._ids: dict[str, set[str]] = {}
        self._working: dict[str, str] = {}
        self._vectors: dict[tuple[str, str], tuple[str | None, Vector]] = {}
        self._saves = itertools.count()

    def _ensure(
        self, thread_id: str, resource_id: str | None, created_at: float,
        undo: list[Callable[[], None]] | None = None,
    ) -> Thread:
        thread = self._threads.get(thread_id)
        if thread is None:
            thread = Thread(id=thread_id, resource_id=resource_id, created_at=created_at)
            self._threads[thread_id] = thread
            self._messages[thread_id] = []
            self._ids[thread_id] = set()
            if undo is not None:
                undo.append(lambda: self._forget(thread_id))
        return owned(thread, resource_id)

    def _forget(self, thread_id: str) -> None:
        del self._threads[thread_id], self._messages[thread_id], self._ids[thread_id]

    def _ensure_thread(
        self, thread_id: str, resource_id: str | None, created_at: float
    ) -> Thread:
        with self._lock:
            return self._ensure(thread_id, resource_id, created_at)

    def _get_thread(self, thread_id: str) -> Thread | None:
        with self._lock:
            return self._threads.get(thread_id)

    def _stored(self, thread_id: str) -> list[Message]:
        return [m for _, _, m in self._messages.get(thread_id, [])]

    def _last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        with self._lock:
            stored = self._stored(thread_id)
        return tuple(stored[-limit:]) if limit > 0 else ()

    def _messages_by_id(self, thread_id: str, ids: list[str]) -> tuple[Message, ...]:
        wanted = set(ids)
        with self._lock:
            return tuple(m for m in self._stored(thread_id) if m.id in wanted)

    def _neighbours(
        self, thread_id: str, message_id: str, before: int, after: int
    ) -> tuple[Message, ...]:
        with self._lock:
            stored = self._stored(thread_id)
        for i, m in enumerate(stored):
            if m.id == message_id:
                return tuple(stored[max(0, i - before) : i + after + 1])
        return ()

    def _get_working_memory(self, key: str) -> str | None:
        with self._lock:
            return self._working.get(key)

    def _commit(self, writes: tuple[StoreWrite, ...]) -> list[int]:
        undo: list[Callable[[], None]] = []
        with self._lock:
            try:
                return [self._apply(w, undo) for w in writes]
            except BaseException:
                for step in reversed(undo):
                    step()
                raise

    def _apply(self, w: StoreWrite, undo: list[Callable[[], None]]) -> int:
        if isinstance(w, NewMessages):
            self._ensure(w.thread_id, w.resource_id, w.created_at, undo)
            ids, stored = self._ids[w.thread_id], self._messages[w.thread_id]
            new = 0
            for m in w.messages:
                if m.id not in ids:
                    entry = (float(w.created_at), next(self._saves), m)
                    bisect.insort(stored, entry, key=_filed)
                    ids.add(m.id)
                    undo.append(_unfile(stored, ids, entry))
                    new += 1
            return new
        if isinstance(w, NewVectors):
            owner = self._ensure(w.thread_id, w.resource_id, 0.0, undo).resource_id
            for message_id, vector in w.vectors:
                key = (w.thread_id, message_id)
                before = self._vectors.get(key)
                self._vectors[key] = (owner, vector)
                undo.append(functools.partial(_put_back, self._vectors, key, before))
            return 0
        if w.thread_id is not None:
            self._ensure(w.thread_id, w.resource_id, 0.0, undo)
        before_text = self._working.get(w.key)
        self._working[w.key] = w.text
        undo.append(functools.partial(_put_back, self._working, w.key, before_text))
        return 0

    def _search(
        self, query: Vector, k: int, thread_id: str | None, resource_id: str | None
    ) -> tuple[RecallHit, ...]:
        with self._lock:
            rows = [
                RecallHit(message_id=mid, thread_id=tid, score=cosine(query, v))
                for (tid, mid), (rid, v) in self._vectors.items()
                if (thread_id is not None and tid == thread_id)
                or (thread_id is None and resource_id is not None and rid == resource_id)
                or (thread_id is None and resource_id is None)
            ]
        rows.sort(key=lambda h: (-h.score, h.message_id))
        return tuple(rows[:k])

    def close(self) -> None:
        return None
