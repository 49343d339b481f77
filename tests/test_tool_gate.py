"""process_tool_call and process_tool_result: the gate before a tool runs, the check after.

Each decision of a gate (Continue, Replace, SkipCall, Abort), the order of the processors,
what reaches the caller's stream while a gate decides, and failures: a gate that raises or
hangs fails closed (the tool does not run) and every call still gets one result.
"""

from __future__ import annotations

import anyio
import msgspec
import pytest

from effects import Abort, Continue, Replace, SkipCall
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.processor import (
    Processor,
    ToolCallArgs,
    ToolCallResult,
    ToolResultArgs,
    ToolResultResult,
    processor,
)
from pipeline.values.chunks import ToolCall, ToolCallDelta, ToolError, ToolResult
from pipeline.values.messages import MessageList, ToolResultPart
from pipeline.values.result import ProcessorFailed
from tests.helpers import unpaired_tool_calls

ran: list[tuple[str, int]] = []


def send(to: str, amount: int) -> str:
    """Send money."""
    ran.append((to, amount))
    return f"sent {amount} to {to}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def _model(*calls: tuple[str, int], then: str = "done") -> ScriptedModel:
    return ScriptedModel([
        Say(calls=[call("send", to=to, amount=n) for to, n in calls]), Say(then),
    ])


def _agent(*procs: Processor | object, output: bool = False) -> Agent:
    kw = "output_processors" if output else "input_processors"
    return Agent.create("sim/model", tools=[send], **{kw: procs})  # type: ignore[arg-type]




def _results(ml: MessageList) -> list[ToolResultPart]:
    return [p for m in ml.messages for p in m.tool_results()]


def test_gates_run_once_per_call_in_list_order_and_chain_their_replacements() -> None:
    seen: list[tuple[str, str, object]] = []

    def double(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        seen.append(("double", a.call.tool_call_id, a.args["amount"]))
        return Replace({**a.args, "amount": int(str(a.args["amount"])) * 2})

    def look(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        seen.append(("look", a.call.tool_call_id, a.args["amount"]))
        return Continue()

    agent = Agent.create(
        "sim/model", tools=[send],
        input_processors=[processor("double", process_tool_call=double)],
        output_processors=[processor("look", process_tool_call=look)],
    )
    r = Simulator(_model(("bob", 2), ("amy", 3))).run(agent, "pay").result
    assert r.status == "finished"
    assert ran == [("bob", 4), ("amy", 6)]
    assert seen == [
        ("double", "call_0_0", 2), ("look", "call_0_0", 4),
        ("double", "call_0_1", 3), ("look", "call_0_1", 6),
    ]
    # the model's call stays as it made it; its result is of the call as it ran
    assert [c.args["amount"] for m in r.messages.messages for c in m.tool_calls()] == [2, 3]
    assert [p.result for p in _results(r.messages)] == ["sent 4 to bob", "sent 6 to amy"]


def test_a_skipped_call_is_answered_without_running_and_later_gates_are_not_asked() -> None:
    asked: list[str] = []

    def refuse(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return SkipCall("refused", is_error=True) if a.args["to"] == "mallory" else Continue()

    def later(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        asked.append(str(a.args["to"]))
        return Continue()

    agent = _agent(processor("refuse", process_tool_call=refuse),
                   processor("later", process_tool_call=later))
    model = _model(("mallory", 9), ("bob", 1))
    run = Simulator(model).run(agent, "pay")
    r = run.result
    assert ran == [("bob", 1)] and asked == ["bob"]
    assert [(p.result, p.is_error) for p in _results(r.messages)] == [
        ("refused", True), ("sent 1 to bob", False)
    ]
    assert unpaired_tool_calls(r.messages.messages) == []
    # the model reads the refusal as the call's result
    sent = model.requests[1].messages[-1]
    assert [p.result for p in sent.tool_results()] == ["refused", "sent 1 to bob"]
    # no argument text of the refused call reached the caller
    out = msgspec.json.encode(run.chunks)
    assert b"mallory" not in out
    refused = [c for c in run.chunks if isinstance(c, ToolCall | ToolCallDelta)
               and c.tool_call_id == "call_0_0"]
    assert refused == [ToolCall("call_0_0", "send", {})]
    assert any(isinstance(c, ToolCallDelta) and c.tool_call_id == "call_0_1"
               for c in run.chunks)


def test_tool_call_chunks_wait_until_the_gates_decided() -> None:
    order: list[str] = []

    def gate(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        order.append("gate")
        return Continue()

    sim = Simulator(_model(("bob", 1)))
    with sim.stream(_agent(processor("gate", process_tool_call=gate)), "pay") as s:
        for c in s:
            if isinstance(c, ToolCall | ToolCallDelta):
                order.append(type(c).__name__)
    assert order[0] == "gate" and "ToolCall" in order


def test_replaced_arguments_are_checked_against_the_schema_again() -> None:
    def bad(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return Replace({"to": "bob", "amount": "lots"})

    r = Simulator(_model(("bob", 1))).run(_agent(processor("bad", process_tool_call=bad)),
                                         "pay").result
    assert r.status == "failed" and ran == []
    assert isinstance(r.error, ProcessorFailed)
    assert (r.error.processor_id, r.error.hook, r.error.error_type) == (
        "bad", "process_tool_call", "InvalidArguments"
    )
    assert unpaired_tool_calls(r.messages.messages) == []


def test_an_abort_in_a_gate_trips_the_run_and_no_tool_of_the_step_runs() -> None:
    def stop(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return Abort("too much") if int(str(a.args["amount"])) > 10 else Continue()

    r = Simulator(_model(("bob", 1), ("amy", 99))).run(
        _agent(processor("stop", process_tool_call=stop)), "pay"
    ).result
    assert r.status == "tripped" and r.tripwire is not None
    assert r.tripwire.reason == "too much" and r.tripwire.processor_id == "stop"
    assert ran == []
    assert all(p.is_error for p in _results(r.messages))
    assert unpaired_tool_calls(r.messages.messages) == []


def test_a_gate_that_raises_fails_closed() -> None:
    def crash(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        raise RuntimeError("gate down")

    r = Simulator(_model(("bob", 1))).run(
        _agent(processor("crash", process_tool_call=crash)), "pay"
    ).result
    assert r.status == "failed" and ran == []
    assert isinstance(r.error, ProcessorFailed) and r.error.error_type == "RuntimeError"
    assert unpaired_tool_calls(r.messages.messages) == []


def test_a_gate_that_hangs_is_cut_by_the_timeout_and_the_tool_does_not_run() -> None:
    class Hangs(Processor):
        id = "hangs"

        async def process_tool_call(
            self, args: ToolCallArgs[None]
        ) -> ToolCallResult[None]:
            await anyio.sleep(3600)
            return Continue()

    async def go() -> None:
        run = await AsyncSimulator(_model(("bob", 1))).run(_agent(Hangs()), "pay", timeout=5)
        r = run.result
        assert r.status == "cancelled" and ran == []
        assert unpaired_tool_calls(r.messages.messages) == []

    anyio.run(go)


def test_a_result_check_is_told_whether_the_tool_ran_and_with_what() -> None:
    seen: list[tuple[object, bool, object]] = []

    def gate(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        if a.args["to"] == "mallory":
            return SkipCall("refused", is_error=True)
        return Replace({"to": "bob", "amount": 2})

    def note(a: ToolResultArgs[None]) -> ToolResultResult[None]:
        seen.append((a.call.args, a.ran, a.result))
        return Continue()

    agent = _agent(processor("gate", process_tool_call=gate),
                   processor("note", process_tool_result=note))
    Simulator(_model(("mallory", 9), ("eve", 1))).run(agent, "pay")
    assert ran == [("bob", 2)]
    assert seen == [({"to": "mallory", "amount": 9}, False, "refused"),
                    ({"to": "bob", "amount": 2}, True, "sent 2 to bob")]


def test_a_result_check_replaces_what_the_model_and_the_caller_see() -> None:
    def mask(a: ToolResultArgs[None]) -> ToolResultResult[None]:
        return Replace(str(a.result).replace("bob", "b**"))

    model = _model(("bob", 1))
    run = Simulator(model).run(_agent(processor("mask", process_tool_result=mask),
                                      output=True), "pay")
    assert [p.result for p in _results(run.result.messages)] == ["sent 1 to b**"]
    assert [p.result for p in model.requests[1].messages[-1].tool_results()] == [
        "sent 1 to b**"
    ]
    assert [c.result for c in run.chunks if isinstance(c, ToolResult)] == ["sent 1 to b**"]


def test_an_abort_in_a_result_check_withholds_the_results() -> None:
    def block(a: ToolResultArgs[None]) -> ToolResultResult[None]:
        return Abort("leaks")

    run = Simulator(_model(("bob", 1), ("amy", 2))).run(
        _agent(processor("block", process_tool_result=block), output=True), "pay"
    )
    r = run.result
    assert r.status == "tripped" and ran == [("bob", 1), ("amy", 2)]
    assert all(p.is_error and "withheld" in str(p.result) for p in _results(r.messages))
    assert not any(isinstance(c, ToolResult) for c in run.chunks)
    assert any(isinstance(c, ToolError) for c in run.chunks)
    assert unpaired_tool_calls(r.messages.messages) == []


class Limits(msgspec.Struct, frozen=True):
    most: int


def test_the_hooks_see_the_run_context_and_its_deps() -> None:
    class Cap(Processor[Limits]):
        id = "cap"

        def process_tool_call(self, args: ToolCallArgs[None, Limits]) -> ToolCallResult[None]:
            assert args.context.deps is not None
            if int(str(args.args["amount"])) > args.context.deps.most:
                return SkipCall(f"over {args.context.deps.most}", is_error=True)
            return Continue()

    agent = Agent.create("sim/model", tools=[send], input_processors=[Cap()])
    r = Simulator(_model(("bob", 5), ("amy", 50))).run(agent, "pay", deps=Limits(10)).result
    assert ran == [("bob", 5)]
    assert [p.result for p in _results(r.messages)] == ["sent 5 to bob", "over 10"]


def test_async_gates_decide_alike_on_the_async_interpreter() -> None:
    async def refuse(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        await anyio.sleep(0)
        return SkipCall("no") if a.args["to"] == "x" else Continue()

    async def go() -> list[object]:
        run = await AsyncSimulator(_model(("x", 1), ("bob", 2))).run(
            _agent(processor("refuse", process_tool_call=refuse)), "pay"
        )
        return [p.result for p in _results(run.result.messages)]

    got = anyio.run(go)
    assert got == ["no", "sent 2 to bob"] and ran == [("bob", 2)]


def test_calls_a_gate_stopped_go_out_without_their_arguments_before_their_results() -> None:
    def stop(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return Abort("no payments today")

    run = Simulator(_model(("bob", 7))).run(_agent(processor("stop", process_tool_call=stop)),
                                            "pay")
    tool_chunks = [c for c in run.chunks if isinstance(c, ToolCall | ToolCallDelta | ToolError)]
    assert tool_chunks == [
        ToolCall("call_0_0", "send", {}),
        ToolError("call_0_0", "send", "tool call not run: no payments today"),
    ]
