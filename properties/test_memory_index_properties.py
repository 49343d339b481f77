"""The SQLite store's in-memory index of a scope's vectors gives what a search that reads
the scope from the file gives, whatever was written between searches and by whom (a
second store on the same file: another process's writes), vectors replaced, refused for
a resource that does not own the thread, of other dimensions."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from interpreters.memory import SQLiteStore, ThreadOwnerMismatch
from interpreters.memory.sqlite import VectorSearch

THREADS = ("t1", "t2", "t3")
RESOURCES = ("u1", "u2", None)
IDS = tuple(f"m{i}" for i in range(6))

vectors = st.lists(st.sampled_from((0.0, 1.0, 2.0)), min_size=3, max_size=3).map(tuple)
save = st.tuples(st.just("save"), st.sampled_from(THREADS), st.sampled_from(IDS),
                 st.sampled_from(RESOURCES), vectors)
odd = st.tuples(st.just("save"), st.sampled_from(THREADS), st.sampled_from(IDS),
                st.sampled_from(RESOURCES), st.just((1.0, 1.0)))
search = st.tuples(st.just("search"), st.sampled_from((*THREADS, None)),
                   st.sampled_from(RESOURCES), vectors, st.integers(0, 7))
ops = st.lists(st.one_of(save, search, odd), max_size=30)


def _found(
    store: SQLiteStore, vec: tuple[float, ...], k: int, thread: str | None,
    resource: str | None,
) -> tuple[tuple[str, str, float], ...] | str:
    try:
        hits = store.search(vec, k=k, thread_id=thread, resource_id=resource)
    except ValueError as e:
        return f"ValueError: {'dimensions' in str(e)}"
    except ThreadOwnerMismatch:
        return "not the resource's thread"
    return tuple((h.message_id, h.thread_id, round(h.score, 5)) for h in hits)


@given(ops, st.sampled_from(("numpy", "python")), st.booleans())
def test_an_indexed_search_finds_what_a_search_of_the_file_finds(
    steps: list[tuple[object, ...]], scorer: VectorSearch, small_cache: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.db"
        indexed = SQLiteStore(path, vector_search=scorer,
                              cache_bytes=64 if small_cache else 1 << 20)
        writer = SQLiteStore(path, vector_search=scorer)
        plain = SQLiteStore(path, vector_search=scorer, cache_bytes=0)
        try:
            for i, step in enumerate(steps):
                if step[0] == "save":
                    _, thread, mid, resource, vec = step
                    assert isinstance(thread, str) and isinstance(mid, str)
                    assert resource is None or isinstance(resource, str)
                    assert isinstance(vec, tuple)
                    # (a thread of another resource: refused, nothing written)
                    with contextlib.suppress(ThreadOwnerMismatch):
                        (writer if i % 2 else indexed).save_vectors(
                            thread, [(mid, vec)], resource_id=resource)
                else:
                    _, thread, resource, vec, k = step
                    assert thread is None or isinstance(thread, str)
                    assert resource is None or isinstance(resource, str)
                    assert isinstance(vec, tuple) and isinstance(k, int)
                    assert _found(indexed, vec, k, thread, resource) == _found(
                        plain, vec, k, thread, resource)
        finally:
            for s in (indexed, writer, plain):
                s.close()
