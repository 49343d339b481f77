"""Tool gates as they are written: by the tool's name, stateful across the calls of a
response, bounding calls at any count, and binding an approval to what will run.

- `args.tool_name` is the tool's name; comparing the `Tool` itself with a string (the
  natural slip, never true, so a gate written that way fails open) raises a TypeError
  naming `args.tool_name`, and the run fails closed.
- Parallel calls in one response go through a stateful gate one after the other, each
  with the state the call before it left.
- `Budget`'s bounds on tool calls hold at any count, in one response and across steps.
- A denial without a reason never runs the call.
- A gate that replaces the arguments before another asks for approval has the approval
  bound (its digest) to the replaced arguments, which are those that run.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from effects import AskApproval, Continue, Out, Replace, SkipCall
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, SimRun, Simulator, call
from pipeline.agent import Agent
from pipeline.approval import Approve, ArgumentsMismatch, approve, call_digest, deny
from pipeline.processor import BaseProcessor, ToolCallArgs, ToolCallResult, processor
from pipeline.processors import Budget
from pipeline.tools import tool
from pipeline.values.result import ProcessorFailed

ran: list[tuple[str, object]] = []


@tool
def refund(order: str, amount: int) -> str:
    """Refund an order."""
    ran.append(("refund", (order, amount)))
    return f"refunded {amount} on {order}"


@tool
def look(q: str) -> str:
    """Look something up."""
    ran.append(("look", q))
    return f"found {q}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def _runs(agent: Agent, script: Sequence[Say], prompt: str = "go") -> list[SimRun]:
    """The run on the sync simulator and on the async one, each from a fresh `ran`."""
    ran.clear()
    runs = [Simulator(ScriptedModel(list(script))).run(agent, prompt)]
    first = list(ran)

    async def go() -> SimRun:
        return await AsyncSimulator(ScriptedModel(list(script))).run(agent, prompt)

    ran.clear()
    runs.append(anyio.run(go))
    assert ran == first  # the same tools ran on both
    return runs


def _agent(*gates: BaseProcessor, max_steps: int = 10) -> Agent:
    return Agent.create("sim/model", tools=[refund, look], input_processors=list(gates),
                        max_steps=max_steps)


# --- the tool's name -------------------------------------------------------------------


def test_a_gate_compares_the_tool_name_as_a_string() -> None:
    def ask_refunds(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return AskApproval("refund?") if a.tool_name == "refund" else Continue()

    agent = _agent(processor("ask", process_tool_call=ask_refunds))
    script = [Say(calls=[call("refund", order="A1", amount=5), call("look", q="x")]),
              Say("ok")]
    for run in _runs(agent, script):
        assert run.result.status == "suspended" and ran == []
        assert run.result.suspension is not None
        assert [p.tool_name for p in run.result.suspension.pending] == ["refund"]


def test_comparing_the_tool_itself_with_a_string_is_loud_and_fails_closed() -> None:
    def ask_refunds(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        if a.tool == "refund":  # the slip
            return AskApproval("refund?")
        return Continue()

    agent = _agent(processor("ask", process_tool_call=ask_refunds))
    script = [Say(calls=[call("refund", order="A1", amount=5)]), Say("ok")]
    for run in _runs(agent, script):
        assert ran == []  # the refund never ran unapproved
        err = run.result.error
        assert run.result.status == "failed" and isinstance(err, ProcessorFailed)
        assert err.error_type == "TypeError" and "args.tool_name" in err.message


def test_a_tool_compares_with_tools_and_not_with_strings() -> None:
    assert refund == refund and refund != look
    with pytest.raises(TypeError, match="tool_name"):
        _ = refund == "refund"
    with pytest.raises(TypeError, match="tool_name"):
        _ = "refund" != refund  # noqa: SIM300  # (the string first: Python asks the tool)
    with pytest.raises(TypeError, match="tool_name"):
        _ = refund in ("refund", "look")


# --- state across the calls of one response -----------------------------------------


def test_parallel_calls_pass_a_stateful_gate_with_the_state_the_previous_call_left() -> None:
    seen: list[int] = []

    def count(a: ToolCallArgs[int]) -> ToolCallResult[int]:
        seen.append(a.state)
        if a.state >= 1:
            return SkipCall("only one refund a run", is_error=True)
        return Out(Continue(), a.state + 1)

    agent = _agent(processor("one", state=0, process_tool_call=count))
    script = [Say(calls=[call("refund", order="A1", amount=5),
                         call("refund", order="A2", amount=7)]), Say("ok")]
    assert len(_runs(agent, script)) == 2
    assert seen == [0, 1, 0, 1]  # each run: the second call saw what the first left
    assert ran == [("refund", ("A1", 5))]


def test_a_tool_call_budget_of_one_runs_one_of_two_parallel_calls() -> None:
    script = [Say(calls=[call("look", q="a"), call("look", q="b")]), Say("ok")]
    for on_limit in ("abort", "finish"):
        for run in _runs(_agent(Budget(max_tool_calls=1, on_limit=on_limit)), script):
            assert ran == [] if on_limit == "abort" else ran == [("look", "a")]
            if on_limit == "abort":  # the gate aborts before any tool of the step runs
                assert run.result.status == "tripped"


@pytest.mark.parametrize("bound", [2, 3])
def test_a_per_tool_budget_holds_at_any_count(bound: int) -> None:
    one_response = [Say(calls=[call("look", q=f"q{i}") for i in range(bound + 2)]),
                    Say("ok")]
    for run in _runs(_agent(Budget(max_calls_per_tool={"look": bound},
                                   on_limit="finish")), one_response):
        assert ran == [("look", f"q{i}") for i in range(bound)]
        assert run.result.status == "finished"
    across_steps = [Say(calls=[call("look", q=f"q{i}")]) for i in range(bound + 2)]
    for run in _runs(_agent(Budget(max_calls_per_tool={"look": bound})),
                     [*across_steps, Say("ok")]):
        assert ran == [("look", f"q{i}") for i in range(bound)]
        assert run.result.status == "tripped"


# --- approval ----------------------------------------------------------------------


def _ask_all(a: ToolCallArgs[None]) -> ToolCallResult[None]:
    return AskApproval(f"{a.tool_name}?")


def test_a_denial_without_a_reason_never_runs_the_call() -> None:
    agent = _agent(processor("ask", process_tool_call=_ask_all))
    script = [Say(calls=[call("refund", order="A1", amount=5)]), Say("ok")]
    for sim in (Simulator(ScriptedModel(script)),):
        approvals = Approvals(MemoryApprovalStore())
        first = approvals.keep(sim.run(agent, "go").result)
        assert first.suspension is not None
        p = first.suspension.pending[0]
        go_on = approvals.take(agent, first.suspension.run_id, [deny(p)])
        r = sim.run(agent, (), resume=go_on).result
        assert r.status == "finished" and ran == []
        (result,) = [x for m in r.messages.messages for x in m.tool_results()]
        assert result.is_error and "denied" in str(result.result)

    async def go() -> None:
        approvals = Approvals(MemoryApprovalStore())
        sim = AsyncSimulator(ScriptedModel(script))
        first = approvals.keep((await sim.run(agent, "go")).result)
        assert first.suspension is not None
        p = first.suspension.pending[0]
        go_on = approvals.take(agent, first.suspension.run_id, [deny(p)])
        r = (await sim.run(agent, (), resume=go_on)).result
        assert r.status == "finished" and ran == []

    anyio.run(go)


def test_an_approval_is_bound_to_the_arguments_a_gate_replaced_which_are_those_that_run(
) -> None:
    def cap(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        if a.tool_name == "refund" and int(str(a.args["amount"])) > 10:
            return Replace({**a.args, "amount": 10})
        return Continue()

    agent = _agent(processor("cap", process_tool_call=cap),
                   processor("ask", process_tool_call=_ask_all))
    script = [Say(calls=[call("refund", order="A1", amount=500)]), Say("ok")]
    sim = Simulator(ScriptedModel(script))
    approvals = Approvals(MemoryApprovalStore())
    first = approvals.keep(sim.run(agent, "go").result)
    s = first.suspension
    assert s is not None
    (p,) = s.pending
    assert p.args == {"order": "A1", "amount": 10}
    assert p.digest == call_digest(p.tool_call_id, "refund", {"order": "A1", "amount": 10})
    model_digest = call_digest(p.tool_call_id, "refund", {"order": "A1", "amount": 500})
    with pytest.raises(ArgumentsMismatch):  # approved for what the model asked: refused
        approvals.take(agent, s.run_id, [Approve(p.tool_call_id, model_digest)])
    r = sim.run(agent, (), resume=approvals.take(agent, s.run_id, [approve(p)])).result
    assert r.status == "finished" and ran == [("refund", ("A1", 10))]
