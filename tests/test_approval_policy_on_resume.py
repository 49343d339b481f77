"""The policy in force when a run resumes decides: the gates (the processors'
`process_tool_call` hooks and the tools' `needs_approval` rules) are asked again for
the suspended step's calls; a call they now refuse is not run and its result says why;
`skip_gates_on_resume=True` keeps the decisions made before the suspension."""

from __future__ import annotations

from pathlib import Path

import pytest

from effects import AskApproval, Continue, Replace, SkipCall
from interpreters.approvals.sql import SQLiteApprovalStore
from interpreters.approvals.store import Approvals, ApprovalStore, MemoryApprovalStore
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.approval import approve, resumption
from pipeline.processor import ToolCallArgs, ToolCallResult, processor
from pipeline.processors import Budget
from pipeline.tools import tool
from pipeline.values.result import RunResult, Suspension

ran: list[tuple[str, int]] = []
policy: dict[str, tuple[str, ...]] = {}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()
    policy.clear()


def refund(order: str, amount: int) -> str:
    """Refund an order."""
    ran.append((order, amount))
    return f"refunded {amount} on {order}"


def lookup(order: str) -> str:
    """Look an order up."""
    ran.append((order, 0))
    return f"{order} is known"


def _shop_policy(a: ToolCallArgs[None]) -> ToolCallResult[None]:
    """The shop's rules, read as they are when asked (they change while a run waits)."""
    if a.tool_name in policy.get("blocked", ()):
        return SkipCall(f"not run: {a.tool_name} is blocked by the shop's policy", True)
    if a.tool_name == "refund" or a.tool_name in policy.get("ask", ()):
        return AskApproval(f"{a.tool_name} {a.args}?")
    return Continue()


AGENT = Agent.create("sim/model", tools=[refund, lookup],
                     input_processors=[processor("policy", process_tool_call=_shop_policy)])


def _model() -> ScriptedModel:
    return ScriptedModel([
        Say(calls=[call("lookup", order="A1"), call("refund", order="A1", amount=50)]),
        Say("done"),
    ])


def _suspended(sim: Simulator, approvals: Approvals) -> Suspension:
    r = approvals.keep(sim.run(AGENT, "refund A1").result)
    assert r.status == "suspended" and r.suspension is not None and ran == []
    return r.suspension


def _results(r: RunResult) -> list[object]:
    return [p.result for m in r.messages.messages for p in m.tool_results()]


def test_a_call_the_policy_now_refuses_is_not_run_and_the_result_says_why() -> None:
    sim = Simulator(_model())
    approvals = Approvals(MemoryApprovalStore(), AGENT)
    s = _suspended(sim, approvals)
    go_on = approvals.decide(s.run_id, [approve(p) for p in s.pending])
    policy["blocked"] = ("refund",)  # changed while the run waited
    done = sim.run(AGENT, (), resume=go_on).result
    assert done.status == "finished"
    assert ran == [("A1", 0)]  # the lookup ran, the approved refund did not
    assert _results(done) == ["A1 is known", "not run: refund is blocked by the shop's policy"]


def test_skip_gates_on_resume_keeps_the_decisions_made_before_the_suspension() -> None:
    sim = Simulator(_model())
    s = _suspended(sim, Approvals(MemoryApprovalStore(), AGENT))
    go_on = resumption(s, [approve(p) for p in s.pending], skip_gates_on_resume=True)
    policy["blocked"] = ("refund",)
    done = sim.run(AGENT, (), resume=go_on).result
    assert done.status == "finished" and ran == [("A1", 0), ("A1", 50)]


def test_a_call_the_policy_now_asks_for_waits_again_and_the_approved_one_is_not_asked() -> None:
    sim = Simulator(_model())
    approvals = Approvals(MemoryApprovalStore(), AGENT)
    s = _suspended(sim, approvals)
    go_on = approvals.decide(s.run_id, [approve(p) for p in s.pending])
    policy["ask"] = ("lookup",)
    again = approvals.keep(sim.run(AGENT, (), resume=go_on).result)
    assert again.status == "suspended" and again.suspension is not None and ran == []
    assert [p.tool_name for p in again.suspension.pending] == ["lookup"]
    go_on = approvals.decide(again.suspension.run_id,
                             [approve(p) for p in again.suspension.pending])
    done = sim.run(AGENT, (), resume=go_on).result
    assert done.status == "finished" and ran == [("A1", 0), ("A1", 50)]


@pytest.mark.parametrize("kept", ["memory", "sqlite"])
def test_a_gate_that_counts_calls_counts_a_resumed_steps_calls_once(
    kept: str, tmp_path: Path
) -> None:
    agent = Agent.create("sim/model", tools=[tool(refund, needs_approval=True)],
                         input_processors=[Budget(max_tool_calls=1, on_limit="finish")])
    sim = Simulator(ScriptedModel([Say(calls=[call("refund", order="A1", amount=5)]),
                                   Say("done")]))
    store: ApprovalStore = (MemoryApprovalStore() if kept == "memory"
                            else SQLiteApprovalStore(tmp_path / "runs.db"))
    approvals = Approvals(store, agent)
    r = approvals.keep(sim.run(agent, "refund").result)
    assert r.suspension is not None
    go_on = approvals.decide(r.suspension.run_id, [approve(p) for p in r.suspension.pending])
    assert sim.run(agent, (), resume=go_on).result.status == "finished"
    assert ran == [("A1", 5)]


def test_a_rule_changed_while_the_run_waited_is_the_rule_on_resume() -> None:
    limit = {"above": 100}

    def over(order: str, amount: int) -> bool:
        return amount > limit["above"]

    agent = Agent.create("sim/model", tools=[tool(refund, needs_approval=over), lookup])
    sim = Simulator(ScriptedModel([
        Say(calls=[call("refund", order="A1", amount=500), call("refund", order="B2", amount=50)]),
        Say("done"),
    ]))
    approvals = Approvals(MemoryApprovalStore(), agent)
    r = approvals.keep(sim.run(agent, "refund").result)
    assert r.suspension is not None and [p.args["order"] for p in r.suspension.pending] == ["A1"]
    go_on = approvals.decide(r.suspension.run_id, [approve(p) for p in r.suspension.pending])
    limit["above"] = 10  # the 50 one now needs a person too
    again = approvals.keep(sim.run(agent, (), resume=go_on).result)
    assert again.status == "suspended" and again.suspension is not None and ran == []
    assert [p.args["order"] for p in again.suspension.pending] == ["B2"]


def test_a_gate_that_changes_arguments_changes_them_once_across_a_resume() -> None:
    def tag(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return Replace({**a.args, "order": f"{a.args['order']}-x"})

    agent = Agent.create("sim/model", tools=[tool(refund, needs_approval=_over_100), lookup],
                         input_processors=[processor("tag", process_tool_call=tag)])
    sim = Simulator(ScriptedModel([
        Say(calls=[call("lookup", order="A1"), call("refund", order="A1", amount=500)]),
        Say("done"),
    ]))
    approvals = Approvals(MemoryApprovalStore(), agent)
    r = approvals.keep(sim.run(agent, "refund").result)
    assert r.suspension is not None
    (p,) = r.suspension.pending
    assert p.args == {"order": "A1-x", "amount": 500}  # what the person decides on
    go_on = approvals.decide(r.suspension.run_id, [approve(p)])
    assert sim.run(agent, (), resume=go_on).result.status == "finished"
    assert ran == [("A1-x", 0), ("A1-x", 500)]


def _over_100(order: str, amount: int) -> bool:
    return amount > 100
