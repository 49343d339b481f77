"""One approval API on every interpreter: `Approvals` over a store for in-process runs,
`DurableApprovals` over `DurableRuns` or `DurableClient` for durable ones. Each lists the
runs waiting (by run, thread or resource) as `SuspendedRun`s and takes decisions with
the same typed errors, so one HTTP handler serves both."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from effects import AskApproval, Continue
from interpreters import ApprovalDesk, DurableApprovals, DurableClient, DurableRuns
from interpreters.approvals.policy import ApprovalPolicy, DeciderNotAllowed, ToolApprovalRule
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.sync import SyncInterpreter
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.approval import (
    ApprovalError,
    Approve,
    ArgumentsMismatch,
    MissingDecision,
    OwnerMismatch,
    Resumption,
    RunNotSuspended,
    UnknownRun,
    approve,
    deny,
)
from pipeline.processor import ToolCallArgs, ToolCallResult, processor
from pipeline.values import SuspendedRun
from pipeline.values.model import ModelRequest
from pipeline.values.result import RunResult

SENT: list[int] = []
WAIT = 60.0


def send(to: str, amount: int) -> str:
    """Send money."""
    SENT.append(amount)
    return f"sent {amount} to {to}"


def ask_big(a: ToolCallArgs[None]) -> ToolCallResult[None]:
    if int(str(a.args["amount"])) >= 100:
        return AskApproval(f"send {a.args['amount']}?")
    return Continue()


AGENT = Agent.create("sim/model", tools=[send],
                     input_processors=[processor("ask", process_tool_call=ask_big)])


def _model() -> ScriptedModel:
    def answer(req: ModelRequest) -> Say:
        if req.messages and req.messages[-1].role == "tool":
            return Say("done")
        return Say(calls=[call("send", to="eve", amount=500)])

    return ScriptedModel(answer)


# --- the handler an app writes once --------------------------------------------------


def answer(desk: ApprovalDesk, chat: str, approved: bool) -> tuple[int, Resumption | None]:
    """What `POST /chats/{chat}/answer` does on any desk: the HTTP status, and the
    resumption an in-process run goes on with (None: a durable run goes on by itself)."""
    try:
        waiting = desk.suspended(thread_id=chat)
        if not waiting:
            raise UnknownRun(f"nothing waits in chat {chat!r}")
        run = waiting[0]
        decisions = [approve(p) if approved else deny(p, "no") for p in run.pending]
        return 200, desk.decide(run.run_id, decisions, thread_id=chat)
    except UnknownRun:
        return 404, None
    except RunNotSuspended:
        return 409, None
    except ApprovalError:
        return 422, None


# --- the desks -------------------------------------------------------------------------


@dataclass
class Desk:
    desk: ApprovalDesk
    suspend: Callable[[str, str, str], None]
    """Start a run (id, thread, resource) and return once it waits."""
    finish: Callable[[str, Resumption | None], RunResult]
    """The run's result once it went on with its decisions."""


def _in_process() -> Iterator[Desk]:
    approvals = Approvals(MemoryApprovalStore(), AGENT)
    sim = Simulator(_model())

    def suspend(run_id: str, thread: str, resource: str) -> None:
        interp = SyncInterpreter(_model(), run_ids=lambda: run_id, observers=())
        r = approvals.keep(interp.run(AGENT, "pay eve", thread_id=thread, resource_id=resource))
        assert r.status == "suspended"

    def finish(run_id: str, go_on: Resumption | None) -> RunResult:
        assert go_on is not None and go_on.suspension.run_id == run_id
        return approvals.keep(sim.run(AGENT, (), resume=go_on).result)

    yield Desk(approvals, suspend, finish)


def _durable(tmp_path: Path, client: bool) -> Iterator[Desk]:
    runs = DurableRuns({"pay": AGENT}, _model(), observers=(),
                       database_url=f"sqlite:///{tmp_path / 'runs.sqlite'}")
    runs.launch()
    other = DurableClient(runs.database_url) if client else None
    started: list[str] = []

    def suspend(run_id: str, thread: str, resource: str) -> None:
        started.append(run_id)
        runs.start("pay", "pay eve", run_id=run_id, thread_id=thread, resource_id=resource)
        deadline = time.monotonic() + WAIT
        while not runs.suspended(thread_id=thread) or run_id not in [
            w.run_id for w in runs.suspended(thread_id=thread)
        ]:
            assert time.monotonic() < deadline, f"run {run_id} never waited"
            time.sleep(0.02)

    def finish(run_id: str, go_on: Resumption | None) -> RunResult:
        assert go_on is None
        return runs.result(run_id, timeout=WAIT)

    try:
        yield Desk(DurableApprovals(other if other is not None else runs), suspend, finish)
    finally:
        for run_id in started:  # a worker shuts down once no run waits
            with contextlib.suppress(RunNotSuspended):
                runs.decide(run_id, [deny(p) for p in runs.pending(run_id)])
            runs.result(run_id, timeout=WAIT)
        if other is not None:
            other.close()
        runs.shutdown()


@pytest.fixture(params=["in-process", "durable", "durable-client"])
def desk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Desk]:
    SENT.clear()
    if request.param == "in-process":
        yield from _in_process()
    else:
        yield from _durable(tmp_path, client=request.param == "durable-client")


# --- the same behaviour on each ---------------------------------------------------------


def test_a_desk_lists_what_waits_by_run_thread_or_resource(desk: Desk) -> None:
    desk.suspend("r1", "chat-1", "alice")
    desk.suspend("r2", "chat-2", "alice")
    d = desk.desk
    (one,) = d.suspended(thread_id="chat-1")
    assert isinstance(one, SuspendedRun)
    assert (one.run_id, one.thread_id, one.resource_id) == ("r1", "chat-1", "alice")
    (p,) = one.pending
    assert (p.tool_name, p.args, p.message) == ("send", {"to": "eve", "amount": 500},
                                                "send 500?")
    assert sorted(w.run_id for w in d.suspended(resource_id="alice")) == ["r1", "r2"]
    assert d.suspended(run_id="r2") == d.suspended(thread_id="chat-2")
    assert d.suspended(run_id="r2", thread_id="chat-1") == ()  # not that thread's
    assert d.suspended(run_id="nope") == ()
    assert d.suspended(thread_id="chat-9") == ()


def test_one_handler_resumes_a_chat_s_run_on_every_desk(desk: Desk) -> None:
    desk.suspend("r1", "chat-1", "alice")
    status, go_on = answer(desk.desk, "chat-1", approved=True)
    assert status == 200
    r = desk.finish("r1", go_on)
    assert r.status == "finished" and r.text == "done" and SENT == [500]
    assert answer(desk.desk, "chat-1", approved=True) == (404, None)  # nothing waits
    assert SENT == [500]


def test_every_desk_refuses_the_same_way_and_the_run_still_waits(desk: Desk) -> None:
    desk.suspend("r1", "chat-1", "alice")
    d = desk.desk
    (run,) = d.suspended(run_id="r1")
    (p,) = run.pending
    with pytest.raises(UnknownRun):
        d.decide("nope", [approve(p)])
    with pytest.raises(OwnerMismatch):
        d.decide("r1", [approve(p)], thread_id="chat-2")
    with pytest.raises(OwnerMismatch):
        d.decide("r1", [approve(p)], resource_id="bob")
    with pytest.raises(ArgumentsMismatch):
        d.decide("r1", [Approve(p.tool_call_id, "0" * 64)])
    with pytest.raises(MissingDecision):
        d.decide("r1", [])
    assert d.suspended(run_id="r1") == (run,) and SENT == []
    go_on = d.decide("r1", [deny(p, "no")], thread_id="chat-1", resource_id="alice")
    with pytest.raises(RunNotSuspended):  # decided once
        d.decide("r1", [approve(p)])
    r = desk.finish("r1", go_on)
    assert r.status == "finished" and SENT == []


def test_every_desk_applies_the_rules_on_deciders_and_records_them(desk: Desk) -> None:
    d = desk.desk
    rules = ApprovalPolicy(tools={"send": ToolApprovalRule(principals=frozenset({"ann"}))})
    assert isinstance(d, Approvals | DurableApprovals)
    d.policy = rules
    if isinstance(d, DurableApprovals):
        d.trail = MemoryApprovalStore()
    desk.suspend("r1", "chat-1", "alice")
    (run,) = d.suspended(run_id="r1")
    (p,) = run.pending
    with pytest.raises(DeciderNotAllowed):
        d.decide("r1", [approve(p, by="bob")])
    assert d.suspended(run_id="r1") != ()  # still waiting
    go_on = d.decide("r1", [approve(p, by="ann", reason="known payee")])
    assert desk.finish("r1", go_on).status == "finished" and SENT == [500]
    decided = [(r.outcome, r.decided_by, r.reason) for r in d.audit(run_id="r1")
               if r.outcome != "waiting"]
    assert decided == [("refused", "bob", "'bob' may not decide calls of 'send'"),
                       ("approved", "ann", "known payee")]
