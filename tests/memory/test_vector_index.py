"""The SQLite store's HNSW index (`vector_index="hnsw"`, the memory-ann extra): derived
from the rows and checked against them, so scopes stay apart, restarts and other writers
are seen, its recall is measured against the exact scan, and small scopes are scanned."""

from __future__ import annotations

import math
import random
import sqlite3
import sys
from pathlib import Path

import pytest

from interpreters.memory import SQLiteStore, VectorIndexNotInstalled
from interpreters.memory.rows import pack

pytest.importorskip("usearch.index")

DIM = 24


def unit(rng: random.Random, dim: int = DIM) -> tuple[float, ...]:
    v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    n = math.sqrt(sum(x * x for x in v))
    return tuple(x / n for x in v)


def clustered(rng: random.Random, n: int, centers: list[tuple[float, ...]]) -> list[
    tuple[float, ...]
]:
    """Vectors near a few centers, as embeddings of related texts are."""
    out = []
    for _ in range(n):
        c = rng.choice(centers)
        v = [x + 0.15 * rng.gauss(0.0, 1.0) for x in c]
        norm = math.sqrt(sum(x * x for x in v))
        out.append(tuple(x / norm for x in v))
    return out


def hnsw(path: Path | str, min_vectors: int = 50) -> SQLiteStore:
    return SQLiteStore(path, vector_index="hnsw", hnsw_min_vectors=min_vectors)


def ids(hits: tuple[object, ...]) -> list[str]:
    return [h.message_id for h in hits]  # type: ignore[attr-defined]


def fill(store: SQLiteStore, thread: str, resource: str, vectors: list[tuple[float, ...]],
         prefix: str = "m") -> None:
    store.save_vectors(thread, [(f"{prefix}{i:04d}", v) for i, v in enumerate(vectors)],
                       resource_id=resource)


def indexed(store: SQLiteStore) -> set[tuple[str, ...]]:
    assert store._approx is not None
    return set(store._approx._indexes)


def test_a_recall_never_returns_another_scopes_message_even_from_a_shared_index(
    tmp_path: Path,
) -> None:
    rng = random.Random(1)
    same = [unit(rng) for _ in range(200)]  # two users' threads of the very same vectors
    store = hnsw(tmp_path / "m.db")
    try:
        fill(store, "ta", "ua", same, "a")
        fill(store, "tb", "ub", same, "b")
        for scope in ({"thread_id": "ta"}, {"resource_id": "ub"}, {}):
            assert store.build_vector_index(**scope) == (400 if not scope else 200)
        # The thread's index is made to hold the other user's rows too, as one index
        # shared by every scope would: the lookup still keeps the scope.
        assert store._approx is not None
        index = store._approx._indexes[("thread", "ta")]
        with sqlite3.connect(tmp_path / "m.db") as conn:
            theirs = conn.execute(
                "SELECT vseq, vec FROM memory_vectors WHERE thread_id = 'tb'").fetchall()
        index.add([v for v, _ in theirs], b"".join(r for _, r in theirs))
        unscoped: set[str] = set()
        for q in same[:40]:
            assert all(h.thread_id == "ta" for h in store.search(q, k=5, thread_id="ta"))
            assert all(h.message_id.startswith("b")
                       for h in store.search(q, k=5, resource_id="ub"))
            unscoped |= {h.thread_id for h in store.search(q, k=2)}
        # Unscoped, a query's two equals (one per thread) are both found: not by every
        # search (the index is approximate: measured, about 1 search in 90 finds one equal
        # and another vector of its thread), but over the forty.
        assert unscoped == {"ta", "tb"}
        assert {("thread", "ta"), ("resource", "ub"), ("all",)} <= indexed(store)
    finally:
        store.close()


def test_recall_against_the_exact_scan_is_at_least_0_95_at_k_5(tmp_path: Path) -> None:
    rng = random.Random(7)
    centers = [unit(rng) for _ in range(30)]
    vectors = clustered(rng, 3000, centers)
    approx, exact = hnsw(tmp_path / "a.db"), SQLiteStore(tmp_path / "e.db")
    try:
        for store in (approx, exact):
            fill(store, "t", "u", vectors)
        assert approx.build_vector_index(thread_id="t") == 3000
        found = 0
        queries = clustered(random.Random(8), 100, centers)
        for q in queries:
            want = set(ids(exact.search(q, k=5, thread_id="t")))
            found += len(want & set(ids(approx.search(q, k=5, thread_id="t"))))
        assert ("thread", "t") in indexed(approx)  # the index answered, not the scan
        assert found / (5 * len(queries)) >= 0.95
    finally:
        approx.close()
        exact.close()


def test_a_larger_index_is_searched_wider(monkeypatch: pytest.MonkeyPatch) -> None:
    """HNSW needs a wider search over more vectors for the same recall: past a size the
    index widens its search with the size (here the size is made small)."""
    from interpreters.memory import ann

    assert ann.search_width(1_000) == ann.search_width(100_000) == 64
    widths = [ann.search_width(n) for n in (200_000, 1_000_000, 4_000_000, 10**9)]
    assert widths == sorted(widths) and widths[0] > 64 and widths[-1] == 512
    monkeypatch.setattr(ann, "_WIDE_FROM", 10)
    rng = random.Random(3)
    index = ann.ApproxIndex(("thread", "t"), DIM)
    vectors = [unit(rng) for _ in range(40)]
    index.add(range(1, 41), b"".join(pack(v) for v in vectors))
    assert index.candidates(pack(vectors[0]), 5)[0] == 1
    assert index._index.expansion_search == ann.search_width(40) == 128


def test_a_scope_smaller_than_the_threshold_is_scanned_with_the_exact_results(
    tmp_path: Path,
) -> None:
    rng = random.Random(3)
    vectors = [unit(rng) for _ in range(120)]
    approx, exact = hnsw(tmp_path / "a.db", min_vectors=121), SQLiteStore(tmp_path / "e.db")
    try:
        for store in (approx, exact):
            fill(store, "t", "u", vectors)
            fill(store, "t2", "u", vectors[:5], "x")
        for q in vectors[:30]:
            for scope in ({"thread_id": "t"}, {"resource_id": "u"}):
                assert approx.search(q, k=5, **scope) == exact.search(q, k=5, **scope)
        assert approx.wait_for_vector_index(30)
        # the resource (125 vectors) crossed the threshold: its index is built in the
        # background; the thread (120) was never indexed
        assert indexed(approx) == {("resource", "u")}
        assert not (tmp_path / "e.db.vector-index").exists()
    finally:
        approx.close()
        exact.close()


def test_a_scope_of_several_dimension_counts_is_scanned(tmp_path: Path) -> None:
    rng = random.Random(4)
    store = hnsw(tmp_path / "m.db", min_vectors=10)
    try:
        fill(store, "t", "u", [unit(rng) for _ in range(20)])
        fill(store, "t2", "u", [unit(rng, DIM + 1) for _ in range(20)], "w")
        assert store.build_vector_index(resource_id="u") == 0
        with pytest.raises(ValueError, match="dimensions"):
            store.search(unit(rng), k=3, resource_id="u")
        assert len(store.search(unit(rng), k=3, thread_id="t")) == 3
    finally:
        store.close()


def test_the_index_is_kept_across_a_restart_and_catches_up_with_the_file(
    tmp_path: Path,
) -> None:
    rng = random.Random(5)
    path = tmp_path / "m.db"
    vectors = [unit(rng) for _ in range(300)]
    store = hnsw(path)
    fill(store, "t", "u", vectors)
    assert store.build_vector_index(thread_id="t") == 300
    store.close()
    files = list((tmp_path / "m.db.vector-index").iterdir())
    assert len(files) == 1
    # meanwhile, without the index: a new vector, one replaced, one deleted
    plain = SQLiteStore(path)
    new, moved = unit(rng), unit(rng)
    plain.save_vectors("t", [("new", new), ("m0001", moved)], resource_id="u")
    plain.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM memory_vectors WHERE message_id = 'm0002'")
    store = hnsw(path)
    try:
        assert ids(store.search(new, k=1, thread_id="t")) == ["new"]
        assert ("thread", "t") in indexed(store)  # read from its file, not rebuilt
        assert store._approx is not None
        assert len(store._approx._indexes[("thread", "t")]) == 300
        assert ids(store.search(moved, k=1, thread_id="t")) == ["m0001"]
        assert "m0001" not in ids(store.search(vectors[1], k=3, thread_id="t"))
        assert "m0002" not in ids(store.search(vectors[2], k=5, thread_id="t"))
    finally:
        store.close()


def test_an_index_file_far_behind_the_database_catches_up_in_the_background(
    tmp_path: Path,
) -> None:
    rng = random.Random(11)
    path = tmp_path / "m.db"
    store = hnsw(path)
    fill(store, "t", "u", [unit(rng) for _ in range(100)])
    store.build_vector_index(thread_id="t")
    store.close()
    plain = SQLiteStore(path)
    fill(plain, "t", "u", [unit(rng) for _ in range(2500)], "late")
    plain.close()
    store, exact = hnsw(path, min_vectors=10_000), SQLiteStore(path)
    try:
        q = unit(rng)
        assert store.search(q, k=5, thread_id="t") == exact.search(q, k=5, thread_id="t")
        assert store.wait_for_vector_index(60)
        assert store._approx is not None
        assert len(store._approx._indexes[("thread", "t")]) == 2600
        assert ids(store.search(q, k=5, thread_id="t"))[0] == ids(
            exact.search(q, k=5, thread_id="t"))[0]
        assert ("thread", "t") in indexed(store)  # the index answered
    finally:
        store.close()
        exact.close()


def test_an_index_file_of_another_database_is_not_used(tmp_path: Path) -> None:
    rng = random.Random(6)
    vectors = [unit(rng) for _ in range(100)]
    first = hnsw(tmp_path / "a.db")
    fill(first, "t", "u", vectors)
    first.build_vector_index(thread_id="t")
    first.close()
    second = hnsw(tmp_path / "b.db")
    fill(second, "t", "u", vectors[::-1])
    second.close()
    # the other database's file in its place: same scope, other rows
    (tmp_path / "b.db.vector-index").mkdir(exist_ok=True)
    for f in (tmp_path / "a.db.vector-index").iterdir():
        (tmp_path / "b.db.vector-index" / f.name).write_bytes(f.read_bytes())
    store = hnsw(tmp_path / "b.db", min_vectors=1000)  # (no build of its own)
    exact = SQLiteStore(tmp_path / "b.db")
    try:
        for q in vectors[:10]:
            assert store.search(q, k=3, thread_id="t") == exact.search(q, k=3, thread_id="t")
        assert indexed(store) == set()  # refused: the scan answered
    finally:
        store.close()
        exact.close()


def test_another_connections_writes_and_deletes_are_seen_by_the_index(
    tmp_path: Path,
) -> None:
    rng = random.Random(9)
    path = tmp_path / "m.db"
    store, writer = hnsw(path), SQLiteStore(path)
    try:
        fill(store, "t", "u", [unit(rng) for _ in range(200)])
        store.build_vector_index(thread_id="t")
        target = unit(rng)
        writer.save_vectors("t", [("fresh", target)], resource_id="u")
        assert ids(store.search(target, k=1, thread_id="t")) == ["fresh"]
        writer.save_vectors("t", [("fresh", unit(rng))], resource_id="u")  # replaced
        assert "fresh" not in ids(store.search(target, k=1, thread_id="t"))
        writer.save_vectors("t", [("again", target)], resource_id="u")
        with sqlite3.connect(path) as conn:
            conn.execute("DELETE FROM memory_vectors WHERE message_id = 'again'")
            conn.execute(  # a row written by hand, under the same rules
                "INSERT INTO memory_vectors (thread_id, message_id, resource_id, vec, dim, "
                "vseq) VALUES ('t', 'byhand', 'u', ?, ?, (SELECT max(vseq) + 1 FROM "
                "memory_vectors))", (pack(target), DIM))
        assert ids(store.search(target, k=1, thread_id="t")) == ["byhand"]
        assert ("thread", "t") in indexed(store)
    finally:
        store.close()
        writer.close()


def test_an_index_past_the_memory_cap_is_not_kept_and_the_scope_is_scanned(
    tmp_path: Path,
) -> None:
    rng = random.Random(10)
    vectors = [unit(rng) for _ in range(100)]
    store = SQLiteStore(tmp_path / "m.db", vector_index="hnsw", hnsw_min_vectors=10,
                        hnsw_cache_bytes=1000)
    exact = SQLiteStore(tmp_path / "m.db")
    try:
        fill(store, "t", "u", vectors)
        store.build_vector_index(thread_id="t")
        assert indexed(store) == set()
        for q in vectors[:10]:
            assert store.search(q, k=3, thread_id="t") == exact.search(q, k=3, thread_id="t")
    finally:
        store.close()
        exact.close()


def test_asking_for_the_index_without_its_package_is_a_typed_error_before_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "usearch.index", None)
    with pytest.raises(VectorIndexNotInstalled, match=r"pipeline-agents\[memory-ann\]"):
        SQLiteStore(tmp_path / "m.db", vector_index="hnsw")
    assert not (tmp_path / "m.db").exists()
    assert issubclass(VectorIndexNotInstalled, ImportError)


@pytest.mark.parametrize("bad", [{"vector_index": "faiss"}, {"hnsw_min_vectors": 0},
                                 {"hnsw_cache_bytes": -1}, {"hnsw_min_vectors": 1.5}])
def test_a_vector_index_setting_not_understood_is_an_error_at_construction(
    tmp_path: Path, bad: dict[str, object]
) -> None:
    with pytest.raises(ValueError):
        SQLiteStore(tmp_path / "m.db", **bad)  # type: ignore[arg-type]


def test_an_exact_store_has_no_index_to_build() -> None:
    store = SQLiteStore()
    try:
        with pytest.raises(ValueError, match="vector_index='hnsw'"):
            store.build_vector_index(thread_id="t")
        assert store.wait_for_vector_index(0)
    finally:
        store.close()


def test_the_url_option_turns_the_index_on_and_a_bad_value_is_refused(tmp_path: Path) -> None:
    from interpreters.memory import open_memory_store

    store = open_memory_store(f"sqlite:///{tmp_path / 'm.db'}?vector_index=hnsw")
    try:
        assert isinstance(store, SQLiteStore) and store._approx is not None
    finally:
        store.close()
    with pytest.raises(ValueError, match="exact or hnsw"):
        open_memory_store(f"sqlite:///{tmp_path / 'm.db'}?vector_index=ivf")
