"""The memory processors' I/O, as typed requests (`effects.Request[R]`): pure data.

An interpreter answers them from a memory store and an embedder
(`interpreters.memory.handlers`). The saves (`SaveMessages`, `IndexMessages`,
`SetWorkingMemory`) are writes (`effects.Write`): asked in `process_approved`, the loop
keeps them and asks for the run's writes together (`effects.CommitWrites`), which the
store keeps in one transaction, all or none. Under the durable interpreter each request
(and the commit) is a checkpointed step, and a resumed run that saves again saves
nothing twice (stores save by message id).
"""

from __future__ import annotations

from typing import Literal

from effects import Request, Write
from pipeline.values.messages import Message

Vector = tuple[float, ...]
"""An embedding."""

Recalled = tuple[tuple[Message, ...], ...]
"""What `Recall` answers: per hit, best first, the hit with its neighbours, in stored order."""


class LoadHistory(Request[tuple[Message, ...]], frozen=True, kw_only=True):
    """The newest `limit` messages of the thread, oldest first (none for a new thread).
    The thread is made (owned by `resource_id`) when missing; a thread owned by another
    resource is an error (`ThreadOwnerMismatch`)."""

    thread_id: str
    resource_id: str | None
    limit: int


class SaveMessages(Write, frozen=True, kw_only=True):
    """Append approved messages to the thread (by id: one stored already is left as it
    is), filed by `created_at`: when their run began (a thread's messages are in the
    order their runs began, then in the order they were saved). A write."""

    thread_id: str
    resource_id: str | None
    messages: tuple[Message, ...]
    created_at: float = 0.0


class Embed(Request[tuple[Vector, ...]], frozen=True, kw_only=True):
    """One embedding per text, in order."""

    texts: tuple[str, ...]


class IndexMessages(Write, frozen=True, kw_only=True):
    """Keep one embedding per message id of the thread (for `Recall`). A write."""

    thread_id: str
    resource_id: str | None
    vectors: tuple[tuple[str, Vector], ...]


class Recall(Request[Recalled], frozen=True, kw_only=True):
    """The `k` stored messages most similar to `vector`, within the thread (when
    `thread_id` is given) or else the resource's threads, each with up to `before`
    messages before it and `after` after it in its thread."""

    vector: Vector
    k: int
    thread_id: str | None
    resource_id: str | None
    before: int = 0
    after: int = 0


class GetWorkingMemory(Request[str], frozen=True, kw_only=True):
    """The working-memory document ("" when there is none yet) of the run's resource
    (`scope="resource"`) or of its thread (`scope="thread"`; a thread owned by another
    resource than the run's is an error, `ThreadOwnerMismatch`)."""

    thread_id: str
    resource_id: str | None
    scope: Literal["thread", "resource"]


class SetWorkingMemory(Write, frozen=True, kw_only=True):
    """Replace the working-memory document (as for `GetWorkingMemory`). A write."""

    thread_id: str
    resource_id: str | None
    scope: Literal["thread", "resource"]
    text: str


__all__ = [
    "Embed",
    "GetWorkingMemory",
    "IndexMessages",
    "LoadHistory",
    "Recall",
    "Recalled",
    "SaveMessages",
    "SetWorkingMemory",
    "Vector",
]
