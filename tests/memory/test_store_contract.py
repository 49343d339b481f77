"""The rules every memory store keeps (interpreters/memory/store.py's docstring), run over
each of them: in memory, SQLite and PostgreSQL with pgvector, sync and async (asyncio and
trio)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from interpreters.memory import (
    CorruptStoredMessage,
    MemoryStore,
    ThreadOwnerMismatch,
    working_memory_key,
)
from pipeline.values.messages import Message, TextPart, user
from tests.memory.conftest import Backend


def msg(i: int | str, text: str | None = None) -> Message:
    mid = i if isinstance(i, str) else f"m{i:04d}"
    return user(text if text is not None else f"message {mid}", id=mid)


def ids(messages: tuple[Message, ...]) -> list[str]:
    return [m.id for m in messages]


def save(store: MemoryStore, thread: str, *messages: Message, resource: str | None = "u1") -> int:
    return store.save_messages(thread, messages, resource_id=resource, created_at=1.0)


# --- threads ----------------------------------------------------------------------------
def test_a_thread_is_made_once_and_keeps_its_owner(store: MemoryStore) -> None:
    assert store.get_thread("t1") is None
    made = store.ensure_thread("t1", resource_id="u1", created_at=5.0)
    assert (made.id, made.resource_id, made.created_at) == ("t1", "u1", 5.0)
    again = store.ensure_thread("t1", resource_id="u1", created_at=9.0)
    assert again == made
    assert store.get_thread("t1") == made
    # without a resource the thread is found as it is
    assert store.ensure_thread("t1", resource_id=None, created_at=9.0) == made


def test_a_thread_addressed_by_another_resource_is_refused_and_nothing_is_saved(
    store: MemoryStore,
) -> None:
    save(store, "t1", msg(1))
    with pytest.raises(ThreadOwnerMismatch):
        store.ensure_thread("t1", resource_id="intruder", created_at=1.0)
    with pytest.raises(ThreadOwnerMismatch):
        save(store, "t1", msg(2), resource="intruder")
    assert ids(store.last_messages("t1", 10)) == ["m0001"]


# --- messages ---------------------------------------------------------------------------
def test_saved_messages_come_back_whole_newest_n_oldest_first(store: MemoryStore) -> None:
    rich = Message(id="r1", role="assistant", parts=(TextPart("a"), TextPart("b")),
                   created_at=3.5, thread_id="t1", metadata={"k": [1, "x"]})
    assert save(store, "t1", *(msg(i) for i in range(5))) == 5
    assert save(store, "t1", rich, msg(5)) == 2
    assert ids(store.last_messages("t1", 3)) == ["m0004", "r1", "m0005"]
    assert ids(store.last_messages("t1", 100)) == [f"m{i:04d}" for i in range(5)] + ["r1", "m0005"]
    assert store.last_messages("t1", 0) == ()
    assert store.last_messages("nowhere", 5) == ()
    assert store.messages_by_id("t1", ["r1"]) == (rich,)


def test_saving_again_is_idempotent_by_id(store: MemoryStore) -> None:
    assert save(store, "t1", msg(1), msg(2)) == 2
    # a resumed run saves the same messages again, and one more
    assert save(store, "t1", msg(1), msg(2), msg(3)) == 1
    # the stored one stays as it was, even when the new one differs
    assert save(store, "t1", msg(1, "changed")) == 0
    # a batch naming one id twice keeps the first
    assert save(store, "t1", msg(4), msg(4, "again")) == 1
    got = store.last_messages("t1", 10)
    assert ids(got) == ["m0001", "m0002", "m0003", "m0004"]
    assert got[0].text == "message m0001"
    assert got[3].text == "message m0004"
    assert save(store, "t1") == 0


def test_threads_are_apart(store: MemoryStore) -> None:
    save(store, "t1", msg(1), msg(2))
    save(store, "t2", msg(1, "other"), msg(3), resource="u2")
    assert ids(store.last_messages("t1", 10)) == ["m0001", "m0002"]
    assert [m.text for m in store.last_messages("t2", 10)] == ["other", "message m0003"]
    assert ids(store.messages_by_id("t1", ["m0003", "m0002", "m0001", "nope"])) == [
        "m0001", "m0002"]
    assert store.messages_by_id("t1", []) == ()


def test_neighbours_are_the_message_and_those_around_it_in_order(store: MemoryStore) -> None:
    save(store, "t1", *(msg(i) for i in range(10)))
    save(store, "t2", *(msg(i) for i in range(100, 103)), resource="u2")
    assert ids(store.neighbours("t1", "m0005", before=2, after=1)) == [
        "m0003", "m0004", "m0005", "m0006"]
    assert ids(store.neighbours("t1", "m0000", before=3, after=0)) == ["m0000"]
    assert ids(store.neighbours("t1", "m0009", before=0, after=5)) == ["m0009"]
    assert ids(store.neighbours("t1", "m0001", before=5, after=12)) == ids(
        store.last_messages("t1", 10))
    assert store.neighbours("t1", "m0100", before=1, after=1) == ()
    assert store.neighbours("nowhere", "m0001", before=1, after=1) == ()


def test_neighbours_reach_across_the_turns_in_their_order(store: MemoryStore) -> None:
    # A thread's order is its turns' (by when each began), then each turn's saves: the
    # turn at 1.5, saved last, sorts between those of 1.0 and 2.0.
    store.save_messages("t1", [msg(i) for i in range(3)], resource_id="u1", created_at=1.0)
    store.save_messages("t1", [msg(i) for i in range(3, 6)], resource_id="u1", created_at=2.0)
    store.save_messages("t1", [msg(i) for i in range(6, 8)], resource_id="u1", created_at=1.5)
    order = ["m0000", "m0001", "m0002", "m0006", "m0007", "m0003", "m0004", "m0005"]
    assert ids(store.last_messages("t1", 10)) == order
    for at, mid in enumerate(order):
        for before, after in ((0, 0), (1, 1), (2, 3), (4, 4), (9, 9)):
            want = order[max(0, at - before): at + after + 1]
            assert ids(store.neighbours("t1", mid, before=before, after=after)) == want


def test_a_stored_row_that_does_not_decode_is_an_error_never_skipped(
    backend: Backend, store: MemoryStore
) -> None:
    if backend.corrupt is None:
        pytest.skip("the in-memory store keeps objects: nothing to decode")
    save(store, "t1", msg(1), msg(2), msg(3))
    backend.corrupt("t1", "m0002")
    reads: list[Callable[[], object]] = [
        lambda: store.last_messages("t1", 5),
        lambda: store.messages_by_id("t1", ["m0002"]),
        lambda: store.neighbours("t1", "m0001", before=0, after=1),
    ]
    for read in reads:
        with pytest.raises(CorruptStoredMessage) as e:
            read()
        assert (e.value.thread_id, e.value.message_id) == ("t1", "m0002")
    assert ids(store.last_messages("t1", 1)) == ["m0003"]  # the rest reads as it did


def test_bad_arguments_are_typed_errors(store: MemoryStore) -> None:
    with pytest.raises(TypeError):
        store.last_messages(7, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.last_messages("t1", -1)
    with pytest.raises(ValueError):
        store.ensure_thread("", resource_id=None, created_at=0.0)
    with pytest.raises(TypeError):
        save(store, "t1", msg(1), "not a message")  # type: ignore[arg-type]
    assert store.get_thread("t1") is None  # the bad batch left nothing
    with pytest.raises(ValueError):
        store.search((math.nan, 1.0), k=1)


# --- working memory ---------------------------------------------------------------------
def test_working_memory_is_one_document_per_key(store: MemoryStore) -> None:
    per_thread = working_memory_key(thread_id="t1")
    per_resource = working_memory_key(thread_id="t1", resource_id="u1")
    assert store.get_working_memory(per_thread) is None
    store.set_working_memory(per_thread, "# Notes\nname: Ada")
    store.set_working_memory(per_resource, "likes: tea")
    assert store.get_working_memory(per_thread) == "# Notes\nname: Ada"
    store.set_working_memory(per_thread, "")
    assert store.get_working_memory(per_thread) == ""
    assert store.get_working_memory(per_resource) == "likes: tea"
    assert store.get_working_memory(working_memory_key(thread_id="t2")) is None


# --- vectors ----------------------------------------------------------------------------
def unit(i: int, dim: int = 4, w: float = 1.0) -> tuple[float, ...]:
    return tuple(w if j == i else 0.0 for j in range(dim))


def test_search_finds_the_most_similar_best_first_within_its_scope(store: MemoryStore) -> None:
    save(store, "t1", *(msg(i) for i in range(4)))
    save(store, "t2", msg(10), msg(11))
    save(store, "t3", msg(20), resource="u2")
    store.save_vectors("t1", [("m0000", (1.0, 0.0, 0.0, 0.0)), ("m0001", (0.9, 0.1, 0.0, 0.0)),
                              ("m0002", (0.0, 1.0, 0.0, 0.0)), ("m0003", (0.0, 0.0, 2.0, 0.0))],
                       resource_id="u1")
    store.save_vectors("t2", [("m0010", (1.0, 0.05, 0.0, 0.0)), ("m0011", unit(3))],
                       resource_id="u1")
    store.save_vectors("t3", [("m0020", (1.0, 0.0, 0.0, 0.0))], resource_id="u2")
    q = (10.0, 0.0, 0.0, 0.0)  # its length does not matter: a cosine

    hits = store.search(q, k=3, thread_id="t1")
    assert [h.message_id for h in hits] == ["m0000", "m0001", "m0002"]
    assert {h.thread_id for h in hits} == {"t1"}
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[1].score == pytest.approx(0.9 / math.sqrt(0.82), abs=1e-5)
    assert hits[2].score == pytest.approx(0.0, abs=1e-6)

    by_resource = store.search(q, k=3, resource_id="u1")
    assert [(h.thread_id, h.message_id) for h in by_resource] == [
        ("t1", "m0000"), ("t2", "m0010"), ("t1", "m0001")]
    assert [h.message_id for h in store.search(q, k=1, resource_id="u2")] == ["m0020"]
    # the thread, when both are given (of the resource: see the owners' tests)
    assert [h.message_id for h in store.search(q, k=9, thread_id="t2", resource_id="u1")] == [
        "m0010", "m0011"]
    everywhere = store.search(q, k=2)
    assert sorted(h.message_id for h in everywhere) == ["m0000", "m0020"]  # a tie at 1.0
    assert store.search(q, k=0, thread_id="t1") == ()
    assert store.search(q, k=5, thread_id="nowhere") == ()


def test_a_second_vector_for_a_message_replaces_the_first(store: MemoryStore) -> None:
    save(store, "t1", msg(1), msg(2))
    save(store, "t2", msg(1))
    store.save_vectors("t1", [("m0001", unit(0)), ("m0002", unit(1))], resource_id="u1")
    store.save_vectors("t2", [("m0001", unit(0))], resource_id="u1")  # same id, own thread
    store.save_vectors("t1", [("m0001", unit(2))], resource_id="u1")
    hits = store.search(unit(2), k=1, thread_id="t1")
    assert [(h.message_id, round(h.score, 5)) for h in hits] == [("m0001", 1.0)]
    assert [h.message_id for h in store.search(unit(0), k=1, thread_id="t2")] == ["m0001"]
    assert store.search(unit(0), k=1, thread_id="t2")[0].score == pytest.approx(1.0)


def test_ties_go_to_the_smaller_message_id_and_zero_vectors_score_zero(
    store: MemoryStore,
) -> None:
    save(store, "t1", msg("b"), msg("a"), msg("c"), msg("z"))
    store.save_vectors("t1", [("b", unit(0)), ("a", unit(0)), ("c", unit(0, w=3.0)),
                              ("z", (0.0, 0.0, 0.0, 0.0))], resource_id=None)
    hits = store.search(unit(0), k=4, thread_id="t1")
    assert [h.message_id for h in hits] == ["a", "b", "c", "z"]
    assert hits[3].score == 0.0
    assert [h.message_id for h in store.search(unit(0), k=2, thread_id="t1")] == ["a", "b"]


def test_a_query_of_other_dimensions_than_the_stored_vectors_is_an_error(
    store: MemoryStore,
) -> None:
    save(store, "t1", msg(1))
    store.save_vectors("t1", [("m0001", unit(0, dim=4))], resource_id="u1")
    with pytest.raises(ValueError, match="dimensions"):
        store.search(unit(0, dim=3), k=1, thread_id="t1")


# --- owners -----------------------------------------------------------------------------
def test_vectors_are_kept_only_for_the_threads_owner(store: MemoryStore) -> None:
    save(store, "t1", msg(1))
    with pytest.raises(ThreadOwnerMismatch):
        store.save_vectors("t1", [("m0001", unit(0))], resource_id="intruder")
    assert store.search(unit(0), k=5, resource_id="intruder") == ()
    assert store.search(unit(0), k=5, thread_id="t1") == ()  # nothing was kept
    # addressed by no resource, a thread's vectors are its owner's
    store.save_vectors("t1", [("m0001", unit(0))], resource_id=None)
    assert [h.message_id for h in store.search(unit(0), k=5, resource_id="u1")] == ["m0001"]


def test_a_search_of_a_thread_for_another_resource_is_refused(store: MemoryStore) -> None:
    save(store, "t1", msg(1))
    store.save_vectors("t1", [("m0001", unit(0))], resource_id="u1")
    with pytest.raises(ThreadOwnerMismatch):
        store.search(unit(0), k=1, thread_id="t1", resource_id="u2")
    assert [h.message_id for h in store.search(unit(0), k=1, thread_id="t1")] == ["m0001"]


def test_a_thread_kept_without_a_resource_is_read_under_none(store: MemoryStore) -> None:
    save(store, "t0", msg(1), resource=None)
    store.save_vectors("t0", [("m0001", unit(0))], resource_id=None)
    with pytest.raises(ThreadOwnerMismatch):
        store.ensure_thread("t0", resource_id="u1", created_at=0.0)
    with pytest.raises(ThreadOwnerMismatch):
        save(store, "t0", msg(2), resource="u1")
    with pytest.raises(ThreadOwnerMismatch):
        store.save_vectors("t0", [("m0001", unit(1))], resource_id="u1")
    with pytest.raises(ThreadOwnerMismatch):
        store.search(unit(0), k=1, thread_id="t0", resource_id="u1")
    assert store.search(unit(0), k=5, resource_id="u1") == ()
    assert ids(store.last_messages("t0", 5)) == ["m0001"]  # as it is, by no resource
    assert [h.message_id for h in store.search(unit(0), k=5, thread_id="t0")] == ["m0001"]


# --- turns --------------------------------------------------------------------------------
def test_messages_are_in_the_order_their_turns_began(store: MemoryStore) -> None:
    store.save_messages("t1", [msg(3), msg(4)], resource_id="u1", created_at=20.0)
    # a turn that began before, saved after (it waited for an approval)
    store.save_messages("t1", [msg(1), msg(2)], resource_id="u1", created_at=10.0)
    store.save_messages("t1", [msg(5)], resource_id="u1", created_at=20.0)  # (then: saved)
    assert ids(store.last_messages("t1", 10)) == ["m0001", "m0002", "m0003", "m0004", "m0005"]
    assert ids(store.last_messages("t1", 2)) == ["m0004", "m0005"]
    assert ids(store.neighbours("t1", "m0002", before=1, after=1)) == [
        "m0001", "m0002", "m0003"]
    assert ids(store.messages_by_id("t1", ["m0005", "m0001", "m0003"])) == [
        "m0001", "m0003", "m0005"]


# --- writes of a run ------------------------------------------------------------------------
def test_a_runs_writes_go_in_one_transaction_all_or_none(store: MemoryStore) -> None:
    from interpreters.memory import NewMessages, NewVectors, NewWorkingMemory

    save(store, "bobs", msg(9), resource="bob")
    notes = working_memory_key(resource_id="ann")
    turn = (
        NewMessages(thread_id="t1", resource_id="ann", messages=(msg(1), msg(2)),
                    created_at=1.0),
        NewWorkingMemory(key=notes, text="likes tea"),
        NewVectors(thread_id="t1", resource_id="ann", vectors=(("m0001", unit(0)),)),
    )
    foreign = NewVectors(thread_id="bobs", resource_id="ann", vectors=(("m0009", unit(1)),))
    with pytest.raises(ThreadOwnerMismatch):
        store.write((*turn, foreign))  # the last one fails: none is kept
    assert store.get_thread("t1") is None
    assert store.last_messages("t1", 5) == ()
    assert store.get_working_memory(notes) is None
    assert store.search(unit(0), k=5) == ()
    store.write(turn)
    assert ids(store.last_messages("t1", 5)) == ["m0001", "m0002"]
    assert store.get_working_memory(notes) == "likes tea"
    assert [h.message_id for h in store.search(unit(0), k=5, resource_id="ann")] == ["m0001"]
    store.write(turn)  # again (a resumed durable run): nothing twice
    assert ids(store.last_messages("t1", 5)) == ["m0001", "m0002"]


def test_a_thread_working_memory_is_written_only_for_its_owner(store: MemoryStore) -> None:
    from interpreters.memory import NewWorkingMemory

    save(store, "t1", msg(1))
    key = working_memory_key(thread_id="t1")
    with pytest.raises(ThreadOwnerMismatch):
        store.write((NewWorkingMemory(key=key, text="x", thread_id="t1", resource_id="u2"),))
    assert store.get_working_memory(key) is None
    store.write((NewWorkingMemory(key=key, text="notes", thread_id="t1", resource_id="u1"),))
    assert store.get_working_memory(key) == "notes"


def test_a_nul_is_refused_where_no_store_could_keep_it(store: MemoryStore) -> None:
    with pytest.raises(ValueError, match="NUL"):
        store.set_working_memory("k", "a\x00b")
    with pytest.raises(ValueError, match="NUL"):
        save(store, "t\x00", msg(1))
    with pytest.raises(ValueError, match="NUL"):
        save(store, "t1", msg("m\x00"))
    assert store.get_working_memory("k") is None
    assert store.get_thread("t1") is None
