"""The few DBOS internals the durable runs use, in one place.

Everything else goes through DBOS's public API (`DBOS`, `DBOSClient`, `dbos.error`).
What is here has no public counterpart in DBOS 3.x:

- the system database's engine, to keep this package's own tables (heartbeats, approval
  claims, refused resumes) beside DBOS's and to write a claim and its message in one
  transaction (`DBOSClient.send_in_transaction` is public; the engine it needs is not);
- handing a PENDING run of a given executor back to its queue without counting a
  recovery attempt (`SystemDatabase.reenqueue_for_recovery`: DBOS's own recovery of a
  dead executor, which it only runs for its own executor at launch);
- the running workflow's step counter, put back before a retried checkpoint write so the
  retry writes the same step, and its ownership token;
- work done in DBOS's own transactions of a workflow's next operation (`Folds`): values
  appended to its stream in the one that records it (one commit for a step and the
  chunks published before it, or for a run's last chunks and the stream's end), and its
  ownership read in the one that looks its recorded outcome up, before its body runs
  (DBOS checks it only when the outcome is written). DBOS has no public call for
  either. One statement reads the run's status, its owner and the operation's recorded
  outcome, where DBOS reads the first and the last in two (for every operation of this
  process's workflows); it and the stream insert are built once (`_Prebuilt`), as DBOS
  builds its own hot inserts once: building them per step was a large share of a
  step's CPU.

Pinned to dbos>=3.4,<4 (pyproject.toml); written against 3.4.0.
`tests/test_durable_internals.py` fails loudly when any of these change shape.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import sqlalchemy as sa
from dbos import DBOS, DBOSClient
from dbos import error as dbos_error
from dbos._context import get_local_dbos_context
from dbos._dbos import _get_dbos_instance
from dbos._error import DBOSUnexpectedStepError, DBOSWorkflowCancelledError
from dbos._serialization import WorkflowSerializationFormat, serialize_value
from dbos._sys_db import (
    SystemDatabase,
    WorkflowStatusString,
    _dbos_stream_closed_sentinel,
    _dbos_streams_channel,
)

__all__ = ["Folds", "SystemStore", "StepPosition", "execution_token"]


class SystemStore:
    """DBOS's system database, for what its public API has no call for."""

    def __init__(self, sys_db: SystemDatabase) -> None:
        self._sys_db = sys_db

    @staticmethod
    def of(dbos: type[DBOS] | DBOSClient) -> SystemStore:
        """The system database of this process's launched DBOS, or of a client."""
        if isinstance(dbos, DBOSClient):
            return SystemStore(dbos._sys_db)
        return SystemStore(_get_dbos_instance()._sys_db)

    @property
    def engine(self) -> sa.Engine:
        return self._sys_db.engine

    @property
    def app_name(self) -> str:
        return self._sys_db.app_name or ""

    @property
    def schema(self) -> str | None:
        """The schema of DBOS's tables (PostgreSQL), None on SQLite."""
        return self._sys_db.schema

    def pending_of(self, executor_ids: list[str],
                   run_ids: list[str] | None = None) -> list[str]:
        """The PENDING runs of these executors (of `run_ids` only, when given)."""
        return [w.workflow_id for w in self._sys_db.list_workflows(
            workflow_ids=run_ids, status="PENDING", executor_id=executor_ids,
            load_input=False, load_output=False,
        )]

    def requeue(self, run_id: str, executor_ids: list[str], queue: str) -> bool:
        """Put `run_id` back on its queue (a run started in-process, on no queue: on
        `queue`) if it is PENDING on one of `executor_ids`; whether it was. The next
        worker to dequeue it resumes it from its checkpoints."""
        return self._sys_db.reenqueue_for_recovery(run_id, executor_ids, queue)

    def owner(self, run_id: str) -> str | None:
        """The ownership token of the execution that owns `run_id` now."""
        return self._sys_db.get_workflow_owner(run_id)


class StepPosition:
    """The running workflow's step counter at one moment, to put back."""

    def __init__(self) -> None:
        self._ctx = get_local_dbos_context()
        self.workflow_id: str | None = self._ctx.workflow_id if self._ctx is not None else None
        self._function_id = self._ctx.function_id if self._ctx is not None else None

    def restore(self) -> None:
        """Make the next DBOS call of this workflow the same step again."""
        if self._ctx is not None and self._function_id is not None:
            self._ctx.function_id = self._function_id


def execution_token() -> str | None:
    """The ownership token of the workflow execution running in this thread (None
    outside a workflow): another worker's takeover gives the run another one."""
    ctx = get_local_dbos_context()
    if ctx is None or not ctx.workflow_id:
        return None
    return ctx.owner_xid


class Folds:
    """Stream values written with the record of a workflow's next operation.

    `fold(key, values, close)` (in the workflow's thread) makes the next operation this
    thread records for its workflow (a step's outcome or error, a stream write) also
    append `values` to stream `key`, then DBOS's end-of-stream marker if `close`, in the
    same transaction, after DBOS's own stream row if the operation is a stream write:
    the values land exactly when that record lands (a replayed operation, recorded
    before, writes nothing again). `clear()` drops what was not written."""

    _installed: ClassVar[dict[int, Folds]] = {}
    _lock = threading.Lock()

    def __init__(self, sys_db: SystemDatabase) -> None:
        self._sys_db = sys_db
        self._local = threading.local()
        self._prebuilt = _Prebuilt.of(sys_db)
        record: Callable[..., None] = sys_db._record_operation_result_txn
        lookup: Callable[..., object] = sys_db._check_operation_execution_txn
        folds = self

        def record_with_folds(result: Any, completed_at_epoch_ms: int, conn: Any,
                              **kw: Any) -> None:
            wrote = folds._write(result["workflow_uuid"], conn)
            if wrote:  # (a transaction DBOS retries starts over)
                folds._local.written = False
            record(result, completed_at_epoch_ms, conn, **kw)
            if wrote:  # written only with the record: one that fails rolls them back
                folds._local.written = True

        def lookup_owned(workflow_id: str, function_id: int, function_name: str,
                         conn: Any) -> object:
            if folds._prebuilt is not None:
                owner = getattr(folds._local, "owner", None)
                mine = owner[1] if owner is not None and owner[0] == workflow_id else None
                return folds._prebuilt.lookup(conn, workflow_id, function_id, function_name,
                                              mine)
            folds._owns(workflow_id, conn)
            return lookup(workflow_id, function_id, function_name, conn)

        sys_db._record_operation_result_txn = record_with_folds  # type: ignore[method-assign]
        sys_db._check_operation_execution_txn = lookup_owned  # type: ignore[method-assign, assignment]

    @classmethod
    def of(cls, dbos: type[DBOS]) -> Folds:
        """The folds of this process's launched DBOS (installed once per instance)."""
        sys_db = _get_dbos_instance()._sys_db
        with cls._lock:
            found = cls._installed.get(id(sys_db))
            if found is None or found._sys_db is not sys_db:
                found = cls._installed[id(sys_db)] = Folds(sys_db)
            return found

    def fold(self, key: str, values: Sequence[bytes], close: bool = False) -> None:
        ctx = get_local_dbos_context()
        assert ctx is not None and ctx.workflow_id, "fold() outside a workflow"
        self._local.pending = (ctx.workflow_id, key, tuple(values), close)

    def check_owner(self) -> None:
        """Make the next operation's lookup of its recorded outcome (DBOS's, before its
        body runs) also read who owns the workflow (in the same statement, `_Prebuilt`;
        else in the same transaction): unless this execution does, it raises
        `DBOSWorkflowConflictIDError` and the body does not run. (DBOS checks it only
        when the outcome is written.)"""
        ctx = get_local_dbos_context()
        assert ctx is not None and ctx.workflow_id and ctx.owner_xid, "outside a workflow"
        self._local.owner = (ctx.workflow_id, ctx.owner_xid)

    def _owns(self, workflow_id: str, conn: sa.Connection) -> None:
        owner = getattr(self._local, "owner", None)
        if owner is None or owner[0] != workflow_id:
            return
        ws = self._sys_db.tables.workflow_status
        found = conn.execute(
            sa.select(ws.c.owner_xid).where(*self._sys_db._wf(ws, workflow_id))).scalar()
        if found != owner[1]:
            raise dbos_error.DBOSWorkflowConflictIDError(workflow_id)

    def clear(self) -> bool:
        """After the operation's DBOS call: whether the values were written with its
        record (then the stream's readers are told)."""
        pending = getattr(self._local, "pending", None)
        written: bool = getattr(self._local, "written", False)
        self._local.pending, self._local.written, self._local.owner = None, False, None
        if pending is not None and written:
            self._sys_db._signal_notification(_dbos_streams_channel,
                                              f"{pending[0]}::{pending[1]}")
        return written

    def _write(self, workflow_id: str, conn: sa.Connection) -> bool:
        """Insert the pending values in `conn`'s transaction; whether there were any."""
        pending = getattr(self._local, "pending", None)
        if pending is None or pending[0] != workflow_id:
            return False
        _, key, values, close = pending
        db = self._sys_db
        ctx = get_local_dbos_context()
        function_id = ctx.function_id if ctx is not None else 0
        rows = [serialize_value(v, WorkflowSerializationFormat.DEFAULT, db.serializer)
                for v in values]
        if close:
            rows.append(serialize_value(_dbos_stream_closed_sentinel,
                                        WorkflowSerializationFormat.PORTABLE, db.serializer))
        for value, serialization in rows:
            if self._prebuilt is not None:
                self._prebuilt.insert(conn, workflow_id, function_id, key, value,
                                      serialization)
            else:
                conn.execute(db._stream_insert_stmt(workflow_id, function_id, key, value,
                                                    serialization))
        # (kept pending until clear(): a transaction DBOS retries writes them again)
        return True


class _Prebuilt:
    """The two statements `Folds` runs per step, built once for a system database
    (SQLAlchemy then finds their compiled form in its cache; built per call, as DBOS's
    own helpers build them, they cost more CPU than the database's work):

    - `lookup`: DBOS's lookup of an operation's recorded outcome
      (`_check_operation_execution_txn`: the run's status, a cancelled run refused, then
      the operation's row, one recorded under another name refused), for every
      operation, with the run's owner read in the same statement where it is checked:
      one statement where DBOS's lookup was two, and the ownership read a third;
    - `insert`: DBOS's stream insert (`_stream_insert_stmt`: the value at the stream's
      next offset, computed in the statement).

    Only for an unsharded system database, whose statements these are (`of` gives None
    otherwise, and DBOS's own are used)."""

    def __init__(self, sys_db: SystemDatabase) -> None:
        self._sys_db = sys_db
        ws, oo, st = (sys_db.tables.workflow_status, sys_db.tables.operation_outputs,
                      sys_db.tables.streams)
        wid = sa.bindparam("workflow_id", type_=ws.c.workflow_uuid.type)
        fid = sa.bindparam("function_id", type_=oo.c.function_id.type)
        joined = ws.outerjoin(oo, sa.and_(oo.c.workflow_uuid == ws.c.workflow_uuid,
                                          oo.c.function_id == fid))
        recorded = (ws.c.status, oo.c.function_name, oo.c.output, oo.c.error,
                    oo.c.child_workflow_id, oo.c.serialization)
        self._lookup = sa.select(*recorded).select_from(joined).where(ws.c.workflow_uuid == wid)
        self._lookup_owner = (sa.select(*recorded, ws.c.owner_xid).select_from(joined)
                              .where(ws.c.workflow_uuid == wid))
        key = sa.bindparam("key", type_=st.c.key.type)
        offset = sa.func.coalesce(
            sa.select(sa.func.max(st.c.offset))
            .where(st.c.workflow_uuid == wid, st.c.key == key)
            .correlate(None).scalar_subquery(),
            -1,
        ) + 1
        self._insert = sa.insert(st).from_select(
            ["workflow_uuid", "function_id", "key", "value", "serialization", "offset"],
            sa.select(
                wid.label("workflow_uuid"), fid.label("function_id"), key.label("key"),
                sa.bindparam("value", type_=st.c.value.type).label("value"),
                sa.bindparam("serialization", type_=st.c.serialization.type)
                .label("serialization"),
                offset.label("offset"),
            ),
        )

    @staticmethod
    def of(sys_db: SystemDatabase) -> _Prebuilt | None:
        if not isinstance(sys_db, SystemDatabase):
            return None
        cls = type(sys_db)
        unsharded = (
            cls._wf is SystemDatabase._wf
            and cls._wf_columns is SystemDatabase._wf_columns
            and cls._key_column is SystemDatabase._key_column
            and cls._check_operation_execution_txn
            is SystemDatabase._check_operation_execution_txn
            and cls._stream_insert_stmt is SystemDatabase._stream_insert_stmt
        )
        return _Prebuilt(sys_db) if unsharded else None

    def lookup(self, conn: sa.Connection, workflow_id: str, function_id: int,
               function_name: str, owner_xid: str | None) -> dict[str, Any] | None:
        """DBOS's `_check_operation_execution_txn`, after a check that `owner_xid` (unless
        None) owns the run (`DBOSWorkflowConflictIDError`), in one statement."""
        self._sys_db._reject_shard_key(workflow_id, None)
        row = conn.execute(
            self._lookup if owner_xid is None else self._lookup_owner,
            {"workflow_id": workflow_id, "function_id": function_id},
        ).first()
        if owner_xid is not None and (row is None or row.owner_xid != owner_xid):
            raise dbos_error.DBOSWorkflowConflictIDError(workflow_id)
        if row is None:  # (DBOS's lookup asserts it)
            raise AssertionError(f"Error: Workflow {workflow_id} does not exist")
        if row.status == WorkflowStatusString.CANCELLED.value:
            raise DBOSWorkflowCancelledError(
                f"Workflow {workflow_id} is cancelled. Aborting function.")
        if row.function_name is None:  # (NOT NULL in a recorded step's row)
            return None
        if row.function_name != function_name:
            raise DBOSUnexpectedStepError(workflow_id=workflow_id, step_id=function_id,
                                          expected_name=function_name,
                                          recorded_name=row.function_name)
        return {"output": row.output, "error": row.error,
                "serialization": row.serialization,
                "child_workflow_id": row.child_workflow_id, "child_shard_key": None}

    def insert(self, conn: sa.Connection, workflow_id: str, function_id: int, key: str,
               value: str | None, serialization: str | None) -> None:
        """DBOS's `_stream_insert_stmt(...)`, executed."""
        conn.execute(self._insert, {"workflow_id": workflow_id, "function_id": function_id,
                                    "key": key, "value": value,
                                    "serialization": serialization})
