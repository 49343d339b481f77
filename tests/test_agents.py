"""Agents that call agents (docs/agents.md): agent tools, parallel children, handoffs, and
the guarantees of one run kept by the tree, on the sync and async interpreters."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import msgspec
import pytest

from effects import Abort, AskApproval, Continue, SkipCall
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.core.trace import Trace
from interpreters.durable.loop import ModelOutcome, ToolDone, drive
from interpreters.memory import HashEmbedder, InMemoryStore, memory_handlers
from interpreters.run.common import perform_here, run_tool, start_run, stream_failed
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, SimRun, Simulator, call
from pipeline import Agent, ToolCallArgs, ToolCallResult, processor
from pipeline.approval import approve, deny
from pipeline.processors import MessageHistory, PIIDetector
from pipeline.protocol import ToolInvocation
from pipeline.values.chunks import Chunk, DataChunk, ModelEvent
from pipeline.values.model import ModelRequest
from pipeline.values.result import RunResult

Backend = Callable[[Agent, str, dict[str, ScriptedModel], ScriptedModel], SimRun]


def on_sync(agent: Agent, prompt: str, models: dict[str, ScriptedModel],
            root: ScriptedModel, **kw: object) -> SimRun:
    return Simulator(root, models=models).run(agent, prompt, **kw)  # type: ignore[arg-type]


def _on_async(backend: str) -> Backend:
    def run(agent: Agent, prompt: str, models: dict[str, ScriptedModel],
            root: ScriptedModel) -> SimRun:
        async def main() -> SimRun:
            return await AsyncSimulator(root, models=models).run(agent, prompt)
        return anyio.run(main, backend=backend)
    return run


BACKENDS: dict[str, Backend] = {
    "sync": on_sync, "asyncio": _on_async("asyncio"), "trio": _on_async("trio"),
}


class Refund(msgspec.Struct, frozen=True):
    order: str
    amount: int


def _supervisor(*tools: object) -> Agent:
    return Agent.create("sim/sup", name="support", tools=list(tools))  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
def test_parallel_children_answer_their_calls_and_add_up(backend: str) -> None:
    research = Agent.create("sim/research", name="research")
    refunds = Agent.create("sim/refunds", name="refunds", output_type=Refund)
    sup = _supervisor(research, refunds.as_tool("refunds", "Refund an order."))
    root = ScriptedModel([
        Say(calls=[call("research", input="policy?"), call("refunds", input="order 7")]),
        Say("done"),
    ])
    models = {
        "sim/research": ScriptedModel([Say("30 days")]),
        "sim/refunds": ScriptedModel([Say('{"order": "7", "amount": 5}')]),
    }
    ran = BACKENDS[backend](sup, "help", models, root)
    r = ran.result
    assert r.status == "finished" and r.text == "done"
    results = [p.result for m in r.messages.messages for p in m.tool_results()]
    assert results == ["30 days", {"order": "7", "amount": 5}]  # typed output as the result
    assert [(n.agent, n.status, n.kind) for n in r.children] == [
        ("research", "finished", "tool"), ("refunds", "finished", "tool")]
    own = sum((s.usage.total_tokens for s in r.steps), 0)
    kids = sum(n.usage.total_tokens for n in r.children)
    assert kids > 0 and r.usage.total_tokens == own + kids
    assert set(r.usage_by_agent()) == {"own", "research", "refunds"}
    agents = [c for c in ran.trace.chunks if isinstance(c, DataChunk) and c.name == "data-agent"
              and c.data["status"] != "running"]  # type: ignore[index]
    assert [c.data["text"] for c in agents] == ["30 days", '{"order": "7", "amount": 5}']  # type: ignore[index]
    live = [c.data for c in ran.trace.chunks if isinstance(c, DataChunk)
            and c.name == "data-agent" and c.data["status"] == "running"]  # type: ignore[index]
    assert sorted(d["delta"] for d in live) == ["30 days", '{"order": "7", "amount": 5}']  # type: ignore[index]


def test_the_gate_sees_child_calls_and_can_refuse_one() -> None:
    research = Agent.create("sim/research", name="research")

    def refuse(args: ToolCallArgs[None]) -> ToolCallResult[None]:
        if args.tool_name == "research":
            return SkipCall("not allowed", is_error=True)
        return Continue()

    sup = Agent.create("sim/sup", tools=[research],
                       input_processors=[processor("gate", process_tool_call=refuse)])
    child = ScriptedModel([Say("never")])
    r = on_sync(sup, "x", {"sim/research": child},
                ScriptedModel([Say(calls=[call("research", input="q")]), Say("ok")])).result
    assert child.requests == [] and r.children == ()
    assert [p.result for m in r.messages.messages for p in m.tool_results()] == ["not allowed"]


def test_a_guard_on_the_parent_covers_what_a_child_says() -> None:
    child = Agent.create("sim/research", name="research")
    sup = Agent.create("sim/sup", tools=[child], output_processors=[PIIDetector(strategy="redact")])
    ran = on_sync(sup, "x", {"sim/research": ScriptedModel([Say("write to bob@example.com")])},
                  ScriptedModel([Say(calls=[call("research", input="q")]), Say("ok")]))
    out = msgspec.json.encode(ran.trace.chunks)
    assert b"bob@example.com" not in out
    assert b"bob@example.com" not in msgspec.json.encode(ran.result.messages)


def test_a_child_that_trips_answers_with_an_error_its_streamed_text_what_its_guards_passed(
) -> None:
    block = processor("block", process_output_result=lambda a: Abort("no"))
    child = Agent.create("sim/research", name="research",
                         output_processors=[PIIDetector(strategy="redact"), block])
    sup = _supervisor(child)
    ran = on_sync(sup, "x", {"sim/research": ScriptedModel([Say("mail bob@example.com")])},
                  ScriptedModel([Say(calls=[call("research", input="q")]), Say("ok")]))
    (res,) = [p for m in ran.result.messages.messages for p in m.tool_results()]
    assert res.is_error and "tripped" in str(res.result)
    # As a run's own text, a child's reached the caller as its stream guard passed it;
    # its result, what the parent's model reads, is the error.
    out = msgspec.json.encode(ran.trace.chunks)
    assert b"bob@example.com" not in out and b"mail [REDACTED:email]" in out
    (end,) = [c.data for c in ran.trace.chunks if isinstance(c, DataChunk)
              and c.name == "data-agent" and c.data["status"] != "running"]  # type: ignore[index]
    assert end["status"] == "tripped" and end["text"] == ""  # type: ignore[index]
    assert ran.result.children[0].status == "tripped"


def _memory_tree(block_root: bool) -> tuple[InMemoryStore, RunResult]:
    store = InMemoryStore()
    child = Agent.create("sim/research", name="research", input_processors=[MessageHistory()])
    outs = [processor("block", process_output_result=lambda a: Abort("no"))] if block_root else []
    sup = Agent.create("sim/sup", tools=[child], input_processors=[MessageHistory()],
                       output_processors=outs)
    sim = Simulator(ScriptedModel([Say(calls=[call("research", input="q")]), Say("ok")]),
                    models={"sim/research": ScriptedModel([Say("found")])},
                    handlers=memory_handlers(store, HashEmbedder()))
    return store, sim.run(sup, "hi", thread_id="t").result


def test_children_save_only_when_the_root_is_approved() -> None:
    store, r = _memory_tree(block_root=False)
    assert r.status == "finished"
    assert [m.text for m in store.last_messages("t/research", 10)] == ["q", "found"]
    assert len(store.last_messages("t", 10)) >= 2
    store, r = _memory_tree(block_root=True)
    assert r.status == "tripped"
    assert store.last_messages("t/research", 10) == () and store.last_messages("t", 10) == ()


def _asking(tool_name: str) -> object:
    def gate(args: ToolCallArgs[None]) -> ToolCallResult[None]:
        return AskApproval("ok?") if args.tool_name == tool_name else Continue()
    return processor("approve", process_tool_call=gate)


@pytest.mark.parametrize("backend", ["sync", "asyncio"])
def test_an_approval_in_a_child_suspends_the_tree_and_resumes_that_call_once(
    backend: str,
) -> None:
    paid: list[int] = []
    looked: list[str] = []

    def pay(amount: int) -> str:
        """Pay."""
        paid.append(amount)
        return f"paid {amount}"

    def look(q: str) -> str:
        """Look."""
        looked.append(q)
        return "seen"

    refunds = Agent.create("sim/refunds", name="refunds", tools=[pay],
                           input_processors=[_asking("pay")])  # type: ignore[list-item]
    research = Agent.create("sim/research", name="research", tools=[look])
    sup = _supervisor(refunds, research)
    models = {
        "sim/refunds": ScriptedModel([Say(calls=[call("pay", amount=5)]), Say("refunded")]),
        "sim/research": ScriptedModel([Say(calls=[call("look", q="x")]), Say("policy")]),
    }
    root = ScriptedModel([
        Say(calls=[call("refunds", input="refund"), call("research", input="look")]),
        Say("all done"),
    ])

    def go(resume: object = None) -> RunResult:
        if backend == "sync":
            sim = Simulator(root, models=models)
            return sim.run(sup, "help" if resume is None else (), resume=resume).result  # type: ignore[arg-type]

        async def main() -> RunResult:
            sim = AsyncSimulator(root, models=models)
            return (await sim.run(sup, "help" if resume is None else (), resume=resume)).result  # type: ignore[arg-type]
        return anyio.run(main)

    first = go()
    assert first.status == "suspended" and paid == [] and looked == ["x"]
    assert first.suspension is not None
    (p,) = first.suspension.pending
    assert p.path == ("call_0_0",) and p.tool_name == "pay"
    assert p.tool_call_id.startswith("call_0_0/")
    desk = Approvals(MemoryApprovalStore(), sup)
    desk.keep(first)
    go_on = desk.decide(first.suspension.run_id, [approve(p)])
    assert go_on is not None
    done = go(go_on)
    assert done.status == "finished" and done.text == "all done"
    assert paid == [5] and looked == ["x"]  # the approved call once; the sibling not again
    results = [x.result for m in done.messages.messages for x in m.tool_results()]
    assert results[-2:] == ["refunded", "policy"]


def test_a_denied_nested_call_is_answered_with_the_reason() -> None:
    refunds = Agent.create("sim/refunds", name="refunds", tools=[lambda_tool()],
                           input_processors=[_asking("pay")])  # type: ignore[list-item]
    sup = _supervisor(refunds)
    models = {"sim/refunds": ScriptedModel([Say(calls=[call("pay", amount=5)]), Say("no refund")])}
    root = ScriptedModel([Say(calls=[call("refunds", input="refund")]), Say("sorry")])
    sim = Simulator(root, models=models)
    first = sim.run(sup, "help").result
    assert first.suspension is not None
    (p,) = first.suspension.pending
    from pipeline.approval import resumption
    done = sim.run(sup, (), resume=resumption(first.suspension, [deny(p, "too much")])).result
    assert done.status == "finished" and done.children[0].status == "finished"


def lambda_tool() -> Callable[[int], str]:
    def pay(amount: int) -> str:
        """Pay."""
        raise AssertionError("a denied call never runs")
    return pay


def test_a_handoff_answers_for_the_run() -> None:
    refunds = Agent.create("sim/refunds", name="refunds", instructions="You do refunds.")
    sup = _supervisor(refunds.as_handoff())
    child = ScriptedModel([Say("Your refund is on its way.")])
    root = ScriptedModel([Say("Let me get refunds.", calls=[call("transfer_to_refunds")])])
    r = on_sync(sup, "I want a refund", {"sim/refunds": child}, root).result
    assert r.status == "finished" and r.answered_by == "refunds"
    assert r.text.endswith("Your refund is on its way.")
    # the new agent read the conversation, not the handoff's tool call
    assert [m.role for m in child.requests[0].messages] == ["user", "assistant"]


def test_a_cancel_of_the_parent_reaches_the_child() -> None:
    from interpreters import CancelSignal
    signal = CancelSignal()

    def stop() -> str:
        """Stop."""
        signal.cancel("enough")
        return "stopping"

    child = Agent.create("sim/research", name="research", tools=[stop])
    sup = _supervisor(child)
    model = ScriptedModel([Say(calls=[call("stop")]), Say("never")])
    sim = Simulator(ScriptedModel([Say(calls=[call("research", input="q")]), Say("x")]),
                    models={"sim/research": model})
    r = sim.run(sup, "x", signal=signal).result
    assert r.status == "cancelled"
    assert len(model.requests) == 1  # the child made no call after the cancel


class _Steps:
    """The durable loop's steps in process (as properties/test_equivalence.py)."""

    def __init__(self, models: dict[str, ScriptedModel]) -> None:
        self.models = models

    def model(self, request: ModelRequest) -> ModelOutcome:
        events: list[ModelEvent] = []
        try:
            for e in self.models[request.model].stream(request):
                events.append(e)
        except Exception as e:
            return ModelOutcome(tuple(events), stream_failed(e, started=bool(events)))
        return ModelOutcome(tuple(events))

    def tool(self, inv: ToolInvocation) -> ToolDone:
        return ToolDone(run_tool(inv))

    def perform(self, request: object) -> object:
        return perform_here(lambda m: self.models[m], {}, request)

    def sleep(self, seconds: float) -> None:
        pass

    def publish(self, chunks: tuple[Chunk, ...]) -> None:
        pass

    def expired(self) -> str | None:
        return None


def test_the_durable_loop_drives_children_command_by_command() -> None:
    research = Agent.create("sim/research", name="research")
    sup = _supervisor(research)
    models = {
        "sim/sup": ScriptedModel([Say(calls=[call("research", input="q")]), Say("ok")]),
        "sim/research": ScriptedModel([Say("found")]),
    }
    d = start_run(sup, "x", run_id="r1", clock=lambda: 0.0, options={"trace": Trace()})
    r = drive(d, _Steps(models))
    assert r.status == "finished" and [n.status for n in r.children] == ["finished"]
    assert [p.result for m in r.messages.messages for p in m.tool_results()] == ["found"]


def _looping_child(steps: int) -> tuple[Agent, ScriptedModel, list[str]]:
    ran: list[str] = []

    def dig(x: int) -> str:
        """Dig."""
        ran.append(f"dig {x}")
        return "deeper"

    model = ScriptedModel([*(Say(calls=[call("dig", x=i)]) for i in range(steps)),
                           Say("found")])
    return Agent.create("sim/digger", name="digger", tools=[dig], max_steps=steps + 2), \
        model, ran


def test_a_parents_budget_stops_a_child_while_it_runs() -> None:
    from pipeline.processors import Budget

    child, child_model, dug = _looping_child(6)
    lead = Agent.create("sim/lead", name="lead", tools=[child],
                        input_processors=[Budget(max_model_calls=3)])
    root = ScriptedModel([Say(calls=[call("digger", input="dig")]), Say("never")])
    r = on_sync(lead, "x", {"sim/digger": child_model}, root).result
    # the lead's call, then the child's two: the tree's third model call is refused
    assert len(child_model.requests) == 2 and dug == ["dig 0", "dig 1"]
    (node,) = r.children
    assert node.status == "tripped"
    assert r.status == "tripped" and r.tripwire is not None
    assert r.tripwire.processor_id == "budget" and len(root.requests) == 1


def test_a_parents_finishing_budget_makes_a_childs_next_step_without_tools() -> None:
    from pipeline.processors import Budget

    child, child_model, _ = _looping_child(6)
    lead = Agent.create("sim/lead", name="lead", tools=[child],
                        input_processors=[Budget(max_model_calls=4, on_limit="finish")])
    root = ScriptedModel([Say(calls=[call("digger", input="dig")]), Say("done")])
    on_sync(lead, "x", {"sim/digger": child_model}, root)
    choices = [req.tool_choice for req in child_model.requests]
    assert choices[:2] == ["auto", "auto"] and choices[2] == "none"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_children_running_at_once_share_their_parents_budget(backend: str) -> None:
    from pipeline.processors import Budget

    kids = []
    models: dict[str, ScriptedModel] = {}
    for name in ("a", "b"):
        agent, model, _ = _looping_child(6)
        kids.append(msgspec.structs.replace(agent, name=name, model=f"sim/{name}"))
        models[f"sim/{name}"] = model
    lead = Agent.create("sim/lead", name="lead", tools=kids,
                        input_processors=[Budget(max_model_calls=5)])
    root = ScriptedModel([Say(calls=[call("a", input="dig"), call("b", input="dig")]),
                          Say("never")])
    r = BACKENDS[backend](lead, "x", models, root).result
    children_calls = sum(len(m.requests) for m in models.values())
    # the lead's one call and the children's: at most one in flight each over the bound
    assert 1 + children_calls <= 5 + 2
    assert {n.status for n in r.children} == {"tripped"}
    assert r.status == "tripped"
