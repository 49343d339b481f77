"""The stores' schema is versioned: a store opened on an older one migrates it (data
kept), a newer one is refused, and processes opening a new database at once make it once."""

from __future__ import annotations

import concurrent.futures
import sqlite3
from pathlib import Path

import pytest

from interpreters.memory import SCHEMA_VERSION, MemoryStoreError, SQLiteStore
from interpreters.memory.rows import encode_message, pack
from interpreters.memory.sqlite import MIGRATIONS, schema_version
from pipeline.values.messages import user


def _sqlite_v1(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE memory_schema (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO memory_schema VALUES (1)")
        for sql in MIGRATIONS[0]:
            conn.execute(sql)
        conn.execute("INSERT INTO memory_threads VALUES ('t1', 'u1', 1.0)")
        for i in range(3):
            conn.execute(
                "INSERT INTO memory_messages (thread_id, message_id, body) VALUES (?, ?, ?)",
                ("t1", f"m{i}", encode_message(user(f"old {i}", id=f"m{i}"))),
            )
        conn.execute(
            "INSERT INTO memory_vectors VALUES ('t1', 'm1', 'u1', ?)", (pack((0.0, 1.0)),)
        )


def test_a_sqlite_file_of_the_first_schema_is_migrated_with_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _sqlite_v1(path)
    store = SQLiteStore(path)
    try:
        with sqlite3.connect(path) as conn:
            assert schema_version(conn) == SCHEMA_VERSION == 4
        assert [m.text for m in store.last_messages("t1", 5)] == ["old 0", "old 1", "old 2"]
        hits = store.search((0.0, 3.0), k=1, resource_id="u1")  # the resource index: v2
        assert [(h.message_id, round(h.score, 5)) for h in hits] == [("m1", 1.0)]
        with pytest.raises(ValueError, match="dimensions"):  # dim, filled in by v2
            store.search((1.0, 0.0, 0.0), k=1, thread_id="t1")
    finally:
        store.close()
    SQLiteStore(path).close()  # opening it again migrates nothing


def test_a_sqlite_file_of_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE memory_schema SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(MemoryStoreError, match="newer than this library"):
        SQLiteStore(path)
    with sqlite3.connect(path) as conn:
        assert schema_version(conn) == SCHEMA_VERSION + 1


@pytest.mark.parametrize("version", ["two", "", "1.5", 1.5, -1, b"\x02", None])
def test_a_sqlite_schema_version_that_is_no_version_is_a_typed_error_naming_the_file(
    tmp_path: Path, version: object
) -> None:
    path = tmp_path / "odd.db"
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE memory_schema")  # (its column is NOT NULL: made anew)
        conn.execute("CREATE TABLE memory_schema (version)")
        conn.execute("INSERT INTO memory_schema VALUES (?)", (version,))
    with pytest.raises(MemoryStoreError, match=rf"{path.name}.*schema version") as e:
        SQLiteStore(path)
    assert str(path) in str(e.value)
    with sqlite3.connect(path) as conn:  # left as it was
        assert conn.execute("SELECT version FROM memory_schema").fetchall() == [(version,)]


def test_a_postgresql_schema_of_the_first_version_is_migrated_with_its_data(
    pgvector_url: str,
) -> None:
    import psycopg
    from psycopg import sql

    from interpreters.memory.postgres import PostgresStore, migrate
    from tests.memory.conftest import fresh_schema

    schemas = fresh_schema(pgvector_url)
    schema = next(schemas)
    try:
        with psycopg.connect(
            pgvector_url, options=f"-c search_path={schema},public", autocommit=True
        ) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            assert migrate(conn, target=1) == 0
            conn.execute("INSERT INTO memory_threads VALUES ('t1', 'u1', 1.0)")
            conn.execute(
                "INSERT INTO memory_messages (thread_id, message_id, body) VALUES (%s, %s, %s)",
                ("t1", "m0", encode_message(user("old", id="m0"))),
            )
            conn.execute("INSERT INTO memory_vectors VALUES ('t1', 'm0', 'u1', '[0,1]')")
        store = PostgresStore(pgvector_url, schema=schema)
        try:
            assert [m.text for m in store.last_messages("t1", 5)] == ["old"]
            assert [h.message_id for h in store.search((0.0, 1.0), k=1, resource_id="u1")] == [
                "m0"]
            with pytest.raises(ValueError, match="dimensions"):
                store.search((1.0, 0.0, 0.0), k=1, thread_id="t1")
        finally:
            store.close()
        with psycopg.connect(
            pgvector_url, options=f"-c search_path={schema},public", autocommit=True
        ) as conn:
            conn.execute("UPDATE memory_schema SET version = %s", (SCHEMA_VERSION + 1,))
        with pytest.raises(MemoryStoreError, match="newer than this library"):
            PostgresStore(pgvector_url, schema=schema)
    finally:
        next(schemas, None)


def test_stores_opening_a_new_postgresql_schema_at_once_make_it_once(
    pgvector_url: str,
) -> None:
    from interpreters.memory.postgres import PostgresStore
    from tests.memory.conftest import fresh_schema

    schemas = fresh_schema(pgvector_url)
    schema = next(schemas)
    try:
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            stores = list(pool.map(lambda _: PostgresStore(pgvector_url, schema=schema),
                                   range(3)))
        stores[0].save_messages("t", [user("x", id="a")], resource_id=None, created_at=0.0)
        assert [m.id for m in stores[2].last_messages("t", 1)] == ["a"]
        for s in stores:
            s.close()
    finally:
        next(schemas, None)


def test_stores_in_two_schemas_of_one_database_share_the_extension_and_outlive_each_other(
    pgvector_url: str,
) -> None:
    from interpreters.memory.postgres import PostgresStore
    from tests.memory.conftest import fresh_schema

    first, second = fresh_schema(pgvector_url), fresh_schema(pgvector_url)
    a_name, b_name = next(first), next(second)
    try:
        a = PostgresStore(pgvector_url, schema=a_name)
        b = PostgresStore(pgvector_url, schema=b_name)
        for s in (a, b):
            s.save_messages("t", [user("x", id="m")], resource_id=None, created_at=0.0)
            s.save_vectors("t", [("m", (1.0, 0.0))], resource_id=None)
        a.close()
        next(first, None)  # schema a dropped, with all in it
        assert [h.message_id for h in b.search((1.0, 0.0), k=1, thread_id="t")] == ["m"]
        b.close()
        again = PostgresStore(pgvector_url, schema=b_name)
        assert [m.id for m in again.last_messages("t", 1)] == ["m"]
        again.close()
    finally:
        next(first, None)
        next(second, None)


def test_a_sqlite_file_of_the_second_schema_gives_its_vectors_their_threads_owner(
    tmp_path: Path,
) -> None:
    from interpreters.memory.sqlite import migrate

    path = tmp_path / "v2.db"
    with sqlite3.connect(path, isolation_level=None) as conn:
        migrate(conn, target=2)
        conn.execute("INSERT INTO memory_threads VALUES ('t1', 'u1', 1.0)")
        for i in range(2):
            conn.execute(
                "INSERT INTO memory_messages (thread_id, message_id, body) VALUES (?, ?, ?)",
                ("t1", f"m{i}", encode_message(user(f"old {i}", id=f"m{i}"))),
            )
        # what save_vectors took before: the resource a caller named, not the owner
        conn.execute("INSERT INTO memory_vectors VALUES ('t1', 'm0', 'intruder', ?, 2, 1)",
                     (pack((0.0, 1.0)),))
    store = SQLiteStore(path)
    try:
        assert store.search((0.0, 1.0), k=5, resource_id="intruder") == ()
        assert [h.message_id for h in store.search((0.0, 1.0), k=5, resource_id="u1")] == ["m0"]
        store.save_messages("t1", [user("new", id="m2")], resource_id="u1", created_at=5.0)
        assert [m.id for m in store.last_messages("t1", 5)] == ["m0", "m1", "m2"]
    finally:
        store.close()


def test_a_postgresql_schema_of_the_second_version_gives_its_vectors_their_threads_owner(
    pgvector_url: str,
) -> None:
    import psycopg
    from psycopg import sql

    from interpreters.memory.postgres import PostgresStore, migrate
    from tests.memory.conftest import fresh_schema

    schemas = fresh_schema(pgvector_url)
    schema = next(schemas)
    try:
        with psycopg.connect(
            pgvector_url, options=f"-c search_path={schema},public", autocommit=True
        ) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            assert migrate(conn, target=2) == 0
            conn.execute("INSERT INTO memory_threads VALUES ('t1', 'u1', 1.0)")
            for i in range(2):
                conn.execute(
                    "INSERT INTO memory_messages (thread_id, message_id, body) "
                    "VALUES (%s, %s, %s)",
                    ("t1", f"m{i}", encode_message(user(f"old {i}", id=f"m{i}"))),
                )
            conn.execute(
                "INSERT INTO memory_vectors VALUES ('t1', 'm0', 'intruder', '[0,1]', 2)")
        store = PostgresStore(pgvector_url, schema=schema)
        try:
            assert store.search((0.0, 1.0), k=5, resource_id="intruder") == ()
            assert [h.message_id for h in store.search((0.0, 1.0), k=5, resource_id="u1")] == [
                "m0"]
            store.save_messages("t1", [user("new", id="m2")], resource_id="u1", created_at=5.0)
            assert [m.id for m in store.last_messages("t1", 5)] == ["m0", "m1", "m2"]
        finally:
            store.close()
    finally:
        next(schemas, None)
