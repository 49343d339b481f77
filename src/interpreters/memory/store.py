"""The memory store protocol, its errors, the base that checks a store's arguments
(`CheckedStore`, under SQLite and PostgreSQL) and the in-memory store (for tests).

A store keeps threads (owned by a resource: a user, a tenant), the approved messages of
each thread in the order they were saved, working-memory documents (per thread or per
resource) and one embedding per saved message that was embedded. Every store follows the
same rules, checked by the shared contract tests:

- `save_messages` is atomic (all of them or none) and idempotent by message id: a message
  already stored under its id is left as it is, so a run resumed after a crash that saves
  again saves nothing twice. Two writers on one thread lose nothing and duplicate nothing;
  the order is the order the store accepted the writes in.
- `last_messages(thread, n)` is the newest n, oldest first.
- a message read back that does not decode is `CorruptStoredMessage`, never skipped.
- a store that cannot be reached is `MemoryStoreUnavailable`.
- a bad argument (an empty id, a negative count, a vector of NaNs) is a TypeError or
  ValueError, the store untouched (the in-memory store, for tests, checks nothing).
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Protocol

import msgspec

from interpreters.memory.checks import Vector as Vector  # re-exported: the stores' name
from interpreters.memory.checks import (
    check_around,
    check_count,
    check_id,
    check_messages,
    check_owner,
    check_query,
    check_vectors,
)
from pipeline.values.messages import Message

SCHEMA_VERSION = 2
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
    """`thread`, addressed by its owner or by no resource; else ThreadOwnerMismatch."""
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


class MemoryStore(Protocol):
    """A memory store, called from the sync interpreter (and from async ones through a
    worker thread when only this is given)."""

    def ensure_thread(
        self, thread_id: str, *, resource_id: str | None, created_at: float
    ) -> Thread:
        """The thread, created when missing; ThreadOwnerMismatch when it exists under
        another resource."""
        ...

    def get_thread(self, thread_id: str) -> Thread | None: ...

    def last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        """The newest `limit` messages of the thread, oldest first (empty for an unknown
        thread)."""
        ...

    def messages_by_id(self, thread_id: str, ids: Iterable[str]) -> tuple[Message, ...]:
        """The thread's messages among `ids`, in stored order."""
        ...

    def neighbours(
        self, thread_id: str, message_id: str, *, before: int, after: int
    ) -> tuple[Message, ...]:
        """The message with up to `before` messages before it and `after` after it, in
        stored order (empty when the id is not in the thread)."""
        ...

    def save_messages(
        self,
        thread_id: str,
        messages: Iterable[Message],
        *,
        resource_id: str | None,
        created_at: float,
    ) -> int:
        """Append the messages (creating the thread); returns how many were new."""
        ...

    def get_working_memory(self, key: str) -> str | None: ...

    def set_working_memory(self, key: str, text: str) -> None: ...

    def save_vectors(
        self, thread_id: str, vectors: Iterable[tuple[str, Vector]], *, resource_id: str | None
    ) -> None:
        """One embedding per message id (a second one for the same id replaces it)."""
        ...

    def search(
        self,
        vector: Vector,
        *,
        k: int,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> tuple[RecallHit, ...]:
        """The k stored messages most similar to `vector` (cosine), best first, within
        the thread or the resource's threads (the thread when both are given)."""
        ...

    def close(self) -> None: ...


class AsyncMemoryStore(Protocol):
    """The async twin of `MemoryStore`: the same methods, as coroutines."""

    async def ensure_thread(
        self, thread_id: str, *, resource_id: str | None, created_at: float
    ) -> Thread: ...

    async def get_thread(self, thread_id: str) -> Thread | None: ...

    async def last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]: ...

    async def messages_by_id(
        self, thread_id: str, ids: Iterable[str]
    ) -> tuple[Message, ...]: ...

    async def neighbours(
        self, thread_id: str, message_id: str, *, before: int, after: int
    ) -> tuple[Message, ...]: ...

    async def save_messages(
        self,
        thread_id: str,
        messages: Iterable[Message],
        *,
        resource_id: str | None,
        created_at: float,
    ) -> int: ...

    async def get_working_memory(self, key: str) -> str | None: ...

    async def set_working_memory(self, key: str, text: str) -> None: ...

    async def save_vectors(
        self, thread_id: str, vectors: Iterable[tuple[str, Vector]], *, resource_id: str | None
    ) -> None: ...

    async def search(
        self,
        vector: Vector,
        *,
        k: int,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> tuple[RecallHit, ...]: ...

    async def close(self) -> None: ...


class CheckedStore(ABC):
    """The `MemoryStore` methods with their arguments checked (a bad one is a TypeError or
    ValueError, the store untouched), over the hooks a backend gives: each hook is called
    with checked arguments, message ids de-duplicated and sorted, vectors normalized."""

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
        check_owner(thread_id, resource_id)
        batch = check_messages(messages)
        return self._save_messages(thread_id, batch, resource_id, created_at)

    def get_working_memory(self, key: str) -> str | None:
        return self._get_working_memory(check_id("working-memory", key))

    def set_working_memory(self, key: str, text: str) -> None:
        check_id("working-memory", key)
        if not isinstance(text, str):
            raise TypeError(f"working memory is a str, not {type(text).__name__}")
        self._set_working_memory(key, text)

    def save_vectors(
        self, thread_id: str, vectors: Iterable[tuple[str, Vector]], *, resource_id: str | None
    ) -> None:
        check_owner(thread_id, resource_id)
        self._save_vectors(thread_id, check_vectors(vectors), resource_id)

    def search(
        self,
        vector: Vector,
        *,
        k: int,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> tuple[RecallHit, ...]:
        query = check_query(vector, k, thread_id, resource_id)
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
    def _save_messages(
        self, thread_id: str, batch: tuple[Message, ...], resource_id: str | None,
        created_at: float,
    ) -> int: ...

    @abstractmethod
    def _get_working_memory(self, key: str) -> str | None: ...

    @abstractmethod
    def _set_working_memory(self, key: str, text: str) -> None: ...

    @abstractmethod
    def _save_vectors(
        self, thread_id: str, vectors: tuple[tuple[str, Vector], ...], resource_id: str | None
    ) -> None: ...

    @abstractmethod
    def _search(
        self, query: Vector, k: int, thread_id: str | None, resource_id: str | None
    ) -> tuple[RecallHit, ...]: ...


class Embedder(Protocol):
    """Texts in, one vector each out (all of one dimension)."""

    def embed(self, texts: tuple[str, ...]) -> tuple[Vector, ...]: ...


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


class InMemoryStore:
    """A `MemoryStore` in a dict, for tests; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: dict[str, Thread] = {}
        self._messages: dict[str, list[Message]] = {}
        self._ids: dict[str, set[str]] = {}
        self._working: dict[str, str] = {}
        self._vectors: dict[tuple[str, str], tuple[str | None, Vector]] = {}

    def ensure_thread(
        self, thread_id: str, *, resource_id: str | None, created_at: float
    ) -> Thread:
        with self._lock:
            return self._ensure(thread_id, resource_id, created_at)

    def _ensure(self, thread_id: str, resource_id: str | None, created_at: float) -> Thread:
        thread = self._threads.get(thread_id)
        if thread is None:
            thread = Thread(id=thread_id, resource_id=resource_id, created_at=created_at)
            self._threads[thread_id] = thread
            self._messages[thread_id] = []
            self._ids[thread_id] = set()
        return owned(thread, resource_id)

    def get_thread(self, thread_id: str) -> Thread | None:
        with self._lock:
            return self._threads.get(thread_id)

    def last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        with self._lock:
            stored = self._messages.get(thread_id, [])
            return tuple(stored[-limit:]) if limit > 0 else ()

    def messages_by_id(self, thread_id: str, ids: Iterable[str]) -> tuple[Message, ...]:
        wanted = set(ids)
        with self._lock:
            return tuple(m for m in self._messages.get(thread_id, []) if m.id in wanted)

    def neighbours(
        self, thread_id: str, message_id: str, *, before: int, after: int
    ) -> tuple[Message, ...]:
        with self._lock:
            stored = self._messages.get(thread_id, [])
            for i, m in enumerate(stored):
                if m.id == message_id:
                    return tuple(stored[max(0, i - before) : i + after + 1])
            return ()

    def save_messages(
        self,
        thread_id: str,
        messages: Iterable[Message],
        *,
        resource_id: str | None,
        created_at: float,
    ) -> int:
        batch = tuple(messages)
        with self._lock:
            self._ensure(thread_id, resource_id, created_at)
            ids = self._ids[thread_id]
            new = 0
            for m in batch:
                if m.id not in ids:
                    ids.add(m.id)
                    self._messages[thread_id].append(m)
                    new += 1
            return new

    def get_working_memory(self, key: str) -> str | None:
        with self._lock:
            return self._working.get(key)

    def set_working_memory(self, key: str, text: str) -> None:
        with self._lock:
            self._working[key] = text

    def save_vectors(
        self, thread_id: str, vectors: Iterable[tuple[str, Vector]], *, resource_id: str | None
    ) -> None:
        batch = tuple(vectors)
        with self._lock:
            for message_id, vector in batch:
                self._vectors[(thread_id, message_id)] = (resource_id, tuple(vector))

    def search(
        self,
        vector: Vector,
        *,
        k: int,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> tuple[RecallHit, ...]:
        with self._lock:
            rows = [
                RecallHit(message_id=mid, thread_id=tid, score=cosine(vector, v))
                for (tid, mid), (rid, v) in self._vectors.items()
                if (thread_id is not None and tid == thread_id)
                or (thread_id is None and resource_id is not None and rid == resource_id)
                or (thread_id is None and resource_id is None)
            ]
        rows.sort(key=lambda h: (-h.score, h.message_id))
        return tuple(rows[:k])

    def close(self) -> None:
        return None
