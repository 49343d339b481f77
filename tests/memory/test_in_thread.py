"""The async store over a sync one (`AsyncStoreInThread`): each method is the sync store's,
run in a worker thread, with what the caller passes read in the caller's thread."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import get_type_hints

import anyio
import pytest

from interpreters.memory import AsyncStoreInThread, InMemoryStore, MemoryStore
from interpreters.memory.postgres import PostgresOptions, PostgresStore
from interpreters.memory.sqlite import SQLiteOptions, SQLiteStore
from interpreters.memory.store import MemoryStoreUnavailable, Vector
from pipeline.values.messages import Message, user


def _read_in(thread_ids: list[int], items: list[Message]) -> Iterator[Message]:
    for m in items:
        thread_ids.append(threading.get_ident())
        yield m


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_calls_answer_as_the_sync_store_does_their_iterables_read_by_the_caller(
    backend: str,
) -> None:
    sync = InMemoryStore()
    store = AsyncStoreInThread(sync)
    messages = [user(f"text {i}", id=f"m{i}") for i in range(4)]
    readers: list[int] = []
    vectors: list[tuple[str, Vector]] = [("m0", (1.0, 0.0)), ("m1", (0.0, 1.0))]

    async def main() -> None:
        caller = threading.get_ident()
        new = await store.save_messages(
            "t1", _read_in(readers, messages), resource_id="u1", created_at=2.0
        )
        assert new == 4
        assert readers == [caller] * 4
        await store.save_vectors("t1", iter(vectors), resource_id="u1")
        ids = iter(["m2", "m0"])
        assert [m.id for m in await store.messages_by_id("t1", ids)] == ["m0", "m2"]
        assert await store.last_messages("t1", 2) == sync.last_messages("t1", 2)
        assert await store.neighbours("t1", "m1", before=1, after=1) == sync.neighbours(
            "t1", "m1", before=1, after=1
        )
        thread = await store.ensure_thread("t1", resource_id="u1", created_at=9.0)
        assert thread == sync.get_thread("t1") == await store.get_thread("t1")
        await store.set_working_memory("k", "notes")
        assert await store.get_working_memory("k") == "notes"
        hits = await store.search((1.0, 0.1), k=1, resource_id="u1")
        assert [h.message_id for h in hits] == ["m0"]
        await store.close()

    anyio.run(main, backend=backend)


def test_its_methods_read_on_the_class_are_the_protocols() -> None:
    for name in ("save_messages", "search", "neighbours"):
        method = getattr(AsyncStoreInThread, name)
        assert method.__doc__ == getattr(MemoryStore, name).__doc__


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_async_store_closes_as_async_resources_do(backend: str, tmp_path: Path) -> None:
    from interpreters.memory import AsyncSQLiteStore

    async def main() -> None:
        async with AsyncSQLiteStore(str(tmp_path / "m.db")) as store:
            await store.ensure_thread("t1", resource_id="u1", created_at=1.0)
        with pytest.raises(MemoryStoreUnavailable, match="closed"):  # closed on leaving the block
            store.store.get_thread("t1")
        again = AsyncSQLiteStore(str(tmp_path / "m.db"))
        assert (await again.get_thread("t1")) is not None
        await again.aclose()  # the name anyio, httpx and contextlib.aclosing call
        with pytest.raises(MemoryStoreUnavailable, match="closed"):
            again.store.get_thread("t1")

    anyio.run(main, backend=backend)


@pytest.mark.parametrize(
    ("async_options", "sync_store", "first"),
    [(SQLiteOptions, SQLiteStore, "path"), (PostgresOptions, PostgresStore, "url")],
    ids=["sqlite", "postgres"],
)
def test_the_async_stores_take_every_option_of_their_sync_store(
    async_options: type, sync_store: type, first: str
) -> None:
    # The async stores pass their options on as a TypedDict: one the sync store gained
    # and the TypedDict did not would be refused by type checkers on the async store.
    params = inspect.signature(sync_store).parameters
    keywords = {n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert set(get_type_hints(async_options)) == keywords
    assert first in params
