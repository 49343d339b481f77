"""A suspended step resumes with every tool it offered: the agent's, and those a
processor added for the step (WorkingMemory's `update_working_memory`, a tool given by
`process_input_step`'s `tools=` and declared in the processor's `tools`). A tool the
resumed agent cannot give again is a typed error before the suspension is taken, so the
run still waits. On the sync and async interpreters and on both simulators."""

from __future__ import annotations

import pytest

from effects import AskApproval, Continue, Replace
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.memory.store import working_memory_key
from interpreters.testing import Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.approval import (
    AgentChanged,
    ApprovalError,
    Decision,
    ToolNotFound,
    approve,
    edit,
    resumption,
)
from pipeline.processor import (
    BaseProcessor,
    InputStepArgs,
    InputStepResult,
    StepChange,
    ToolCallArgs,
    ToolCallResult,
    processor,
)
from pipeline.processors import WorkingMemory
from pipeline.tools import Tool, tool
from pipeline.values.model import ModelRequest
from pipeline.values.result import Suspension
from tests.approval_kinds import KINDS, Kind, Runner
from tests.helpers import unpaired_tool_calls

ran: list[str] = []


def refund(order: str, amount: int) -> str:
    """Refund an amount on an order."""
    ran.append(f"refund {order} {amount}")
    return "refunded"


def _lookup(order: str) -> str:
    """Look an order up."""
    ran.append(f"lookup {order}")
    return f"{order}: shipped"


LOOKUP = tool(_lookup, name="lookup_order")


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def _asks(*names: str) -> BaseProcessor:
    def gate(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return AskApproval(f"{a.tool.name}?") if a.tool.name in names else Continue()

    return processor("ask", process_tool_call=gate)


def _script(*calls: object) -> ScriptedModel:
    def answer(req: ModelRequest) -> Say:
        if req.messages and req.messages[-1].role == "tool":
            return Say("done")
        return Say(calls=list(calls))  # type: ignore[arg-type]

    return ScriptedModel(answer)


def _suspend(runner: Runner, agent: Agent, approvals: Approvals) -> Suspension:
    r = approvals.keep(runner.run(agent, "hi", thread_id="t1", resource_id="alice"))
    assert r.status == "suspended" and r.suspension is not None, r.error
    return r.suspension


def _kind(request: pytest.FixtureRequest) -> Kind:
    kind: Kind = request.param
    return kind


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> Kind:
    return _kind(request)


def _memory_agent() -> Agent:
    return Agent.create("sim/model", tools=[refund],
                        input_processors=[WorkingMemory(), _asks("refund",
                                                                 "update_working_memory")])


def _saved_memory(runner: Runner) -> str | None:
    return runner.memory.get_working_memory(working_memory_key(resource_id="alice"))


def test_a_step_with_a_working_memory_update_resumes_and_saves_it(kind: Kind) -> None:
    agent = Agent.create("sim/model", tools=[refund],
                         input_processors=[WorkingMemory(), _asks("refund")])
    runner = Runner(kind, _script(call("update_working_memory", text="likes tea"),
                                  call("refund", order="A17", amount=250)))
    approvals = Approvals(MemoryApprovalStore())
    s = _suspend(runner, agent, approvals)
    assert [t.name for t in s.tools] == ["refund", "update_working_memory"]
    go_on = approvals.take(agent, s.run_id, [approve(p) for p in s.pending])
    r = runner.run(agent, (), resume=go_on)
    assert r.status == "finished", r.error
    assert ran == ["refund A17 250"]
    assert _saved_memory(runner) == "likes tea"
    assert unpaired_tool_calls(r.messages.messages) == []


def test_an_edited_working_memory_update_runs_with_the_edit(kind: Kind) -> None:
    agent = _memory_agent()
    runner = Runner(kind, _script(call("update_working_memory", text="likes tea")))
    approvals = Approvals(MemoryApprovalStore())
    s = _suspend(runner, agent, approvals)
    (p,) = s.pending
    with pytest.raises(ApprovalError):  # an edit its tool refuses: still waiting
        approvals.take(agent, s.run_id, [edit(p, {"text": 5})])
    go_on = approvals.take(agent, s.run_id, [edit(p, {"text": "likes coffee"})])
    r = runner.run(agent, (), resume=go_on)
    assert r.status == "finished", r.error
    assert _saved_memory(runner) == "likes coffee"


def _offer(args: InputStepArgs[None]) -> InputStepResult[None]:
    return Replace(StepChange(tools=(*args.tools, LOOKUP)))


def test_a_tool_a_processor_declares_and_adds_per_step_resumes(kind: Kind) -> None:
    agent = Agent.create("sim/model", tools=[refund], input_processors=[
        processor("offer", process_input_step=_offer, tools=(LOOKUP,)), _asks("lookup_order"),
    ])
    runner = Runner(kind, _script(call("lookup_order", order="A17")))
    approvals = Approvals(MemoryApprovalStore())
    s = _suspend(runner, agent, approvals)
    go_on = approvals.take(agent, s.run_id, [approve(p) for p in s.pending])
    r = runner.run(agent, (), resume=go_on)
    assert r.status == "finished", r.error
    assert ran == ["lookup A17"]


def test_a_per_step_tool_no_processor_declares_is_refused_before_the_take(kind: Kind) -> None:
    agent = Agent.create("sim/model", tools=[refund], input_processors=[
        processor("offer", process_input_step=_offer), _asks("refund"),
    ])
    runner = Runner(kind, _script(call("lookup_order", order="A17"),
                                  call("refund", order="A17", amount=250)))
    approvals = Approvals(MemoryApprovalStore())
    s = _suspend(runner, agent, approvals)
    decisions: list[Decision] = [approve(p) for p in s.pending]
    with pytest.raises(ToolNotFound, match="lookup_order"):
        approvals.take(agent, s.run_id, decisions)
    assert approvals.waiting(s.run_id) is s  # not taken: it can still be resumed
    with pytest.raises(ToolNotFound):  # a resumption made by hand: refused at the start
        runner.run(agent, (), resume=resumption(s, decisions))
    assert ran == []


def test_a_declared_tool_whose_schema_changed_is_agent_changed(kind: Kind) -> None:
    def offering(t: Tool) -> Agent:
        def offer(args: InputStepArgs[None]) -> InputStepResult[None]:
            return Replace(StepChange(tools=(*args.tools, t)))

        return Agent.create("sim/model", tools=[refund], input_processors=[
            processor("offer", process_input_step=offer, tools=(t,)), _asks("lookup_order"),
        ])

    def other(order: int) -> str:
        """Look an order up."""
        return "?"

    runner = Runner(kind, _script(call("lookup_order", order="A17")))
    approvals = Approvals(MemoryApprovalStore())
    s = _suspend(runner, offering(LOOKUP), approvals)
    changed = offering(tool(other, name="lookup_order"))
    with pytest.raises(AgentChanged, match="lookup_order"):
        approvals.take(changed, s.run_id, [approve(p) for p in s.pending])
    assert approvals.waiting(s.run_id) is s and ran == []
