"""Tools that misbehave, and models (or processors) that reuse tool-call ids.

A tool result that cannot be encoded becomes an error result the model sees, so the
history always encodes; a sync tool that returns a coroutine is a clear error (and the
coroutine is closed, not left "never awaited"); tool-call ids are unique across the whole
run, so `result.messages` stays paired whatever ids the model sends.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable
from types import CoroutineType

import msgspec
import pytest

from effects import Replace
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.processor import OutputStepArgs, OutputStepResult, processor
from pipeline.tools import Tool, make_tool
from pipeline.values.messages import Message, MessageList, TextPart, ToolCallPart, ToolResultPart
from pipeline.values.pairing import is_paired
from pipeline.values.result import RunResult


class Opaque:
    """Something JSON cannot hold."""


def opaque() -> object:
    """Returns a custom object."""
    return Opaque()


def recursive() -> object:
    """Returns a list that contains itself."""
    loop: list[object] = []
    loop.append(loop)
    return loop


def echo(x: int) -> int:
    """Echo."""
    return x


def _run(agent: Agent, script: list[Say], prompt: str | MessageList = "go") -> RunResult:
    model = ScriptedModel(script)
    result = Simulator(model).run(agent, prompt).result
    msgspec.json.encode(result.messages)  # never raises
    assert is_paired(result.messages.messages)
    return result


def _results(r: RunResult) -> list[ToolResultPart]:
    return [p for m in r.messages.messages for p in m.tool_results()]


@pytest.mark.parametrize(
    ("fn", "type_name"), [(opaque, "Opaque"), (recursive, "list")], ids=["object", "recursive"]
)
def test_an_unencodable_tool_result_is_an_error_result_naming_the_type(
    fn: Callable[[], object], type_name: str
) -> None:
    t = make_tool(fn, name="t")
    model = ScriptedModel([Say("", calls=[call("t")]), Say("ok")])
    r = Simulator(model).run(Agent.create("m", tools=[t]), "go").result
    assert r.status == "finished"
    msgspec.json.encode(r.messages)
    [res] = _results(r)
    assert res.is_error
    assert isinstance(res.result, str) and type_name in res.result and "'t'" in res.result
    # the model saw the error
    assert model.requests[1].messages[-1].tool_results()[0].is_error


def test_a_sync_tool_returning_a_coroutine_is_a_clear_error_and_the_coroutine_is_closed() -> None:
    async def later() -> int:
        return 1

    made: list[CoroutineType[object, object, int]] = []

    def sneaky() -> object:
        """Looks sync, returns a coroutine."""
        c = later()
        assert isinstance(c, CoroutineType)
        made.append(c)
        return c

    tool = Tool.define("sneaky", "x", {"type": "object", "properties": {}}, sneaky)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = _run(Agent.create("m", tools=[tool]), [Say("", calls=[call("sneaky")]), Say("ok")])
        gc.collect()
    [res] = _results(r)
    assert res.is_error and isinstance(res.result, str)
    assert "coroutine" in res.result and "async def" in res.result
    assert made[0].cr_frame is None  # closed
    assert not [w for w in caught if "never awaited" in str(w.message)]


@pytest.mark.anyio
async def test_the_async_interpreter_keeps_unencodable_results_out_too() -> None:
    async def aopaque() -> object:
        """Async, returns a custom object."""
        return Opaque()

    ran = await AsyncSimulator(ScriptedModel([Say("", calls=[call("t")]), Say("ok")])).run(
        Agent.create("m", tools=[make_tool(aopaque, name="t")]), "go"
    )
    msgspec.json.encode(ran.result.messages)
    [res] = _results(ran.result)
    assert res.is_error and "Opaque" in str(res.result)


# --- tool-call ids unique across the run -------------------------------------------------


def test_three_calls_sharing_one_id_in_one_response_get_three_distinct_ids() -> None:
    r = _run(
        Agent.create("m", tools=[echo]),
        [Say("", calls=[call("echo", tool_call_id="c", x=i) for i in range(3)]), Say("ok")],
    )
    calls = [p for m in r.messages.messages for p in m.tool_calls()]
    assert len({c.tool_call_id for c in calls}) == 3
    assert [p.result for p in _results(r)] == [0, 1, 2]


def test_a_model_reusing_an_id_in_a_later_step_still_leaves_a_paired_history() -> None:
    r = _run(
        Agent.create("m", tools=[echo]),
        [
            Say("", calls=[call("echo", tool_call_id="call_0", x=1)]),
            Say("", calls=[call("echo", tool_call_id="call_0", x=2)]),
            Say("done"),
        ],
    )
    calls = [p for m in r.messages.messages for p in m.tool_calls()]
    assert calls[0].tool_call_id == "call_0" and calls[1].tool_call_id != "call_0"
    assert [(p.tool_call_id, p.result) for p in _results(r)] == [
        ("call_0", 1), (calls[1].tool_call_id, 2)
    ]


def test_a_model_reusing_an_id_of_the_input_history_gets_a_fresh_one() -> None:
    history = MessageList.of([
        Message(id="u", role="user", parts=(TextPart("hi"),)),
        Message(id="a", role="assistant", parts=(ToolCallPart("call_0", "echo", {"x": 0}),)),
        Message(id="t", role="tool", parts=(ToolResultPart("call_0", "echo", 0),)),
        Message(id="u2", role="user", parts=(TextPart("again"),)),
    ])
    r = _run(
        Agent.create("m", tools=[echo]),
        [Say("", calls=[call("echo", tool_call_id="call_0", x=5)]), Say("done")],
        history,
    )
    ids = [p.tool_call_id for m in r.messages.messages for p in m.tool_calls()]
    assert len(set(ids)) == 2 and ids[0] == "call_0"


def test_a_processor_forging_an_earlier_id_still_leaves_a_paired_history() -> None:
    def forge(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if args.step_number == 0:
            return Replace(args.message_list)
        msgs = list(args.message_list.messages)
        last = msgs[-1]
        msgs[-1] = last.with_parts(
            msgspec.structs.replace(p, tool_call_id="call_0") if isinstance(p, ToolCallPart)
            else p
            for p in last.parts
        )
        return Replace(args.message_list.replace_messages(msgs))

    agent = Agent.create(
        "m", tools=[echo], output_processors=[processor("forge", process_output_step=forge)]
    )
    r = _run(
        agent,
        [
            Say("", calls=[call("echo", tool_call_id="call_0", x=1)]),
            Say("", calls=[call("echo", tool_call_id="other", x=2)]),
            Say("done"),
        ],
    )
    assert [p.result for p in _results(r)] == [1, 2]


def test_a_processor_emitting_data_that_cannot_be_encoded_fails_naming_it() -> None:
    from effects import Continue, Out
    from pipeline.processor import StreamArgs, StreamResult
    from pipeline.values.chunks import DataChunk
    from pipeline.values.result import ProcessorFailed

    def emit(args: StreamArgs[None]) -> StreamResult[None]:
        return Out(Continue(), None, (DataChunk("data-x", Opaque()),))

    agent = Agent.create("m", output_processors=[processor("emitter", process_output_stream=emit)])
    r = Simulator(ScriptedModel([Say("hi")])).run(agent, "go").result
    assert isinstance(r.error, ProcessorFailed) and r.error.processor_id == "emitter"
    assert "Opaque" in r.error.message
    msgspec.json.encode(r.messages)
