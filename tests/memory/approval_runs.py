"""What the approval-store tests run in other processes: a payer agent (a gate asks for
approval of a payment, a budget keeps state) suspended in one process and resumed in
another, and takers racing for one suspended run."""

from __future__ import annotations

import threading
from pathlib import Path

from effects import AskApproval
from interpreters.approvals.sql import PostgresApprovalStore, SQLiteApprovalStore
from interpreters.approvals.store import Approvals
from interpreters.sync import SyncInterpreter
from interpreters.testing import Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.approval import RunNotSuspended, approve
from pipeline.processor import ToolCallArgs, ToolCallResult, processor
from pipeline.processors.budget import Budget
from pipeline.values.result import Suspension


def make_payer(log: Path) -> Agent:
    def send(to: str, amount: int) -> str:
        """Send money."""
        with log.open("a") as f:  # what ran, seen from every process
            f.write(f"{to} {amount}\n")
        return f"sent {amount} to {to}"

    def ask(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return AskApproval(f"send {a.args['amount']} to {a.args['to']}?")

    return Agent.create(
        "sim/model", tools=[send],
        input_processors=[processor("approve", process_tool_call=ask),
                          Budget(max_tool_calls=5)],
    )


def open_store(where: str) -> SQLiteApprovalStore | PostgresApprovalStore:
    """`where`: a SQLite path, or `postgresql://...#schema`."""
    if where.startswith("postgres"):
        url, _, schema = where.partition("#")
        return PostgresApprovalStore(url, schema=schema or "public")
    return SQLiteApprovalStore(where)


def suspend_in_process(db: str, log: str) -> str:
    """Run the payer until it waits for approval; its suspension kept in `db`."""
    store = open_store(db)
    try:
        interp = SyncInterpreter(
            ScriptedModel([Say(calls=[call("send", to="eve", amount=500)])]), observers=()
        )
        result = Approvals(store).keep(interp.run(make_payer(Path(log)), "pay eve"))
        assert result.status == "suspended" and result.suspension is not None
        return result.suspension.run_id
    finally:
        store.close()


def resume_in_process(db: str, log: str, run_id: str) -> tuple[str, str]:
    """Approve what `run_id` waits for and run it on (a new interpreter and Approvals);
    (status, text)."""
    store = open_store(db)
    try:
        approvals = Approvals(store)
        agent = make_payer(Path(log))
        waiting = approvals.waiting(run_id)
        go_on = approvals.take(agent, run_id, [approve(p) for p in waiting.pending])
        interp = SyncInterpreter(ScriptedModel([Say("paid")]), observers=())
        result = approvals.keep(interp.run(agent, (), resume=go_on))
        return result.status, result.text
    finally:
        store.close()


def take_at_once(db: str, run_id: str, start: threading.Barrier) -> str:
    """Take `run_id` as soon as every taker is ready: "took" or "not suspended"."""
    store = open_store(db)
    try:
        start.wait(timeout=60)
        try:
            s: Suspension = store.take(run_id)
        except RunNotSuspended:
            return "not suspended"
        assert s.run_id == run_id
        return "took"
    finally:
        store.close()
