"""A suspended run is its thread's and its resource's: a resume names them or inherits
them, and one that names another owner is refused before anything runs, nothing taken.
On the sync and async interpreters and on both simulators."""

from __future__ import annotations

import pytest

from effects import AskApproval, Continue
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.testing import Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.approval import ApprovalError, OwnerMismatch, approve
from pipeline.processor import ToolCallArgs, ToolCallResult, processor
from pipeline.processors import MessageHistory
from pipeline.values.model import ModelRequest
from pipeline.values.result import Suspension
from tests.approval_kinds import KINDS, Kind, Runner
from tests.helpers import unpaired_tool_calls

refunded: list[tuple[str, int]] = []


def refund(order: str, amount: int) -> str:
    """Refund an amount on an order."""
    refunded.append((order, amount))
    return f"refunded {amount} on {order}"


def ask_always(a: ToolCallArgs[None]) -> ToolCallResult[None]:
    if a.tool.name == "refund":
        return AskApproval(f"refund {a.args['amount']}?")
    return Continue()


AGENT = Agent.create(
    "sim/model", tools=[refund],
    input_processors=[MessageHistory(last_messages=10),
                      processor("ask", process_tool_call=ask_always)],
)


def _script(req: ModelRequest) -> Say:
    if req.messages and req.messages[-1].role == "tool":
        return Say("refunded, Alice")
    return Say(calls=[call("refund", order="A17", amount=250)])


@pytest.fixture(autouse=True)
def _fresh() -> None:
    refunded.clear()


@pytest.fixture(params=KINDS)
def runner(request: pytest.FixtureRequest) -> Runner:
    kind: Kind = request.param
    return Runner(kind, ScriptedModel(_script))


def _suspend(runner: Runner, approvals: Approvals) -> Suspension:
    r = approvals.keep(runner.run(AGENT, "I am Alice, refund order A17",
                                  thread_id="thread-a", resource_id="alice"))
    assert r.status == "suspended" and r.suspension is not None
    return r.suspension


def test_a_suspension_keeps_its_run_s_thread_and_resource(runner: Runner) -> None:
    s = _suspend(runner, Approvals(MemoryApprovalStore()))
    assert (s.thread_id, s.resource_id) == ("thread-a", "alice")


def test_a_resume_without_a_thread_inherits_the_suspension_s_and_files_the_turn_there(
    runner: Runner,
) -> None:
    approvals = Approvals(MemoryApprovalStore())
    s = _suspend(runner, approvals)
    go_on = approvals.take(AGENT, s.run_id, [approve(p) for p in s.pending])
    r = runner.run(AGENT, (), resume=go_on)
    assert r.status == "finished", r.error
    assert refunded == [("A17", 250)]
    assert runner.saved("thread-a")[-1] == "refunded, Alice"
    assert "I am Alice, refund order A17" in runner.saved("thread-a")
    assert unpaired_tool_calls(r.messages.messages) == []


def test_a_resume_naming_its_own_thread_and_resource_goes_on(runner: Runner) -> None:
    approvals = Approvals(MemoryApprovalStore())
    s = _suspend(runner, approvals)
    go_on = approvals.take(AGENT, s.run_id, [approve(p) for p in s.pending],
                           thread_id="thread-a", resource_id="alice")
    r = runner.run(AGENT, (), resume=go_on, thread_id="thread-a", resource_id="alice")
    assert r.status == "finished" and refunded == [("A17", 250)]


@pytest.mark.parametrize("owner", [{"thread_id": "thread-b"},
                                   {"resource_id": "bob"},
                                   {"thread_id": "thread-b", "resource_id": "bob"}])
def test_a_take_for_another_owner_is_refused_and_the_run_still_waits(
    runner: Runner, owner: dict[str, str],
) -> None:
    approvals = Approvals(MemoryApprovalStore())
    s = _suspend(runner, approvals)
    with pytest.raises(OwnerMismatch) as refused:
        approvals.take(AGENT, s.run_id, [approve(p) for p in s.pending], **owner)
    assert isinstance(refused.value, ApprovalError)
    assert approvals.waiting(s.run_id) is s  # nothing taken
    assert refunded == []


@pytest.mark.parametrize("owner", [{"thread_id": "thread-b"}, {"resource_id": "bob"}])
def test_a_run_resumed_in_another_thread_is_refused_before_anything_runs(
    runner: Runner, owner: dict[str, str],
) -> None:
    approvals = Approvals(MemoryApprovalStore())
    s = _suspend(runner, approvals)
    go_on = approvals.take(AGENT, s.run_id, [approve(p) for p in s.pending])
    with pytest.raises(OwnerMismatch):
        runner.run(AGENT, (), resume=go_on, **owner)
    assert refunded == []
    assert runner.saved("thread-b") == []
    # the resumption still resumes its own run
    r = runner.run(AGENT, (), resume=go_on)
    assert r.status == "finished" and refunded == [("A17", 250)]
    assert runner.saved("thread-b") == []
