"""A store that cannot be reached, is busy past its timeout, or is closed is
`MemoryStoreUnavailable`; a PostgreSQL without pgvector is an error that says so."""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path

import pytest

from interpreters.memory import MemoryStoreError, MemoryStoreUnavailable, SQLiteStore
from pipeline.values.messages import user


def test_a_sqlite_file_that_cannot_be_opened_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreUnavailable, match="cannot open"):
        SQLiteStore(tmp_path / "no such dir" / "x.db")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database, not at all" * 100)
    with pytest.raises(MemoryStoreUnavailable):
        SQLiteStore(garbage)


def test_a_sqlite_file_locked_past_the_timeout_is_unavailable_and_nothing_is_saved(
    tmp_path: Path,
) -> None:
    path = tmp_path / "busy.db"
    store = SQLiteStore(path, timeout=0.2)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(MemoryStoreUnavailable, match="locked"):
            store.save_messages("t1", [user("x", id="a")], resource_id=None, created_at=0.0)
        other.execute("ROLLBACK")
        assert store.last_messages("t1", 5) == ()
        assert store.save_messages("t1", [user("x", id="a")], resource_id=None,
                                   created_at=0.0) == 1
    finally:
        other.close()
        store.close()


def test_a_closed_store_is_unavailable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "x.db")
    store.close()
    store.close()  # twice is fine
    with pytest.raises(MemoryStoreUnavailable, match="closed"):
        store.last_messages("t1", 1)


def test_options_are_checked_when_the_store_is_made(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="vector_search"):
        SQLiteStore(tmp_path / "x.db", vector_search="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        SQLiteStore(tmp_path / "x.db", timeout=0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_postgresql_server_that_is_not_there_is_unavailable() -> None:
    pytest.importorskip("psycopg_pool")
    from interpreters.memory.postgres import PostgresStore

    url = f"postgresql://memory:s3cret@127.0.0.1:{_free_port()}/none"
    with pytest.raises(MemoryStoreUnavailable) as e:
        PostgresStore(url, timeout=1)
    assert "s3cret" not in str(e.value)
    assert "memory:***@" in str(e.value)


@pytest.mark.slow
def test_a_postgresql_server_that_stops_is_unavailable_then() -> None:
    from interpreters.memory.postgres import PostgresStore
    from tests.memory.pg_server import pgvector_server, psycopg_available, unavailable

    if not psycopg_available():
        unavailable("psycopg and psycopg-pool are not installed (the postgres extra)")
    with pgvector_server() as url:
        store = PostgresStore(url, timeout=1)
        store.save_messages("t1", [user("x", id="a")], resource_id=None, created_at=0.0)
    try:
        with pytest.raises(MemoryStoreUnavailable):
            store.last_messages("t1", 1)
    finally:
        store.close()


def test_postgresql_without_the_right_to_the_vector_extension_says_so(
    pgvector_url: str,
) -> None:
    import psycopg
    from psycopg import sql

    from interpreters.memory.postgres import PostgresStore
    from tests.memory.conftest import fresh_schema

    schemas = fresh_schema(pgvector_url)
    role = next(schemas)  # a fresh name, used for a role and its database
    admin = psycopg.connect(pgvector_url, autocommit=True)
    try:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(role), sql.Identifier(role)))
        info = psycopg.conninfo.conninfo_to_dict(pgvector_url)
        info.update(user=role, dbname=role)
        url = psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()
                                                if v is not None})
        with pytest.raises(MemoryStoreError, match="pgvector") as e:
            PostgresStore(url, timeout=5)
        assert not isinstance(e.value, MemoryStoreUnavailable)
    finally:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(role)))
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        admin.close()
        next(schemas, None)


def test_postgresql_without_pgvector_installed_says_so() -> None:
    """Debian's PostgreSQL (the durable tests' server) has no pgvector here."""
    pytest.importorskip("psycopg_pool")
    import psycopg

    from interpreters.memory.postgres import PostgresStore

    url = os.environ.get("PIPELINE_TEST_PG_URL")
    if not url:
        pytest.skip("no PIPELINE_TEST_PG_URL (scripts/pg-test-server start)")
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone():
            pytest.skip("this server has pgvector")
    with pytest.raises(MemoryStoreError, match="pgvector"):
        PostgresStore(url, timeout=5)
