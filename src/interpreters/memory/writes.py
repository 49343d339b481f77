"""What a store writes, as values: a run's writes are handed to `write` together and kept
in one transaction, all or none (`save_messages`, `save_vectors` and
`set_working_memory` are each a write of one).

`check_writes` checks them as the stores' other arguments are checked (a TypeError or
ValueError, the store untouched): ids, documents without a NUL, vectors of finite
numbers (normalized on the way).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import msgspec

from interpreters.memory.checks import (
    Vector,
    check_id,
    check_messages,
    check_optional_id,
    check_owner,
    check_text,
    check_vectors,
)
from pipeline.values.messages import Message


class NewMessages(msgspec.Struct, frozen=True, kw_only=True):
    """Messages appended to a thread (made when missing, owned by `resource_id`); one
    whose id the thread has already is left as it is. `created_at`: when their run
    began, which files them (a thread's messages are in the order their runs began)."""

    thread_id: str
    resource_id: str | None
    messages: tuple[Message, ...]
    created_at: float = 0.0


class NewVectors(msgspec.Struct, frozen=True, kw_only=True):
    """One embedding per message id of the thread (a second one replaces the first). The
    thread must be `resource_id`'s (made when missing); its vectors are searched under
    its owner."""

    thread_id: str
    resource_id: str | None
    vectors: tuple[tuple[str, Vector], ...]


class NewWorkingMemory(msgspec.Struct, frozen=True, kw_only=True):
    """A working-memory document, replacing the one under `key`. With `thread_id` (a
    thread's document), the thread must be `resource_id`'s (made when missing)."""

    key: str
    text: str
    thread_id: str | None = None
    resource_id: str | None = None


StoreWrite = NewMessages | NewVectors | NewWorkingMemory
"""One write of a run."""


def check_writes(writes: Iterable[StoreWrite]) -> tuple[StoreWrite, ...]:
    """The writes checked, vectors normalized (TypeError, ValueError)."""
    return tuple(_checked(w) for w in writes)


def _checked(w: object) -> StoreWrite:
    if isinstance(w, NewMessages):
        check_owner(w.thread_id, w.resource_id)
        if type(w.created_at) not in (int, float) or not math.isfinite(w.created_at):
            raise ValueError(f"created_at must be a finite number, got {w.created_at!r}")
        messages = check_messages(w.messages)
        return w if messages is w.messages else msgspec.structs.replace(w, messages=messages)
    if isinstance(w, NewVectors):
        check_owner(w.thread_id, w.resource_id)
        return msgspec.structs.replace(w, vectors=check_vectors(w.vectors))
    if isinstance(w, NewWorkingMemory):
        check_id("working-memory", w.key)
        check_text("working memory", w.text)
        check_optional_id("thread", w.thread_id)
        check_optional_id("resource", w.resource_id)
        return w
    raise TypeError(
        f"a store writes NewMessages, NewVectors or NewWorkingMemory, not {type(w).__name__}"
    )
