"""What the SQL stores share: a message as stored bytes and back, vectors as float32 bytes.

Messages are stored as msgpack (msgspec), decoded back into `Message`; a row that does not
decode, or decodes to a message of another id, is `CorruptStoredMessage`, never skipped.
Vectors are stored normalized (unit length, or all zeros; `interpreters.memory.checks`),
so a cosine is a dot product.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from typing import LiteralString

import msgspec

from interpreters.memory.store import (
    SCHEMA_VERSION,
    CorruptStoredMessage,
    MemoryStoreError,
    Vector,
)
from pipeline.values.messages import Message

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Message)


def decode_messages(thread_id: str, rows: Iterable[tuple[str, bytes]]) -> tuple[Message, ...]:
    """Rows of (message id, body), as the SQL stores read them, decoded in their order."""
    return tuple(decode_message(thread_id, str(mid), bytes(body)) for mid, body in rows)


def check_schema(found: int) -> None:
    """MemoryStoreError for a database whose schema is newer than this library's."""
    if found > SCHEMA_VERSION:
        raise MemoryStoreError(
            f"the memory store's schema is version {found}, newer than this library's "
            f"({SCHEMA_VERSION}): upgrade pipeline-agents to open it"
        )


def encode_message(message: Message) -> bytes:
    return _encoder.encode(message)


def decode_message(thread_id: str, message_id: str, raw: bytes) -> Message:
    try:
        message = _decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise CorruptStoredMessage(thread_id, message_id, str(e)) from None
    if message.id != message_id:
        raise CorruptStoredMessage(
            thread_id, message_id, f"the stored body is message {message.id!r}"
        )
    return message


def pack(vector: Vector) -> bytes:
    """float32, little-endian (what sqlite-vec and numpy read)."""
    a = array("f", vector)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


def unpack(raw: bytes) -> array[float]:
    a = array("f")
    a.frombytes(raw)
    if sys.byteorder != "little":
        a.byteswap()
    return a


def dimension_error(stored: int, given: int) -> ValueError:
    return ValueError(f"the query vector has {given} dimensions, stored vectors {stored}")


class Queries:
    """The statements both SQL stores run alike, in one placeholder style (`?` for
    sqlite3, `%s` for psycopg)."""

    def __init__(self, placeholder: LiteralString) -> None:
        p = placeholder
        self.thread: LiteralString = (
            f"SELECT resource_id, created_at FROM memory_threads WHERE id = {p}"
        )
        self.get_working: LiteralString = f"SELECT text FROM memory_working WHERE key = {p}"
        self.set_working: LiteralString = (
            f"INSERT INTO memory_working VALUES ({p}, {p}) "
            "ON CONFLICT (key) DO UPDATE SET text = excluded.text"
        )
