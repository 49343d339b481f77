"""The checks on what callers pass a store: ids, counts, messages and vectors, each a
TypeError or ValueError before the store is touched (the stores' contract); vectors come
out normalized (unit length, or all zeros), as the SQL stores keep them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pipeline.values.messages import Message

Vector = tuple[float, ...]

MAX_DIM = 16_000
"""Dimensions a vector may have at most (the largest embedding models give 4,096)."""


def check_id(what: str, value: object) -> str:
    """A thread, resource or message id: a non-empty string without a NUL character
    (TypeError, ValueError)."""
    if not isinstance(value, str):
        raise TypeError(f"a {what} id must be a str, not {type(value).__name__}")
    if not value:
        raise ValueError(f"a {what} id must not be empty")
    if "\x00" in value:
        raise ValueError(f"a {what} id must not hold a NUL character")
    return value


def check_text(what: str, value: object) -> str:
    """A text a store keeps as text (a working-memory document): a str without a NUL
    character, which PostgreSQL's text cannot hold (every store refuses it alike)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} is a str, not {type(value).__name__}")
    if "\x00" in value:
        raise ValueError(f"{what} must not hold a NUL character")
    return value


def check_optional_id(what: str, value: object) -> str | None:
    return None if value is None else check_id(what, value)


def check_count(what: str, value: object) -> int:
    """A count (limit, k, before, after): an int of at least 0."""
    if type(value) is not int or value < 0:
        raise ValueError(f"{what} must be an int of at least 0, got {value!r}")
    return value


def check_messages(messages: Iterable[Message]) -> tuple[Message, ...]:
    batch = tuple(messages)
    for m in batch:
        if not isinstance(m, Message):
            raise TypeError(f"save_messages takes Messages, not {type(m).__name__}")
        check_id("message", m.id)
    return batch


def check_vector(vector: Iterable[float]) -> Vector:
    """A vector of finite numbers, 1 to MAX_DIM of them (ValueError, TypeError)."""
    values = tuple(vector)
    if not 1 <= len(values) <= MAX_DIM:
        raise ValueError(f"a vector has 1 to {MAX_DIM} dimensions, not {len(values)}")
    for x in values:
        if type(x) is not float and type(x) is not int:
            raise TypeError(f"a vector holds numbers, not {type(x).__name__}")
        if not math.isfinite(x):
            raise ValueError(f"a vector holds finite numbers, not {x!r}")
    return tuple(float(x) for x in values)


def normalized(vector: Vector) -> Vector:
    """The vector scaled to unit length (all zeros stays all zeros)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return tuple(x / norm for x in vector) if norm else vector


def check_vectors(
    vectors: Iterable[tuple[str, Vector]],
) -> tuple[tuple[str, Vector], ...]:
    out = []
    for item in vectors:
        message_id, vector = item
        out.append((check_id("message", message_id), normalized(check_vector(vector))))
    return tuple(out)


def check_owner(thread_id: object, resource_id: object) -> None:
    """A thread id and an optional resource id, as every store call that names both."""
    check_id("thread", thread_id)
    check_optional_id("resource", resource_id)


def check_query(
    vector: Iterable[float], k: object, thread_id: object, resource_id: object
) -> Vector:
    """A search's arguments; the query vector normalized."""
    query = normalized(check_vector(vector))
    check_count("k", k)
    check_optional_id("thread", thread_id)
    check_optional_id("resource", resource_id)
    return query


def check_around(thread_id: object, message_id: object, before: object, after: object) -> None:
    """`neighbours`' arguments."""
    check_id("thread", thread_id)
    check_id("message", message_id)
    check_count("before", before)
    check_count("after", after)

