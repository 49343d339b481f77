"""The SQLite store's exact search keeps each scope's vectors in memory between searches;
rows another writer of the file replaced or deleted since must not be recalled."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from interpreters.memory import SQLiteStore


def test_a_vector_deleted_by_another_connection_is_not_recalled_from_the_cache(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    store = SQLiteStore(path)
    try:
        store.save_vectors("t", [("a", (1.0, 0.0)), ("b", (0.0, 1.0))], resource_id="u")
        assert [h.message_id for h in store.search((1.0, 0.0), k=2, thread_id="t")] == ["a", "b"]
        with sqlite3.connect(path) as other:  # a forget, by the application's own SQL
            other.execute("DELETE FROM memory_vectors WHERE message_id = 'a'")
        assert [h.message_id for h in store.search((1.0, 0.0), k=2, thread_id="t")] == ["b"]
        assert [h.message_id for h in store.search((1.0, 0.0), k=2, resource_id="u")] == ["b"]
    finally:
        store.close()


def test_a_vector_written_after_the_newest_was_deleted_is_recalled_from_the_cache(
    tmp_path: Path,
) -> None:
    """The newest row's write number is not given again once it is deleted: a cache that
    had read up to it would skip the next row."""
    path = tmp_path / "m.db"
    store, writer = SQLiteStore(path), SQLiteStore(path)
    try:
        store.save_vectors("t", [("a", (1.0, 0.0)), ("b", (0.0, 1.0))], resource_id="u")
        assert len(store.search((1.0, 0.0), k=2, thread_id="t")) == 2
        with sqlite3.connect(path) as other:
            other.execute("DELETE FROM memory_vectors WHERE message_id = 'b'")
        writer.save_vectors("t", [("c", (0.6, 0.8))], resource_id="u")
        assert [h.message_id for h in store.search((0.0, 1.0), k=2, thread_id="t")] == ["c", "a"]
    finally:
        store.close()
        writer.close()
