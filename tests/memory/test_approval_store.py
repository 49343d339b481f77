"""The approval stores (in memory, SQLite, PostgreSQL) keep a suspended run and hand it
out once: the same contract on each, a suspension that round-trips (messages, steps,
processor states), typed errors for what cannot be stored, a corrupt row and an
unreachable store, and one taker of a run across processes."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import sqlite3
from pathlib import Path

import msgspec
import pytest

from effects import AskApproval
from interpreters.approvals.sql import (
    APPROVAL_SCHEMA_VERSION,
    POSTGRES_MIGRATIONS,
    SQLITE_MIGRATIONS,
    ApprovalStoreError,
    ApprovalStoreUnavailable,
    CorruptStoredSuspension,
    PostgresApprovalStore,
    SQLiteApprovalStore,
    SuspensionNotStorable,
    encode_suspension,
    open_approval_store,
)
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.approval import AgentChanged, RunNotSuspended, UnknownRun, approve, typed_states
from pipeline.processor import (
    ToolCallArgs,
    ToolCallResult,
    ToolResultArgs,
    ToolResultResult,
    processor,
)
from pipeline.processors.budget import Spent
from pipeline.values.result import Suspension
from tests.memory.approval_runs import (
    make_payer,
    resume_in_process,
    suspend_in_process,
    take_at_once,
)
from tests.memory.conftest import Storage, fresh_schema


def suspended(tmp_path: Path, text: str = "pay eve") -> Suspension:
    """A real suspension: messages, a step with its tool call, a budget's state."""
    sim = Simulator(ScriptedModel([Say(calls=[call("send", to="eve", amount=500)])]))
    r = sim.run(make_payer(tmp_path / "payments.log"), text).result
    assert r.status == "suspended" and r.suspension is not None
    return r.suspension


# --- the contract ----------------------------------------------------------------------


def test_a_kept_suspension_is_waiting_then_taken_once(storage: Storage, tmp_path: Path) -> None:
    store, s = storage.open(), suspended(tmp_path)
    store.save(s)
    assert store.get(s.run_id) is not None
    assert store.take(s.run_id).run_id == s.run_id
    assert store.get(s.run_id) is None
    with pytest.raises(RunNotSuspended):
        store.take(s.run_id)
    with pytest.raises(RunNotSuspended):  # another opener of the same storage
        storage.open().take(s.run_id)


def test_an_unknown_run_is_unknown(storage: Storage) -> None:
    store = storage.open()
    assert store.get("nope") is None
    with pytest.raises(UnknownRun):
        store.take("nope")


@pytest.mark.parametrize("run_id", ["", 7, None])
def test_a_run_id_that_is_no_run_id_is_a_type_error_in_every_store(
    storage: Storage, run_id: object
) -> None:
    store = storage.open()
    with pytest.raises(TypeError, match="run id"):
        store.get(run_id)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="run id"):
        store.take(run_id)  # type: ignore[arg-type]


def test_a_run_suspended_again_replaces_the_old_one(storage: Storage, tmp_path: Path) -> None:
    store, first = storage.open(), suspended(tmp_path, "pay eve")
    again = msgspec.structs.replace(suspended(tmp_path, "pay eve now"), run_id=first.run_id)
    store.save(first)
    store.take(first.run_id)
    store.save(again)  # the resumed run suspended again
    assert store.get(first.run_id) is not None
    assert store.take(first.run_id).messages == again.messages
    store.save(first)
    store.save(again)  # replaced while waiting: the newer one waits
    assert store.take(first.run_id).messages == again.messages


def test_the_suspension_round_trips_its_messages_steps_and_typed_states(
    storage: Storage, tmp_path: Path
) -> None:
    s = suspended(tmp_path)
    storage.open().save(s)
    back = storage.open().take(s.run_id)
    agent = make_payer(tmp_path / "payments.log")
    typed = typed_states(agent, back)
    assert typed == s
    assert any(isinstance(state, Spent) for state in typed.states)


def _owned(s: Suspension, run_id: str, thread: str | None, resource: str | None) -> Suspension:
    return msgspec.structs.replace(s, run_id=run_id, thread_id=thread, resource_id=resource)


def test_a_store_lists_what_waits_in_a_thread_or_for_a_resource(
    storage: Storage, tmp_path: Path
) -> None:
    store, s = storage.open(), suspended(tmp_path)
    runs = [_owned(s, "r1", "t1", "alice"), _owned(s, "r2", "t1", "bob"),
            _owned(s, "r3", "t2", "alice"), _owned(s, "r4", None, None)]
    for r in runs:
        store.save(r)

    def ids(**by: str | int) -> list[str]:
        return [w.run_id for w in storage.open().suspended(**by)]  # type: ignore[arg-type]

    assert ids(thread_id="t1") == ["r1", "r2"]  # in the order they suspended
    assert ids(resource_id="alice") == ["r1", "r3"]
    assert ids(thread_id="t1", resource_id="alice") == ["r1"]
    assert ids() == ["r1", "r2", "r3", "r4"]
    assert ids(thread_id="t1", limit=1) == ["r1"]
    assert ids(thread_id="t3") == []
    payer = make_payer(tmp_path / "payments.log")
    assert typed_states(payer, storage.open().suspended(thread_id="t1")[0]) == runs[0]
    store.take("r1")  # taken: no longer waiting
    assert ids(thread_id="t1") == ["r2"]
    store.save(runs[0])  # resumed and suspended again: waits again, the latest
    assert ids(thread_id="t1") == ["r2", "r1"]
    for bad in (0, -1, 10_001, True, 1.5):
        with pytest.raises((ValueError, TypeError)):
            store.suspended(thread_id="t1", limit=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.suspended(thread_id=5)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_tables_of_the_first_schema_version_are_migrated_and_their_runs_kept(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    s = suspended(tmp_path)
    body = encode_suspension(s)
    if kind == "sqlite":
        path = tmp_path / "runs.db"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE approval_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO approval_schema VALUES (1)")
            for sql in SQLITE_MIGRATIONS[0]:
                conn.execute(sql)
            conn.execute("INSERT INTO approval_runs VALUES (?, ?, 0)", (s.run_id, body))
        conn.close()
        store: SQLiteApprovalStore | PostgresApprovalStore = SQLiteApprovalStore(path)
    else:
        import psycopg
        from psycopg import sql as pgsql

        url: str = request.getfixturevalue("pgvector_url")
        schemas = fresh_schema(url)
        schema = next(schemas)
        request.addfinalizer(lambda: next(schemas, None))
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute(pgsql.SQL("CREATE SCHEMA {}").format(pgsql.Identifier(schema)))
            pg.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
            pg.execute("CREATE TABLE approval_schema (version integer NOT NULL)")
            pg.execute("INSERT INTO approval_schema VALUES (1)")
            for step in POSTGRES_MIGRATIONS[0]:
                pg.execute(step)
            pg.execute("INSERT INTO approval_runs VALUES (%s, %s, false)", (s.run_id, body))
        store = PostgresApprovalStore(url, schema=schema, pool_size=1)
    try:
        assert APPROVAL_SCHEMA_VERSION >= 2
        assert [w.run_id for w in store.suspended()] == [s.run_id]
        assert store.suspended(thread_id="t1") == ()  # kept before runs had an owner
        store.save(_owned(s, "r2", "t1", None))
        assert [w.run_id for w in store.suspended()] == [s.run_id, "r2"]
        assert store.take(s.run_id).messages == s.messages
    finally:
        store.close()


# --- faults ------------------------------------------------------------------------------


class Opaque:
    """A processor state msgspec cannot encode."""


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_state_that_does_not_encode_is_refused_at_save_and_nothing_is_kept(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if kind == "sqlite":
        store: SQLiteApprovalStore | PostgresApprovalStore = SQLiteApprovalStore(
            tmp_path / "runs.db")
    else:
        url: str = request.getfixturevalue("pgvector_url")
        schemas = fresh_schema(url)
        store = PostgresApprovalStore(url, schema=next(schemas), pool_size=1)
        request.addfinalizer(lambda: next(schemas, None))
    try:
        s = suspended(tmp_path)
        bad = msgspec.structs.replace(s, states=(*s.states[:1], Opaque()))
        with pytest.raises(SuspensionNotStorable,
                           match=r"the state of processor 'budget' \(of type Opaque\)"):
            store.save(bad)
        assert store.get(s.run_id) is None
    finally:
        store.close()


def test_a_corrupt_row_is_a_typed_error_and_stays_waiting(
    storage: Storage, tmp_path: Path
) -> None:
    if storage.corrupt is None:
        pytest.skip("the in-memory store keeps objects")
    store, s = storage.open(), suspended(tmp_path)
    store.save(s)
    storage.corrupt(s.run_id)
    with pytest.raises(CorruptStoredSuspension, match=s.run_id):
        store.get(s.run_id)
    with pytest.raises(CorruptStoredSuspension):
        store.take(s.run_id)
    with pytest.raises(CorruptStoredSuspension):  # not taken by the failed take
        store.take(s.run_id)
    store.save(s)  # a good one saved over it
    assert typed_states(make_payer(tmp_path / "payments.log"), store.take(s.run_id)) == s


def test_an_unreachable_sqlite_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ApprovalStoreUnavailable):
        SQLiteApprovalStore(tmp_path / "no-such-dir" / "runs.db")
    store = SQLiteApprovalStore(tmp_path / "runs.db")
    store.close()
    with pytest.raises(ApprovalStoreUnavailable):
        store.get("r")


def test_an_unreachable_postgres_server_is_a_typed_error(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    # A Unix socket directory where no server listens: refused at once.
    with pytest.raises(ApprovalStoreUnavailable):
        PostgresApprovalStore(f"postgresql:///db?host={tmp_path}", timeout=1)


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    SQLiteApprovalStore(tmp_path / "runs.db").close()
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        conn.execute("UPDATE approval_schema SET version = ?", (APPROVAL_SCHEMA_VERSION + 1,))
    with pytest.raises(ApprovalStoreError, match="newer"):
        SQLiteApprovalStore(tmp_path / "runs.db")


def test_an_approval_schema_version_that_is_no_version_is_a_typed_error(tmp_path: Path) -> None:
    SQLiteApprovalStore(tmp_path / "runs.db").close()
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        conn.execute("UPDATE approval_schema SET version = 'one'")
    with pytest.raises(ApprovalStoreError, match=r"runs\.db.*version 'one'"):
        SQLiteApprovalStore(tmp_path / "runs.db")


def test_a_sqlite_store_shares_an_open_memory_store(tmp_path: Path) -> None:
    from interpreters.memory.sqlite import SQLiteStore

    memory = SQLiteStore(tmp_path / "chat.db")
    store = SQLiteApprovalStore(memory)
    s = suspended(tmp_path)
    store.save(s)
    store.close()  # not its own: the memory store stays open
    assert store.take(s.run_id).messages == s.messages
    memory.close()


# --- across processes --------------------------------------------------------------------


def test_two_processes_taking_one_run_at_once_one_gets_it(
    storage: Storage, tmp_path: Path
) -> None:
    if storage.where is None:
        pytest.skip("the in-memory store is one process's")
    s = suspended(tmp_path)
    storage.open().save(s)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, concurrent.futures.ProcessPoolExecutor(
        2, mp_context=ctx
    ) as pool:
        start = manager.Barrier(2)
        futures = [pool.submit(take_at_once, storage.where, s.run_id, start) for _ in "ab"]
        got = sorted(f.result(timeout=120) for f in futures)
    assert got == ["not suspended", "took"]


def test_a_run_suspended_in_one_process_is_resumed_in_another_its_tool_run_once(
    tmp_path: Path,
) -> None:
    db, log = str(tmp_path / "runs.db"), tmp_path / "payments.log"
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        run_id = pool.submit(suspend_in_process, db, str(log)).result(timeout=120)
    assert not log.exists()  # nothing ran before the approval
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        done = pool.submit(resume_in_process, db, str(log), run_id).result(timeout=120)
    assert done == ("finished", "paid")
    with (
        concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool,
        pytest.raises(RunNotSuspended),
    ):  # a retry of the resume, in yet another process
        pool.submit(resume_in_process, db, str(log), run_id).result(timeout=120)
    assert log.read_text().splitlines() == ["eve 500"]


def test_approvals_take_types_the_stored_states_for_the_resumed_run(tmp_path: Path) -> None:
    store = SQLiteApprovalStore(tmp_path / "runs.db")
    agent = make_payer(tmp_path / "payments.log")
    s = suspended(tmp_path)
    store.save(s)
    go_on = Approvals(store).take(agent, s.run_id, [approve(p) for p in s.pending])
    assert go_on.suspension == s
    sim = Simulator(ScriptedModel([Say("paid")]))
    assert sim.run(agent, (), resume=go_on).result.text == "paid"
    assert (tmp_path / "payments.log").read_text() == "eve 500\n"
    store.close()


def test_a_store_opens_by_url(tmp_path: Path) -> None:
    s = suspended(tmp_path)
    store = open_approval_store(f"sqlite:///{tmp_path}/runs.db")
    assert isinstance(store, SQLiteApprovalStore)
    store.save(s)
    store.close()
    again = open_approval_store(f"sqlite:///{tmp_path}/runs.db")
    assert again.take(s.run_id).messages == s.messages
    again.close()
    assert isinstance(open_approval_store("memory://"), MemoryApprovalStore)
    with pytest.raises(ValueError, match="not a memory store URL"):
        open_approval_store("redis://x")
    with pytest.raises(ApprovalStoreUnavailable):
        open_approval_store(f"sqlite:///{tmp_path}/no-such-dir/runs.db")


# --- a changed agent ---------------------------------------------------------------------


def _changed_payers(log: Path) -> dict[str, Agent]:
    """The payer with one processor changed: another id, or another set of hooks."""
    from effects import Continue

    def ask(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return AskApproval("ok?")

    def seen(a: ToolResultArgs[None]) -> ToolResultResult[None]:
        return Continue()

    base = make_payer(log)
    budget = base.input_processors[1]
    return {
        "another processor id": msgspec.structs.replace(base, input_processors=(
            processor("approve-payments", process_tool_call=ask), budget)),
        "another hook set": msgspec.structs.replace(base, input_processors=(
            processor("approve", process_tool_call=ask, process_tool_result=seen), budget)),
        "a processor less": msgspec.structs.replace(base, input_processors=(
            processor("approve", process_tool_call=ask),)),
    }


@pytest.mark.parametrize("change", ["another processor id", "another hook set",
                                    "a processor less"])
def test_a_changed_processor_is_agent_changed_on_resume_and_the_run_still_waits(
    storage: Storage, tmp_path: Path, change: str
) -> None:
    s = suspended(tmp_path)
    storage.open().save(s)
    changed = _changed_payers(tmp_path / "payments.log")[change]
    approvals = Approvals(storage.open())
    with pytest.raises(AgentChanged):
        approvals.take(changed, s.run_id, [approve(p) for p in s.pending])
    with pytest.raises(AgentChanged):
        Approvals(storage.open(), changed).decide(s.run_id, [approve(p) for p in s.pending])
    assert storage.open().get(s.run_id) is not None  # not taken
    assert not (tmp_path / "payments.log").exists()
    same = make_payer(tmp_path / "payments.log")  # the agent it suspended on resumes it
    go_on = approvals.take(same, s.run_id, [approve(p) for p in s.pending])
    assert Simulator(ScriptedModel([Say("paid")])).run(same, (), resume=go_on).result.text == "paid"


# --- a suspended tree of runs --------------------------------------------------------------


def _team(log: Path) -> Agent:
    """A root calling a note taker (which saves its thread) and the payer (which waits)."""
    from pipeline.processors import MessageHistory

    notes = Agent.create("sim/notes", name="notes", input_processors=[MessageHistory()])
    return Agent.create("sim/root", name="root", tools=[
        notes, make_payer(log).as_tool("payer", "Pay someone."),
    ], input_processors=[MessageHistory()])


def _team_models() -> dict[str, ScriptedModel]:
    return {
        "sim/root": ScriptedModel([
            Say(calls=[call("notes", input="note the payment"), call("payer", input="pay eve")]),
            Say("done"),
        ]),
        "sim/notes": ScriptedModel([Say("noted")]),
        "sim/model": ScriptedModel([Say(calls=[call("send", to="eve", amount=500)]),
                                    Say("sent")]),
    }


def test_a_suspended_tree_round_trips_its_finished_childs_writes_and_its_waiting_childs_states(
    storage: Storage, tmp_path: Path
) -> None:
    from interpreters.memory import HashEmbedder, InMemoryStore, memory_handlers
    from pipeline.processors.memory.requests import SaveMessages

    memory = InMemoryStore()
    team = _team(tmp_path / "payments.log")
    models = _team_models()
    sim = Simulator(models["sim/root"], models=models,
                    handlers=memory_handlers(memory, HashEmbedder()))
    first = sim.run(team, "pay eve", thread_id="t").result
    assert first.status == "suspended" and first.suspension is not None
    s = first.suspension
    (kept,) = [g.kept for g in s.calls if g.kept is not None]
    assert kept.writes and all(isinstance(w, SaveMessages) for _, w in kept.writes)
    storage.open().save(s)

    desk = Approvals(storage.open(), team)
    go_on = desk.decide(s.run_id, [approve(p) for p in s.pending])
    assert go_on.suspension == s  # the writes typed again, the child's states too
    (waiting,) = [g.child for g in go_on.suspension.calls if g.child is not None]
    assert any(isinstance(state, Spent) for state in waiting.states)
    done = sim.run(team, (), resume=go_on).result
    assert done.status == "finished"
    assert [m.text for m in memory.last_messages("t/notes", 10)] == ["note the payment", "noted"]
    assert (tmp_path / "payments.log").read_text() == "eve 500\n"
