"""A tool's own approval rule (`tool(fn, needs_approval=...)`): every call, or a typed
predicate over its arguments and context, makes the call wait for a person; an edit is
checked by the tool's schema, its rule and the gates again."""

from __future__ import annotations

import msgspec
import pytest

from effects import Continue, Replace, SkipCall
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.approval import EditRejected, approve, edit
from pipeline.processor import (
    InputStepArgs,
    InputStepResult,
    StepChange,
    ToolCallArgs,
    ToolCallResult,
    processor,
)
from pipeline.tools import Tool, tool
from pipeline.tools.context import ToolContext
from pipeline.values.result import ProcessorFailed, RunResult
from tests.refund_tool import ran, refund


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


class Shop(msgspec.Struct, frozen=True):
    approval_above: int


def refund_in(ctx: ToolContext[Shop], order: str, amount: int) -> str:
    """Refund an order."""
    ran.append((order, amount))
    return f"refunded {amount} on {order}"


def _over_100(order: str, amount: int) -> bool:
    return amount > 100


def _model(amount: int) -> ScriptedModel:
    return ScriptedModel([Say(calls=[call("refund", order="A1", amount=amount)]), Say("done")])


def _results(r: RunResult) -> list[object]:
    return [p.result for m in r.messages.messages for p in m.tool_results()]


def test_a_tool_that_always_needs_approval_waits_for_a_person_then_runs_once() -> None:
    agent = Agent.create("sim/model", tools=[tool(refund, needs_approval=True)])
    sim = Simulator(_model(5))
    approvals = Approvals(MemoryApprovalStore(), agent)
    first = approvals.keep(sim.run(agent, "refund A1").result)
    assert first.status == "suspended" and ran == []
    assert first.suspension is not None
    (p,) = first.suspension.pending
    assert (p.tool_name, p.args, p.processor_id) == ("refund", {"order": "A1", "amount": 5},
                                                      "tool:refund")
    done = sim.run(agent, (), resume=approvals.decide(p_run(first), [approve(p)])).result
    assert done.status == "finished" and ran == [("A1", 5)]


def p_run(r: RunResult) -> str:
    assert r.suspension is not None
    return r.suspension.run_id


@pytest.mark.parametrize(("amount", "waits"), [(50, False), (101, True)])
def test_a_predicate_over_the_arguments_decides_which_calls_wait(amount: int, waits: bool) -> None:
    agent = Agent.create("sim/model", tools=[tool(refund, needs_approval=_over_100)])
    r = Simulator(_model(amount)).run(agent, "refund").result
    assert (r.status == "suspended") is waits
    assert ran == ([] if waits else [("A1", amount)])


def test_a_lambda_rule_is_checked_against_the_tool_function() -> None:
    ok = tool(refund, needs_approval=lambda order, amount: amount > 100)
    assert ok.approval_needed({"order": "A", "amount": 101})
    # mypy checks the rule's parameters against the tool's (the ignore is needed):
    def about_orders(order: str) -> bool:
        return order == "A"

    bad: Tool[object] = tool(refund, needs_approval=about_orders)  # type: ignore[arg-type]
    assert isinstance(bad, Tool)


def test_a_decorated_tool_takes_a_typed_rule() -> None:
    @tool(needs_approval=_over_100)
    def refund_big(order: str, amount: int) -> str:
        """Refund."""
        return order

    assert refund_big.approval_needed({"order": "A", "amount": 500})
    assert not refund_big.approval_needed({"order": "A", "amount": 5})


def test_a_rule_reads_the_runs_deps_through_the_tool_context() -> None:
    def above(ctx: ToolContext[Shop], order: str, amount: int) -> bool:
        return amount > ctx.deps.approval_above

    agent = Agent[Shop].create("sim/model",
                               tools=[tool(refund_in, name="refund", needs_approval=above)])
    low = Simulator(_model(30)).run(agent, "refund", deps=Shop(approval_above=10)).result
    assert low.status == "suspended" and ran == []
    high = Simulator(_model(30)).run(agent, "refund", deps=Shop(approval_above=100)).result
    assert high.status == "finished" and ran == [("A1", 30)]


@pytest.mark.parametrize("rule", [lambda order, amount: 1 / 0, lambda order, amount: "yes"])
def test_a_rule_that_fails_fails_closed(rule: object) -> None:
    agent = Agent.create("sim/model", tools=[Tool.define(
        "refund", "Refund.", {"type": "object", "properties": {
            "order": {"type": "string"}, "amount": {"type": "integer"}}}, refund,
        needs_approval=rule)])  # type: ignore[arg-type]
    r = Simulator(_model(5)).run(agent, "refund").result
    assert r.status == "failed" and ran == []
    assert isinstance(r.error, ProcessorFailed) and r.error.processor_id == "tool:refund"


def test_a_rule_that_is_not_a_rule_is_refused_when_the_tool_is_made() -> None:
    with pytest.raises(TypeError, match="needs_approval"):
        tool(refund, needs_approval="always")  # type: ignore[call-overload]


def test_the_tool_rule_is_asked_after_the_gates_with_the_arguments_they_left() -> None:
    def halve(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        from effects import Replace

        return Replace({**a.args, "amount": int(str(a.args["amount"])) // 2})

    agent = Agent.create("sim/model", tools=[tool(refund, needs_approval=_over_100)],
                         input_processors=[processor("halve", process_tool_call=halve)])
    r = Simulator(_model(150)).run(agent, "refund").result  # 75 after the gate: no ask
    assert r.status == "finished" and ran == [("A1", 75)]


# --- edits -----------------------------------------------------------------------------


def _refuse_over_1000(a: ToolCallArgs[None]) -> ToolCallResult[None]:
    if int(str(a.args["amount"])) > 1000:
        return SkipCall("refused: refunds over 1000 are not made here", is_error=True)
    return Continue()


RULED = Agent.create("sim/model", tools=[tool(refund, needs_approval=_over_100)],
                     input_processors=[processor("limit", process_tool_call=_refuse_over_1000)])


def _waiting(sim: Simulator, approvals: Approvals) -> RunResult:
    r = approvals.keep(sim.run(RULED, "refund").result)
    assert r.status == "suspended" and r.suspension is not None
    return r


def test_an_edit_the_gates_now_refuse_is_not_run_and_the_result_says_why() -> None:
    sim = Simulator(_model(500))
    approvals = Approvals(MemoryApprovalStore(), RULED)
    r = _waiting(sim, approvals)
    assert r.suspension is not None
    (p,) = r.suspension.pending
    go_on = approvals.decide(r.suspension.run_id, [edit(p, {"order": "A1", "amount": 5000})])
    done = sim.run(RULED, (), resume=go_on).result
    assert done.status == "finished" and ran == []
    assert _results(done) == ["refused: refunds over 1000 are not made here"]


def test_an_edit_the_person_approved_runs_with_its_arguments_once() -> None:
    sim = Simulator(_model(500))
    approvals = Approvals(MemoryApprovalStore(), RULED)
    r = _waiting(sim, approvals)
    assert r.suspension is not None
    (p,) = r.suspension.pending
    go_on = approvals.decide(r.suspension.run_id, [edit(p, {"order": "A1", "amount": 400})])
    assert sim.run(RULED, (), resume=go_on).result.status == "finished"
    assert ran == [("A1", 400)]


@pytest.mark.parametrize("args", [
    {"order": "A1", "amount": "many"},
    {"order": "A1", "amount": 5, "tool_name": "delete_everything"},
    {"tool": "other", "order": "A1", "amount": 5},
])
def test_an_edit_is_validated_by_its_own_tools_schema_and_cannot_switch_tool(
    args: dict[str, object]
) -> None:
    sim = Simulator(_model(500))
    approvals = Approvals(MemoryApprovalStore(), RULED)
    r = _waiting(sim, approvals)
    assert r.suspension is not None
    (p,) = r.suspension.pending
    with pytest.raises(EditRejected):
        approvals.decide(r.suspension.run_id, [edit(p, args)])
    assert approvals.suspended()  # still waiting


def test_a_ruled_tool_a_processor_adds_for_one_step_only_still_waits() -> None:
    ruled = tool(refund, needs_approval=True)

    def offer(args: InputStepArgs[None]) -> InputStepResult[None]:
        return Replace(StepChange(tools=(*args.tools, ruled)))

    agent = Agent.create("sim/model", input_processors=[  # (declared nowhere)
        processor("offer", process_input_step=offer)])
    r = Simulator(_model(5)).run(agent, "refund").result
    assert r.status == "suspended" and ran == []
