"""Two writers on one thread, through their own stores (threads, then processes): nothing
lost, nothing twice, each batch's new messages together and in its order."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from pathlib import Path

import pytest

from interpreters.memory import MemoryStore
from tests.memory.conftest import Backend
from tests.memory.writers import BATCHES, batches, write, write_in_process


def check(stored: list[str], writers: tuple[str, ...], new: list[int]) -> None:
    expected = {m.id for w in writers for b in batches(w) for m in b}
    assert len(stored) == len(set(stored)), "a message was stored twice"
    assert set(stored) == expected, "a message was lost"
    assert sum(new) == len(expected)  # the counts the writers were told add up
    where = {mid: i for i, mid in enumerate(stored)}
    for w in writers:
        for batch in batches(w):
            a, b = where[batch[0].id], where[batch[2].id]
            # the writer's own two: in order, with at most the shared one between them
            assert a < b <= a + 2


def test_two_writers_in_threads_lose_and_duplicate_nothing(backend: Backend) -> None:
    stores = [backend.open(), backend.open()]
    writers = ("w1", "w2")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(write, s, w, "t1") for s, w in zip(stores, writers, strict=True)]
        new = [f.result(timeout=120) for f in futures]
    check([m.id for m in stores[0].last_messages("t1", 10 * BATCHES)], writers, new)


def _in_processes(url: str, reader: MemoryStore) -> None:
    writers = ("p1", "p2")
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as pool:
        futures = [pool.submit(write_in_process, url, w, "t1") for w in writers]
        new = [f.result(timeout=120) for f in futures]
    check([m.id for m in reader.last_messages("t1", 10 * BATCHES)], writers, new)


@pytest.mark.slow
def test_two_writer_processes_on_one_sqlite_file(tmp_path: Path) -> None:
    from interpreters.memory.sqlite import SQLiteStore

    path = tmp_path / "shared.db"
    reader = SQLiteStore(path)
    try:
        _in_processes(f"sqlite:///{path}", reader)
    finally:
        reader.close()


@pytest.mark.slow
def test_two_writer_processes_on_one_postgresql_database(pgvector_url: str) -> None:
    from interpreters.memory.postgres import PostgresStore
    from tests.memory.conftest import fresh_schema

    schemas = fresh_schema(pgvector_url)
    schema = next(schemas)
    reader = PostgresStore(pgvector_url, schema=schema)
    sep = "&" if "?" in pgvector_url else "?"
    try:
        _in_processes(f"{pgvector_url}{sep}schema={schema}", reader)
    finally:
        reader.close()
        next(schemas, None)
