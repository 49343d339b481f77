"""The audit trail in each approval store (in memory, SQLite, PostgreSQL): one record per
suspension and per decision, appended with the save or take it goes with, listed and
exported; the SQL tables refuse a change or removal; a wait that expires is denied,
never run, and recorded expired."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest

from interpreters.approvals.audit import AuditRecord
from interpreters.approvals.policy import ApprovalPolicy, ToolApprovalRule
from interpreters.approvals.sql import SQLiteApprovalStore
from interpreters.approvals.store import Approvals, ApprovalStore
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.approval import ApprovalExpired, approve, call_digest, deny, edit
from pipeline.tools import tool
from pipeline.values.result import RunResult, Suspension
from tests.memory.conftest import Storage
from tests.refund_tool import ran, refund


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order} is known"


AGENT = Agent.create("sim/model", tools=[tool(refund, needs_approval=True),
                                         tool(lookup, needs_approval=True)])


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _sim() -> Simulator:
    return Simulator(ScriptedModel([
        Say(calls=[call("refund", order="A1", amount=50), call("lookup", order="A1")]),
        Say("done"),
    ]))


def _waiting(sim: Simulator, approvals: Approvals) -> Suspension:
    r = approvals.keep(sim.run(AGENT, "refund A1", thread_id="chat-1",
                               resource_id="cust-1").result)
    assert r.status == "suspended" and r.suspension is not None
    return r.suspension


def test_every_suspension_and_decision_leaves_one_record_in_order(storage: Storage) -> None:
    clock = Clock()
    approvals = Approvals(storage.open(), AGENT, clock=clock)
    sim = _sim()
    s = _waiting(sim, approvals)
    refund_p, lookup_p = s.pending
    clock.now += 30
    go_on = approvals.decide(s.run_id, [
        edit(refund_p, {"order": "A1", "amount": 40}, by="ann", reason="partial"),
        deny(lookup_p, "not needed", by="bob"),
    ])
    assert sim.run(AGENT, (), resume=go_on).result.status == "finished"
    records = approvals.audit(run_id=s.run_id)
    assert [(r.tool_name, r.outcome, r.decided_by, r.reason, r.at) for r in records] == [
        ("refund", "waiting", "", "", 1000.0), ("lookup", "waiting", "", "", 1000.0),
        ("refund", "edited", "ann", "partial", 1030.0),
        ("lookup", "denied", "bob", "not needed", 1030.0),
    ]
    assert all((r.run_id, r.thread_id, r.resource_id) == (s.run_id, "chat-1", "cust-1")
               for r in records)
    assert [r.digest for r in records] == [refund_p.digest, lookup_p.digest] * 2
    assert records[2].edited_digest == call_digest(refund_p.tool_call_id, "refund",
                                                   {"order": "A1", "amount": 40})
    seqs = [r.seq for r in records]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    assert approvals.audit(run_id=s.run_id, after=seqs[1]) == records[2:]
    assert approvals.audit(thread_id="chat-1", limit=1) == records[:1]
    assert approvals.audit(resource_id="someone-else") == ()
    exported = [msgspec.json.decode(line, type=AuditRecord)
                for line in approvals.export_audit(run_id=s.run_id)]
    assert exported == list(records)


def test_a_second_view_of_the_store_reads_the_same_trail(storage: Storage) -> None:
    here = Approvals(storage.open(), AGENT)
    s = _waiting(_sim(), here)
    there = Approvals(storage.open(), AGENT)
    assert there.audit(run_id=s.run_id) == here.audit(run_id=s.run_id)
    assert len(there.audit(run_id=s.run_id)) == 2


def test_the_sqlite_trail_refuses_a_change_or_a_removal(tmp_path: Path) -> None:
    store = SQLiteApprovalStore(tmp_path / "runs.db")
    _waiting(_sim(), Approvals(store, AGENT))
    store.close()
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        for sql in ("UPDATE approval_audit SET outcome = 'approved'",
                    "DELETE FROM approval_audit"):
            with pytest.raises(sqlite3.DatabaseError, match="never"):
                conn.execute(sql)
        assert conn.execute("SELECT count(*) FROM approval_audit").fetchone() == (2,)


def test_the_postgres_trail_refuses_a_change_or_a_removal(pgvector_url: str) -> None:
    import psycopg

    from interpreters.approvals.sql import PostgresApprovalStore
    from tests.memory.conftest import fresh_schema

    schemas = fresh_schema(pgvector_url)
    schema = next(schemas)
    store = PostgresApprovalStore(pgvector_url, schema=schema, pool_size=1)
    try:
        _waiting(_sim(), Approvals(store, AGENT))
    finally:
        store.close()
    with psycopg.connect(pgvector_url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        for sql in ("UPDATE approval_audit SET outcome = 'approved'",
                    "DELETE FROM approval_audit", "TRUNCATE approval_audit"):
            with pytest.raises(psycopg.Error, match="never changed or removed"):
                conn.execute(sql)
        row = conn.execute("SELECT count(*) FROM approval_audit").fetchone()
        assert row is not None and row[0] == 2
    next(schemas, None)


def _results(r: RunResult) -> list[object]:
    return [p.result for m in r.messages.messages for p in m.tool_results()]


def test_a_wait_past_its_deadline_is_denied_never_run_and_listed_as_expired(
    storage: Storage,
) -> None:
    clock = Clock()
    policy = ApprovalPolicy(expires_after=600,
                            tools={"refund": ToolApprovalRule(expires_after=60)})
    approvals = Approvals(storage.open(), AGENT, policy=policy, clock=clock)
    sim = _sim()
    s = _waiting(sim, approvals)
    assert approvals.audit(run_id=s.run_id)[0].expires_at == 1060.0  # the refund's, sooner
    clock.now += 59
    assert [r.run_id for r in approvals.suspended()] == [s.run_id]
    clock.now += 1
    with pytest.raises(ApprovalExpired):
        approvals.decide(s.run_id, [approve(p, by="ann") for p in s.pending])
    assert approvals.suspended() == () and ran == []
    assert [r.outcome for r in approvals.audit(run_id=s.run_id)] == [
        "waiting", "waiting", "expired", "expired"]
    with pytest.raises(ApprovalExpired):  # and stays so
        approvals.decide(s.run_id, [approve(p, by="ann") for p in s.pending])


def test_expired_waits_are_swept_into_denials_the_model_reads(storage: Storage) -> None:
    clock = Clock()
    approvals = Approvals(storage.open(), AGENT, policy=ApprovalPolicy(expires_after=60),
                          clock=clock)
    sim = _sim()
    s = _waiting(sim, approvals)
    assert approvals.expire_due() == ()
    clock.now += 61
    (denied,) = approvals.expire_due()
    assert approvals.expire_due() == ()  # handed out once
    done = sim.run(AGENT, (), resume=denied).result
    assert done.status == "finished" and ran == []
    assert all("expired" in str(x) for x in _results(done))
    assert [r.outcome for r in approvals.audit(run_id=s.run_id)][-2:] == ["expired"] * 2


def test_a_policy_refuses_a_wait_that_is_no_time(storage: Storage) -> None:
    del storage
    for bad in (0, -1, "soon", True):
        with pytest.raises((ValueError, TypeError)):
            ApprovalPolicy(expires_after=bad)  # type: ignore[arg-type]


def test_an_approval_store_has_no_way_to_change_a_record(storage: Storage) -> None:
    store: ApprovalStore = storage.open()
    public = {n for n in dir(store) if not n.startswith("_")}
    assert not {n for n in public if "audit" in n} - {"append_audit", "audit"}
