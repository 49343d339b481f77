"""The protocol every memory store follows (`interpreters.memory.store` says the rules;
the contract tests check them on every store)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from interpreters.memory.checks import Vector
    from interpreters.memory.store import RecallHit, Thread
    from interpreters.memory.writes import StoreWrite
    from pipeline.values.messages import Message


class AsyncMemoryStore(Protocol):
    """A memory store, called from the async interpreters (`interpreters.memory.store`
    says the rules every store keeps)."""

    async def ensure_thread(
        self, thread_id: str, *, resource_id: str | None, created_at: float
    ) -> Thread:
        """The thread, created when missing; ThreadOwnerMismatch when it exists under
        another resource."""
        ...

    async def get_thread(self, thread_id: str) -> Thread | None: ...

    async def last_messages(self, thread_id: str, limit: int) -> tuple[Message, ...]:
        """The newest `limit` messages of the thread, oldest first (empty for an unknown
        thread)."""
        ...

    async def messages_by_id(self, thread_id: str, ids: Iterable[str]) -> tuple[Message, ...]:
        """The thread's messages among `ids`, in stored order."""
        ...

    async def neighbours(
        self, thread_id: str, message_id: str, *, before: int, after: int
    ) -> tuple[Message, ...]:
        """The message with up to `before` messages before it and `after` after it, in
        stored order (empty when the id is not in the thread)."""
        ...

    async def save_messages(
        self,
        thread_id: str,
        messages: Iterable[Message],
        *,
        resource_id: str | None,
        created_at: float,
    ) -> int:
        """Append the messages (creating the thread), filed by `created_at` (when their
        run began); returns how many were new."""
        ...

    async def get_working_memory(self, key: str) -> str | None: ...

    async def set_working_memory(self, key: str, text: str) -> None: ...

    async def save_vectors(
        self, thread_id: str, vectors: Iterable[tuple[str, Vector]], *, resource_id: str | None
    ) -> None:
        """One embedding per message id (a second one for the same id replaces it); the
        thread must be `resource_id`'s."""
        ...

    async def search(
        self,
        vector: Vector,
        *,
        k: int,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> tuple[RecallHit, ...]:
        """The k stored messages most similar to `vector` (cosine), best first, within
        the thread or the resource's threads (the thread when both are given: it must be
        the resource's)."""
        ...

    async def write(self, writes: Sequence[StoreWrite]) -> None:
        """A run's writes, in one transaction: all of them or none."""
        ...

    async def close(self) -> None: ...
