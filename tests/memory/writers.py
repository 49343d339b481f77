"""A writer for the concurrency tests: saves its own messages and some shared ones to one
thread, in batches, through its own store (in a thread of the test or a process)."""

from __future__ import annotations

from interpreters.memory import MemoryStore, open_memory_store
from pipeline.values.messages import Message, user

BATCHES = 40
SIZE = 3


def batches(writer: str) -> list[tuple[Message, ...]]:
    """Each batch: two messages of the writer's own and one every writer also saves."""
    return [
        (user("own", id=f"{writer}-{i}-0"), user("shared", id=f"shared-{i}"),
         user("own", id=f"{writer}-{i}-1"))
        for i in range(BATCHES)
    ]


def write(store: MemoryStore, writer: str, thread: str) -> int:
    new = 0
    for batch in batches(writer):
        new += store.save_messages(thread, batch, resource_id="u1", created_at=0.0)
    return new


def write_in_process(url: str, writer: str, thread: str) -> int:
    store = open_memory_store(url)
    try:
        return write(store, writer, thread)
    finally:
        store.close()
