"""For any sequence of approve / deny / edit / crash / resume, each approved call runs
exactly once, with the approved arguments, and the history stays paired.

On the simulator: a scripted model makes payment calls step after step; a gate asks
approval for the large ones; each suspension is decided (approve, deny, edit to drawn
arguments), sometimes after a refused attempt (a decision for other arguments, a second
resume of a suspension already resumed), or "crashes" after taking the suspension and
before running it (the suspension is not handed out again: the call never runs).
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from effects import AskApproval, Continue
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.approval import (
    Approve,
    ArgumentsMismatch,
    Decision,
    RunNotSuspended,
    approve,
    deny,
    edit,
)
from pipeline.processor import ToolCallArgs, ToolCallResult, processor
from pipeline.tools.context import ToolContext
from pipeline.values.result import RunResult
from tests.helpers import unpaired_tool_calls

LIMIT = 100


def _agent(ran: list[tuple[str, dict[str, object]]]) -> Agent:
    def send(ctx: ToolContext[None], to: str, amount: int) -> str:
        """Send money."""
        ran.append((ctx.tool_call_id, {"to": to, "amount": amount}))
        return f"sent {amount} to {to}"

    def gate(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        if int(str(a.args["amount"])) >= LIMIT:
            return AskApproval(f"send {a.args['amount']}?")
        return Continue()

    return Agent.create("sim/model", tools=[send], max_steps=8,
                        input_processors=[processor("gate", process_tool_call=gate)])


amounts = st.sampled_from((5, 50, 150, 500))
steps = st.lists(
    st.lists(st.tuples(st.sampled_from(("bob", "amy")), amounts), min_size=1, max_size=3),
    min_size=1, max_size=3,
)




@given(script=steps, data=st.data())
def test_each_approved_call_runs_once_with_the_approved_arguments(
    script: list[list[tuple[str, int]]], data: st.DataObject
) -> None:
    ran: list[tuple[str, dict[str, object]]] = []
    agent = _agent(ran)
    model = ScriptedModel(
        [Say(calls=[call("send", to=to, amount=n) for to, n in calls]) for calls in script]
        + [Say("done")]
    )
    sim = Simulator(model)
    approvals = Approvals(MemoryApprovalStore())
    decided: dict[str, dict[str, object] | None] = {}  # call id -> approved args or None
    lost: set[str] = set()  # the calls of a step whose resume crashed
    r: RunResult = approvals.keep(sim.run(agent, "pay").result)
    crashed = False
    while r.status == "suspended":
        s = r.suspension
        assert s is not None
        decisions: list[Decision] = []
        for p in s.pending:
            how = data.draw(st.sampled_from(("approve", "deny", "edit")), label="decision")
            if how == "approve":
                decisions.append(approve(p))
                decided[p.tool_call_id] = dict(p.args)
            elif how == "deny":
                decisions.append(deny(p, "no"))
                decided[p.tool_call_id] = None
            else:
                args = {"to": p.args["to"], "amount": data.draw(amounts, label="edited")}
                decisions.append(edit(p, args))
                decided[p.tool_call_id] = args
        if data.draw(st.booleans(), label="a decision for other arguments first"):
            p = s.pending[0]
            with pytest.raises(ArgumentsMismatch):
                approvals.take(agent, s.run_id, [Approve(p.tool_call_id, "f" * 64)])
        go_on = approvals.take(agent, s.run_id, decisions)
        with pytest.raises(RunNotSuspended):  # handed out once
            approvals.take(agent, s.run_id, decisions)
        if data.draw(st.integers(0, 4), label="crash") == 0:
            # the process dies after taking the suspension, before running it: nothing
            # of that step ever runs (at most once)
            lost = {g.call.tool_call_id for g in s.calls}
            crashed = True
            break
        r = approvals.keep(sim.run(agent, (), resume=go_on).result)
    expected: dict[str, dict[str, object]] = {}
    for m in r.messages.messages:
        for c in m.tool_calls():
            if c.tool_call_id in lost:
                continue
            want = decided[c.tool_call_id] if c.tool_call_id in decided else dict(c.args)
            if want is not None:
                expected[c.tool_call_id] = want
    ids = [i for i, _ in ran]
    assert len(ids) == len(set(ids)), "a call ran twice"
    assert dict(ran) == expected
    if not crashed:
        assert r.status == "finished", r.error
        assert unpaired_tool_calls(r.messages.messages) == []
        assert msgspec.json.encode(r.messages)  # the history encodes


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8,
)
tool_names = st.from_regex(r"[a-z_]{1,12}", fullmatch=True)


@given(call_id=st.sampled_from(("call_0", "call_1", "c1")), names=st.tuples(tool_names,
       tool_names).filter(lambda n: n[0] != n[1]),
       args=st.dictionaries(st.text(max_size=6), json_values, max_size=4))
def test_an_approval_s_digest_changes_with_the_tool_s_name(
    call_id: str, names: tuple[str, str], args: dict[str, object]
) -> None:
    """Call ids like `call_0` recur across runs: two calls that differ only in their
    tool's name are never decided by one approval."""
    from pipeline.approval import call_digest

    assert call_digest(call_id, names[0], args) != call_digest(call_id, names[1], args)
    assert call_digest(call_id, names[0], args) == call_digest(call_id, names[0], dict(args))
