"""Human approval: a run suspends at a gate's AskApproval and is resumed once with decisions.

Approve, deny (the model reads the reason) and edit; each decision bound to the exact
arguments; a suspension handed out once; bad input refused with typed errors, nothing
run twice, every call answered once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import anyio
import msgspec
import pytest

from effects import AskApproval, Continue
from interpreters.approvals.audit import AuditRecord
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.approval import (
    AgentChanged,
    Approve,
    ArgumentsMismatch,
    DuplicateDecision,
    EditRejected,
    MissingDecision,
    RunNotSuspended,
    UnknownCall,
    UnknownRun,
    approve,
    deny,
    edit,
)
from pipeline.processor import ToolCallArgs, ToolCallResult, processor
from pipeline.ui_stream import ui_message_sse
from pipeline.values.chunks import Chunk
from pipeline.values.result import RunResult, Suspension
from tests.helpers import unpaired_tool_calls

ran: list[tuple[str, int]] = []


def send(to: str, amount: int) -> str:
    """Send money."""
    ran.append((to, amount))
    return f"sent {amount} to {to}"


def lookup(name: str) -> str:
    """Look a person up."""
    ran.append((name, 0))
    return f"{name} is known"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def ask_big(a: ToolCallArgs[None]) -> ToolCallResult[None]:
    if a.tool.name == "send" and int(str(a.args["amount"])) >= 100:
        return AskApproval(f"send {a.args['amount']} to {a.args['to']}?", {"risk": "high"})
    return Continue()


AGENT = Agent.create("sim/model", tools=[send, lookup],
                     input_processors=[processor("ask", process_tool_call=ask_big)])


def _model() -> ScriptedModel:
    return ScriptedModel([
        Say(calls=[call("lookup", name="eve"), call("send", to="eve", amount=500)]),
        Say("paid"),
    ])




def _suspended(sim: Simulator, approvals: Approvals) -> Suspension:
    r = approvals.keep(sim.run(AGENT, "pay eve").result)
    assert r.status == "suspended" and r.suspension is not None
    return r.suspension


def test_a_run_suspends_before_any_tool_of_the_step_runs_listing_what_waits() -> None:
    approvals = Approvals(MemoryApprovalStore())
    s = _suspended(Simulator(_model()), approvals)
    assert ran == []  # not even the call no gate stopped
    (p,) = s.pending
    assert (p.tool_name, p.args, p.message, p.processor_id, p.metadata) == (
        "send", {"to": "eve", "amount": 500}, "send 500 to eve?", "ask", {"risk": "high"}
    )
    assert approvals.waiting(s.run_id) is s


def test_approve_runs_the_call_once_and_the_run_goes_on() -> None:
    approvals = Approvals(MemoryApprovalStore())
    sim = Simulator(_model())
    s = _suspended(sim, approvals)
    go_on = approvals.take(AGENT, s.run_id, [approve(s.pending[0])])
    r = approvals.keep(sim.run(AGENT, (), resume=go_on).result)
    assert r.status == "finished" and r.text == "paid"
    assert ran == [("eve", 0), ("eve", 500)]
    assert [st.step_number for st in r.steps] == [0, 1]
    assert unpaired_tool_calls(r.messages.messages) == []
    with pytest.raises(RunNotSuspended):  # a second resume runs nothing again
        approvals.take(AGENT, s.run_id, [approve(s.pending[0])])
    assert ran == [("eve", 0), ("eve", 500)]


def test_deny_answers_the_call_with_the_reason_the_model_reads() -> None:
    approvals = Approvals(MemoryApprovalStore())
    model = _model()
    sim = Simulator(model)
    s = _suspended(sim, approvals)
    go_on = approvals.take(AGENT, s.run_id, [deny(s.pending[0], "over the limit")])
    r = sim.run(AGENT, (), resume=go_on).result
    assert r.status == "finished" and ran == [("eve", 0)]
    last = model.requests[-1].messages[-1]
    (denied,) = [p for p in last.tool_results() if p.tool_name == "send"]
    assert denied.is_error and "over the limit" in str(denied.result)
    assert unpaired_tool_calls(r.messages.messages) == []


def test_edit_runs_the_call_with_the_edited_arguments() -> None:
    approvals = Approvals(MemoryApprovalStore())
    sim = Simulator(_model())
    s = _suspended(sim, approvals)
    go_on = approvals.take(AGENT, s.run_id, [edit(s.pending[0], {"to": "eve", "amount": 50})])
    r = sim.run(AGENT, (), resume=go_on).result
    assert r.status == "finished" and ran == [("eve", 0), ("eve", 50)]


def test_bad_decisions_are_typed_errors_and_leave_the_run_waiting() -> None:
    approvals = Approvals(MemoryApprovalStore())
    s = _suspended(Simulator(_model()), approvals)
    p = s.pending[0]
    with pytest.raises(UnknownRun):
        approvals.take(AGENT, "no-such-run", [approve(p)])
    with pytest.raises(UnknownCall):
        approvals.take(AGENT, s.run_id, [Approve("call_9", p.digest)])
    with pytest.raises(ArgumentsMismatch):  # approved for other arguments
        approvals.take(AGENT, s.run_id, [Approve(p.tool_call_id, "0" * 64)])
    with pytest.raises(DuplicateDecision):
        approvals.take(AGENT, s.run_id, [approve(p), deny(p)])
    with pytest.raises(MissingDecision):
        approvals.take(AGENT, s.run_id, [])
    with pytest.raises(EditRejected) as refused:  # an edit its tool's schema refuses
        approvals.take(AGENT, s.run_id, [edit(p, {"to": "eve", "amount": "all"})])
    assert not isinstance(refused.value, ArgumentsMismatch)  # (that is a stale approval)
    assert "amount" in str(refused.value)
    changed = Agent.create("sim/model", tools=[send],
                           input_processors=[processor("ask", process_tool_call=ask_big)])
    with pytest.raises(AgentChanged):
        approvals.take(changed, s.run_id, [approve(p)])
    assert approvals.waiting(s.run_id) is s and ran == []


def test_a_processor_whose_settings_changed_is_another_agent_to_resume_on() -> None:
    from pipeline.processors import PIIDetector

    def guarded(strategy: str) -> Agent:
        return Agent.create("sim/model", tools=[send, lookup], input_processors=[
            processor("ask", process_tool_call=ask_big),
            PIIDetector(strategy=strategy),  # type: ignore[arg-type]
        ])

    approvals = Approvals(MemoryApprovalStore())
    sim = Simulator(_model())
    r = approvals.keep(sim.run(guarded("block"), "pay eve").result)
    assert r.suspension is not None
    run_id = r.suspension.run_id
    (p,) = r.suspension.pending
    with pytest.raises(AgentChanged):  # the guard weakened from block to detect
        approvals.take(guarded("detect"), run_id, [approve(p)])
    assert approvals.waiting(run_id) == r.suspension and ran == []
    go_on = approvals.take(guarded("block"), run_id, [approve(p)])
    assert sim.run(guarded("block"), (), resume=go_on).result.status == "finished"


def test_a_resume_on_the_async_interpreter_goes_the_same_way() -> None:
    approvals = Approvals(MemoryApprovalStore())

    async def go() -> RunResult:
        sim = AsyncSimulator(_model())
        first = approvals.keep((await sim.run(AGENT, "pay eve")).result)
        assert first.suspension is not None
        s = first.suspension
        go_on = approvals.take(AGENT, s.run_id, [approve(s.pending[0])])
        return (await sim.run(AGENT, (), resume=go_on)).result

    r = anyio.run(go)
    assert r.status == "finished" and ran == [("eve", 0), ("eve", 500)]
    assert unpaired_tool_calls(r.messages.messages) == []


def _ui_events(chunks: list[Chunk]) -> list[dict[str, object]]:
    body = b"".join(ui_message_sse(chunks)).decode()
    return [json.loads(line[6:]) for line in body.split("\n")
            if line.startswith("data: {")]


def test_the_ui_stream_carries_the_ai_sdk_tool_approval_parts() -> None:
    approvals = Approvals(MemoryApprovalStore())
    sim = Simulator(_model())
    first = sim.run(AGENT, "pay eve")
    s = approvals.keep(first.result).suspension
    assert s is not None
    p = s.pending[0]
    asked = _ui_events(first.chunks)
    request = [e for e in asked if e["type"] == "tool-approval-request"]
    assert request == [{"type": "tool-approval-request", "approvalId": p.digest,
                        "toolCallId": p.tool_call_id}]
    # the waiting call is not closed with an error: it waits
    assert not [e for e in asked if e["type"] == "tool-output-error"
                and e["toolCallId"] == p.tool_call_id]
    assert asked[-1]["type"] == "finish"
    second = sim.run(AGENT, (), resume=approvals.take(AGENT, s.run_id, [deny(p, "no")]))
    answered = _ui_events(second.chunks)
    assert {"type": "tool-approval-response", "approvalId": p.digest, "approved": False,
            "reason": "no"} in answered
    assert {"type": "tool-output-denied", "toolCallId": p.tool_call_id} in answered


def test_a_run_resumed_and_suspended_again_between_read_and_take_is_not_resumed_twice() -> None:
    s = _suspended(Simulator(_model()), Approvals(MemoryApprovalStore()))
    other = Simulator(ScriptedModel([Say(calls=[call("send", to="bob", amount=900)])]))
    r = other.run(AGENT, "pay bob").result
    assert r.suspension is not None
    later = msgspec.structs.replace(r.suspension, run_id=s.run_id)

    class Racing(MemoryApprovalStore):
        """Another process resumes the run and it suspends again, just before the take."""

        raced = False

        def take(
            self,
            run_id: str,
            audit: Sequence[AuditRecord] = (),
            expected: Suspension | None = None,
        ) -> Suspension:
            if not self.raced:
                self.raced = True
                super().take(run_id)
                self.save(later)
            return super().take(run_id, audit, expected)

    racing = Racing()
    racing.save(s)
    with pytest.raises(RunNotSuspended, match="meanwhile"):
        Approvals(racing).take(AGENT, s.run_id, [approve(p) for p in s.pending])
    assert racing.get(s.run_id) == later  # the newer suspension still waits


def test_reading_what_a_run_waits_for_never_takes_it() -> None:
    """A run saved between the store's `get` and the check of why nothing was there is
    still waiting afterwards: reading never takes a run."""
    s = _suspended(Simulator(_model()), Approvals(MemoryApprovalStore()))

    class SavedMeanwhile(MemoryApprovalStore):
        """The run is suspended (saved) just after the first `get` found nothing."""

        def get(self, run_id: str) -> Suspension | None:
            found = super().get(run_id)
            if found is None and not self.saved:
                self.saved = True
                self.save(s)
            return found

        saved = False

    store = SavedMeanwhile()
    assert Approvals(store).waiting(s.run_id) == s
    assert store.get(s.run_id) == s  # still waiting: it can be resumed
    go_on = Approvals(store).take(AGENT, s.run_id, [approve(p) for p in s.pending])
    assert go_on.suspension == s


def test_approvals_lists_the_runs_waiting_in_a_thread() -> None:
    approvals = Approvals(MemoryApprovalStore(), AGENT)
    pay = Say(calls=[call("send", to="eve", amount=500)])
    sim = Simulator(ScriptedModel([pay, pay, Say("paid")]))
    first = approvals.keep(sim.run(AGENT, "pay eve", thread_id="t1", resource_id="u1").result)
    approvals.keep(sim.run(AGENT, "pay eve", thread_id="t2", resource_id="u1").result)
    assert first.suspension is not None
    (one,) = approvals.suspended(thread_id="t1")
    assert (one.run_id, one.thread_id, one.resource_id, one.pending) == (
        first.suspension.run_id, "t1", "u1", first.suspension.pending)
    assert len(approvals.suspended(resource_id="u1")) == 2
    go_on = approvals.decide(one.run_id, [approve(p) for p in one.pending], thread_id="t1")
    assert approvals.suspended(thread_id="t1") == ()
    assert sim.run(AGENT, (), resume=go_on).result.status == "finished"


def test_deciding_needs_the_agent_the_run_is_checked_against() -> None:
    approvals = Approvals(MemoryApprovalStore())  # no agent: it cannot check one
    s = _suspended(Simulator(_model()), approvals)
    with pytest.raises(TypeError, match="agent"):
        approvals.decide(s.run_id, [approve(p) for p in s.pending])
    assert approvals.waiting(s.run_id) is s


def test_a_decision_for_a_call_of_another_tool_with_the_same_id_and_arguments_is_refused(
) -> None:
    """Two runs each wait on `call_0` with the same arguments, for different tools: the
    approval of one does not decide the other."""
    def refund(to: str, amount: int) -> str:
        """Refund money."""
        ran.append((to, -amount))
        return "refunded"

    def ask(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return AskApproval("ok?")

    agent = Agent.create("sim/model", tools=[send, refund],
                         input_processors=[processor("ask", process_tool_call=ask)])
    approvals = Approvals(MemoryApprovalStore(), agent)
    sim = Simulator(ScriptedModel([
        Say(calls=[call(name, tool_call_id="call_0", to="eve", amount=500)])
        for name in ("send", "refund")
    ]))
    first, second = (approvals.keep(sim.run(agent, "pay").result).suspension for _ in "ab")
    assert first is not None and second is not None
    (send_p,), (refund_p,) = first.pending, second.pending
    assert (send_p.tool_call_id, send_p.args) == (refund_p.tool_call_id, refund_p.args)
    assert (send_p.tool_name, refund_p.tool_name) == ("send", "refund")
    assert send_p.digest != refund_p.digest
    with pytest.raises(ArgumentsMismatch):
        approvals.decide(second.run_id, [approve(send_p)])
    assert approvals.waiting(second.run_id) is second and ran == []
