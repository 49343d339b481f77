"""`open_memory_store(url)`: one URL picks the store; a bad URL is a clear error that
never repeats a password."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from interpreters.memory import (
    AsyncStoreInThread,
    InMemoryStore,
    SQLiteStore,
    open_async_memory_store,
    open_memory_store,
)
from pipeline.values.messages import user


def test_sqlite_urls_name_a_file_relative_or_absolute_or_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rel = open_memory_store("sqlite:///chat.db?timeout=2.5")
    assert isinstance(rel, SQLiteStore)
    assert rel.path == "chat.db"
    rel.save_messages("t", [user("hi", id="a")], resource_id=None, created_at=0.0)
    rel.close()
    assert (tmp_path / "chat.db").exists()
    absolute = open_memory_store(f"sqlite:///{tmp_path / 'with space.db'}".replace(" ", "%20"))
    assert isinstance(absolute, SQLiteStore)
    assert absolute.path == str(tmp_path / "with space.db")
    absolute.close()
    for url in ("sqlite://", "sqlite:///:memory:"):
        mem = open_memory_store(url)
        assert isinstance(mem, SQLiteStore) and mem.path == ":memory:"
        mem.close()
    py = open_memory_store("sqlite://?vector_search=python")
    assert isinstance(py, SQLiteStore) and py.scorer == "python"
    assert isinstance(open_memory_store("memory://"), InMemoryStore)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://root:hunter2@db/x", "not a memory store URL"),
        ("chat.db", "not a memory store URL"),
        ("sqlite://host/chat.db", "names a host"),
        ("sqlite:///chat.db?journal=wal", "unknown option 'journal'"),
        ("sqlite:///chat.db?timeout=soon", "not a number"),
        ("sqlite:///chat.db?timeout=1&timeout=2", "twice"),
        ("sqlite:///chat.db?vector_search=gpu", "vector_search"),
        ("postgresql://me:hunter2@db/x?pool_size=many", "not a whole number"),
        ("memory://somewhere", "memory://"),
    ],
)
def test_a_bad_url_is_a_clear_error(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as e:
        open_memory_store(url)
    assert "hunter2" not in str(e.value)


def test_a_postgresql_url_opens_the_postgresql_store(pgvector_url: str) -> None:
    from interpreters.memory.postgres import PostgresStore
    from tests.memory.conftest import fresh_schema

    schemas = fresh_schema(pgvector_url)
    schema = next(schemas)
    sep = "&" if "?" in pgvector_url else "?"
    try:
        store = open_memory_store(f"{pgvector_url}{sep}schema={schema}&pool_size=2")
        assert isinstance(store, PostgresStore)
        assert (store.schema, store.pool_size) == (schema, 2)
        store.close()
    finally:
        next(schemas, None)


@pytest.mark.anyio
async def test_the_async_opener_gives_the_same_store_in_a_worker_thread(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    store = open_async_memory_store(url)
    assert isinstance(store, AsyncStoreInThread)
    await store.save_messages("t", [user("hi", id="a")], resource_id=None, created_at=0.0)
    assert [m.id for m in await store.last_messages("t", 5)] == ["a"]
    await store.close()
    again = open_memory_store(url)
    assert [m.text for m in again.last_messages("t", 5)] == ["hi"]
    again.close()
    assert os.path.exists(tmp_path / "a.db")
    await anyio.sleep(0)
