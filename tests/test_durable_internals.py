"""The DBOS internals `interpreters.durable.dbos.internals` relies on (DBOS has no
public call for them) are still there and still behave as it expects: an upgrade of
dbos that changes them fails here, by name, rather than in a run."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

import dbos
import pytest
import sqlalchemy as sa
from dbos import DBOS, DBOSClient
from dbos._dbos import _get_dbos_instance
from dbos._error import DBOSWorkflowCancelledError
from dbos._serialization import DBOSDefaultSerializer
from dbos._sys_db import SystemDatabase

from interpreters.durable.dbos.internals import (
    Folds,
    StepPosition,
    SystemStore,
    _Prebuilt,
    execution_token,
)
from interpreters.durable.dbos.runs import DurableRuns
from interpreters.testing import Say, ScriptedModel, call
from pipeline.tools import tool
from pipeline.tools.context import ToolContext
from tests.durable_harness import databases
from tests.helpers import make_agent


def _params(fn: object) -> list[str]:
    assert callable(fn)
    return list(inspect.signature(fn).parameters)


def test_the_private_dbos_names_used_are_there_with_the_expected_shapes() -> None:
    from dbos._context import DBOSContext, get_local_dbos_context
    from dbos._dbos import _get_dbos_instance
    from dbos._sys_db import SystemDatabase

    assert callable(_get_dbos_instance) and callable(get_local_dbos_context)
    assert _params(SystemDatabase.reenqueue_for_recovery) == [
        "self", "workflow_id", "executor_ids", "recovery_queue_name"]
    assert _params(SystemDatabase.get_workflow_owner) == ["self", "workflow_id"]
    listed = _params(SystemDatabase.list_workflows)
    for name in ("status", "executor_id", "load_input", "load_output"):
        assert name in listed, name
    ctx = DBOSContext()
    for attr in ("workflow_id", "function_id", "owner_xid"):
        assert hasattr(ctx, attr), attr
    # the public names used instead of private ones
    assert "error" in dbos.__all__
    assert issubclass(dbos.error.DBOSWorkflowConflictIDError, BaseException)
    assert issubclass(dbos.error.DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded, Exception)
    assert "send_in_transaction" in dir(DBOSClient)
    # folds: a step's record written with stream rows in its transaction
    from dbos._serialization import WorkflowSerializationFormat, serialize_value
    from dbos._sys_db import _dbos_stream_closed_sentinel, _dbos_streams_channel

    assert _params(SystemDatabase._record_operation_result_txn)[:4] == [
        "self", "result", "completed_at_epoch_ms", "conn"]
    assert _params(SystemDatabase._check_operation_execution_txn) == [
        "self", "workflow_id", "function_id", "function_name", "conn"]
    assert "_check_operation_execution_txn" in inspect.getsource(
        SystemDatabase.check_operation_execution)
    assert _params(SystemDatabase._wf)[:3] == ["self", "table", "workflow_id"]
    # the prebuilt lookup and insert: DBOS's, for an unsharded system database
    assert _params(SystemDatabase._reject_shard_key) == ["workflow_id", "shard_key"]
    assert _params(SystemDatabase._wf_columns) == ["self", "workflow_id"]
    assert _params(SystemDatabase._key_column)[:3] == ["self", "table", "column"]
    from dbos._error import DBOSUnexpectedStepError
    from dbos._sys_db import WorkflowStatusString

    assert WorkflowStatusString.CANCELLED.value == "CANCELLED"
    assert _params(DBOSUnexpectedStepError) == [
        "workflow_id", "step_id", "expected_name", "recorded_name"]
    assert _params(SystemDatabase._stream_insert_stmt) == [
        "self", "workflow_uuid", "function_id", "key", "serialized_value", "serialization"]
    assert _params(SystemDatabase._signal_notification) == ["self", "channel", "payload"]
    assert _params(serialize_value) == ["value", "serialization_type", "serializer"]
    assert {"DEFAULT", "PORTABLE"} <= set(WorkflowSerializationFormat.__members__)
    assert isinstance(_dbos_stream_closed_sentinel, str)
    assert isinstance(_dbos_streams_channel, str)
    # the step's record and the stream write go through the same transaction function
    assert "_record_operation_result_txn" in inspect.getsource(
        SystemDatabase.record_operation_result)
    assert "_record_operation_result_txn" in inspect.getsource(
        SystemDatabase.write_stream_from_workflow)


def test_the_internals_work_on_a_launched_dbos_and_a_client(tmp_path: Path) -> None:
    seen: list[tuple[str | None, str | None, str | None]] = []

    def probe(ctx: ToolContext[None], x: int) -> int:
        """Reads what a step's body sees."""
        store = SystemStore.of(DBOS)
        seen.append((execution_token(), store.owner(ctx.run.run_id), StepPosition().workflow_id))
        return x

    agent = make_agent(tools=[tool(probe)])
    model = ScriptedModel([Say(calls=[call("probe", x=1)]), Say("ok")])
    url = f"sqlite:///{tmp_path / 'i.sqlite'}"
    with DurableRuns({"a": agent}, model, database_url=url, observers=(),
                     takeover=None) as runs:
        assert runs.run("a", "hi", run_id="i1", wait=60).text == "ok"
        store = SystemStore.of(DBOS)
        assert isinstance(store.engine, sa.Engine) and store.app_name
        assert store.pending_of([DBOS.executor_id]) == []
        assert store.requeue("i1", [DBOS.executor_id], runs.queue) is False  # not PENDING
        assert runs.status("i1") == "SUCCESS"
        client = DBOSClient(system_database_url=url)
        try:
            assert SystemStore.of(client).engine.url.database == store.engine.url.database
        finally:
            client.destroy()
    ((token, owner, workflow),) = seen
    assert token is not None and token == owner
    assert workflow == "i1"
    assert execution_token() is None  # outside a workflow


def test_a_step_position_outside_a_workflow_restores_nothing() -> None:
    here = StepPosition()
    assert here.workflow_id is None
    here.restore()


class _FakeSystemDatabase:
    """The parts of DBOS's system database `Folds` uses; its record of an operation's
    outcome fails (after the folded rows were inserted) when `refuse` is set."""

    def __init__(self) -> None:
        self.refuse = False
        self.serializer = DBOSDefaultSerializer
        self.inserted: list[str] = []
        self.signalled: list[str] = []

    def _record_operation_result_txn(self, result: dict[str, str], completed_at: int,
                                     conn: object) -> None:
        if self.refuse:
            raise RuntimeError("the record was not written: its transaction rolls back")

    def _check_operation_execution_txn(self, workflow_id: str, function_id: int,
                                       function_name: str, conn: object) -> None:
        return None

    def _stream_insert_stmt(self, workflow_id: str, function_id: int, key: str,
                            value: str, serialization: object) -> str:
        return value

    def _signal_notification(self, channel: str, payload: str) -> None:
        self.signalled.append(payload)


class _Conn:
    def __init__(self, db: _FakeSystemDatabase) -> None:
        self.db = db

    def execute(self, stmt: str) -> None:
        self.db.inserted.append(stmt)


def test_folded_values_count_as_written_only_once_their_operation_is_recorded() -> None:
    # A record that fails after the folded rows went into its transaction rolls them
    # back too: `clear()` must not report them written (the caller would drop them).
    db = _FakeSystemDatabase()
    folds = Folds(db)  # type: ignore[arg-type]
    for refuse in (True, False):
        db.refuse = refuse
        folds._local.pending = ("wf", "chunks", (b"x",), False)  # as `fold` leaves it
        try:
            db._record_operation_result_txn({"workflow_uuid": "wf"}, 0, _Conn(db))
        except RuntimeError:
            assert refuse
        assert folds.clear() is not refuse
    assert db.signalled == ["wf::chunks"]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_the_one_statement_lookup_and_stream_insert_answer_as_dbos_own(
    kind: str, tmp_path: Path
) -> None:
    # `Folds` looks a step's outcome up, with the run's owner, in one prebuilt statement
    # and appends stream values with a prebuilt insert: each must answer exactly as DBOS's
    # own statements (a recorded step, none, another name, a cancelled run, another
    # owner; the same stream rows at the same offsets).
    agent = make_agent(tools=[tool(_double)])
    model = ScriptedModel([Say(calls=[call("_double", x=2)]), Say("ok")])
    url = databases(kind)(tmp_path)
    with DurableRuns({"a": agent}, model, database_url=url, observers=(),
                     takeover=None, stream="with_steps") as runs:
        assert runs.run("a", "hi", run_id="p1", wait=60).text == "ok"
        sys_db = _get_dbos_instance()._sys_db
        prebuilt = _Prebuilt.of(sys_db)
        assert prebuilt is not None
        owner = "the-owner-token"  # (an ended run has none: set in the rolled-back transaction)
        recorded = [(s["function_id"], s["function_name"])
                    for s in DBOS.list_workflow_steps("p1")]
        assert "tool:_double" in [n for _, n in recorded]

        def both(conn: sa.Connection, function_id: int, name: str, owner_xid: str | None,
                 run_id: str = "p1") -> tuple[object, object]:
            got: list[object] = []
            lookups: tuple[Callable[[], object], ...] = (
                lambda: prebuilt.lookup(conn, run_id, function_id, name, owner_xid),
                lambda: _dbos_lookup(sys_db, conn, run_id, function_id, name, owner_xid),
            )
            for lookup in lookups:
                try:
                    got.append(lookup())
                except BaseException as e:  # (DBOS's conflict is one)
                    got.append((type(e), str(e)))
            return got[0], got[1]

        ws = sys_db.tables.workflow_status
        with sys_db.engine.connect() as conn, conn.begin():
            conn.execute(sa.update(ws).where(ws.c.workflow_uuid == "p1")
                         .values(owner_xid=owner))
            for function_id, name in recorded:
                ours, theirs = both(conn, function_id, name, owner)
                assert isinstance(ours, dict) and ours == theirs, (function_id, name)
            for function_id, name in recorded:  # (an operation checking no owner)
                ours, theirs = both(conn, function_id, name, None)
                assert isinstance(ours, dict) and ours == theirs, (function_id, name)
            first, name = recorded[0]
            cases: list[tuple[str, int, str, str | None]] = [
                ("p1", first, "another-name", owner), ("p1", 1000, "model", owner),
                ("p1", first, name, "another-owner"), ("p1", first, "another-name", None),
                ("p1", 1000, "model", None), ("no-such-run", first, name, owner),
                ("no-such-run", first, name, None)]
            for run_id, function_id, name, owner_xid in cases:
                ours, theirs = both(conn, function_id, name, owner_xid, run_id)
                assert ours == theirs, (run_id, function_id, name, owner_xid)
            assert both(conn, first, name, "x")[0] == (
                dbos.error.DBOSWorkflowConflictIDError,
                str(dbos.error.DBOSWorkflowConflictIDError("p1")))
            conn.execute(sa.update(ws).where(ws.c.workflow_uuid == "p1")
                         .values(status="CANCELLED"))
            ours, theirs = both(conn, first, name, owner)
            assert ours == theirs and isinstance(ours, tuple), ours
            assert ours[0] is DBOSWorkflowCancelledError
            st = sys_db.tables.streams
            written = sa.select(st.c.function_id, st.c.key, st.c.value, st.c.serialization,
                                st.c.offset).where(st.c.workflow_uuid == "p1") \
                .order_by(st.c.key, st.c.offset)
            before = conn.execute(written).all()
            for k, (value, ser) in enumerate([("v1", "s1"), ("v2", None), ("v3", "s3")]):
                for key in ("ours", "dbos"):
                    if key == "ours":
                        prebuilt.insert(conn, "p1", 90 + k, key, value, ser)
                    else:
                        conn.execute(sys_db._stream_insert_stmt("p1", 90 + k, key, value, ser))
                prebuilt.insert(conn, "p1", 95, "chunks", f"more{k}", "s")
            rows = conn.execute(written).all()

            def stream(key: str) -> list[tuple[object, ...]]:
                return [(r.function_id, r.value, r.serialization, r.offset)
                        for r in rows if r.key == key]

            assert stream("ours") == stream("dbos") and len(stream("ours")) == 3
            chunks = [r for r in rows if r.key == "chunks"]
            offsets = [r.offset for r in chunks]
            assert offsets == list(range(len(offsets))) and len(chunks) == len(
                [r for r in before if r.key == "chunks"]) + 3
            conn.rollback()


def _double(x: int) -> int:
    """Doubles x."""
    return 2 * x


def _dbos_lookup(sys_db: SystemDatabase, conn: sa.Connection, workflow_id: str,
                 function_id: int, name: str, owner_xid: str | None) -> object:
    """The ownership read `Folds` made before DBOS's own lookup (with an owner to
    check), then DBOS's lookup."""
    ws = sys_db.tables.workflow_status
    found = conn.execute(sa.select(ws.c.owner_xid).where(ws.c.workflow_uuid == workflow_id)
                         ).scalar()
    if owner_xid is not None and found != owner_xid:
        raise dbos.error.DBOSWorkflowConflictIDError(workflow_id)
    return SystemDatabase._check_operation_execution_txn(sys_db, workflow_id, function_id,
                                                         name, conn)
