"""The command protocol: a reply of the wrong type is an interpreter bug, caught at once.

Each command declares its reply type; the loop checks every reply and raises
`ProtocolError` naming the command and what came back, instead of carrying a wrong value
on (unchecked, an interpreter answering CallModel with 42 would get 42 published as a
chunk).
"""

from __future__ import annotations

import pytest

from effects import Abort, CallModel, CloseStream, Continue, Done, Publish, Pull, RunTools
from interpreters.aio import AsyncInterpreter
from interpreters.testing import Say, Simulator
from pipeline.agent import Agent
from pipeline.loop import agent_loop
from pipeline.processor import Processor, StreamArgs, StreamResult
from pipeline.protocol import AgentLoop, ProtocolError
from pipeline.tools import tool
from pipeline.values.chunks import ModelFinish, TextDelta, Usage
from pipeline.values.context import RunContext
from pipeline.values.messages import Message, MessageList, TextPart
from tests.helpers import AsyncTrackedModel, TrackedModel


@tool
def echo(x: str) -> str:
    """Echo."""
    return x


def _loop(agent: Agent) -> AgentLoop:
    ml = MessageList(
        (Message(id="u", role="user", parts=(TextPart("hi"),), created_at=0.0),), ("input",)
    )
    return agent_loop(agent, ml, context=RunContext(run_id="r"))


def _to_call_model(loop: AgentLoop) -> object:
    cmd = next(loop)
    while not isinstance(cmd, CallModel):
        cmd = loop.send(None)
    return cmd


def test_call_model_answered_with_42_is_a_protocol_error() -> None:
    loop = _loop(Agent.create("sim/model"))
    _to_call_model(loop)
    with pytest.raises(ProtocolError, match=r"CallModel.*42"):
        loop.send(42)


def test_pull_answered_with_a_non_event_is_a_protocol_error() -> None:
    loop = _loop(Agent.create("sim/model"))
    _to_call_model(loop)
    cmd = loop.send(TextDelta("t1", "hello"))
    assert isinstance(cmd, Pull)
    with pytest.raises(ProtocolError, match=r"Pull.*'oops'"):
        loop.send("oops")


def test_publish_answered_with_a_value_is_a_protocol_error() -> None:
    loop = _loop(Agent.create("sim/model"))
    cmd = next(loop)
    assert isinstance(cmd, Publish)
    with pytest.raises(ProtocolError, match=r"Publish.*7"):
        loop.send(7)


def test_run_tools_answered_with_the_wrong_count_is_a_protocol_error() -> None:
    loop = _loop(Agent.create("sim/model", tools=[echo]))
    _to_call_model(loop)
    from pipeline.values.chunks import ToolCall

    cmd = loop.send(ToolCall("c1", "echo", {"x": "a"}))
    while not isinstance(cmd, RunTools):
        cmd = loop.send(ModelFinish("tool-calls", Usage()) if isinstance(cmd, Pull) else None)
    with pytest.raises(ProtocolError, match=r"RunTools.*\(\)"):
        loop.send(())


# --- model streams: opened by CallModel, read by Pull, closed early by CloseStream -------


class _AbortOn(Processor):
    """Aborts the run at the first text delta holding `word`."""

    def __init__(self, word: str) -> None:
        self.id = "abort-on"
        self.word = word

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta) and self.word in args.part.text:
            return Abort("no")
        return Continue()


def test_a_stream_processor_abort_mid_stream_closes_the_stream_explicitly() -> None:
    loop = _loop(Agent.create("sim/model", output_processors=[_AbortOn("bad")]))
    _to_call_model(loop)
    cmd = loop.send(TextDelta("t1", "fine "))
    assert isinstance(cmd, Pull)
    kinds = []
    cmd = loop.send(TextDelta("t1", "bad"))
    while not isinstance(cmd, Done):
        kinds.append(type(cmd).__name__)
        cmd = loop.send(None)
    assert kinds == ["CloseStream", "Publish"]
    assert cmd.result.status == "tripped"


def test_a_stream_that_ended_is_not_closed_again() -> None:
    loop = _loop(Agent.create("sim/model"))
    _to_call_model(loop)
    cmd = loop.send(ModelFinish("stop", Usage()))
    kinds = []
    while not isinstance(cmd, Done):
        kinds.append(type(cmd).__name__)
        cmd = loop.send(None)
    assert "CloseStream" not in kinds


def test_the_interpreters_close_the_stream_when_the_loop_says_so() -> None:
    model = TrackedModel([Say(["fine ", "bad", " never"])])
    ran = Simulator(model).run(
        Agent.create("sim/model", output_processors=[_AbortOn("bad")]), "hi"
    )
    assert ran.result.status == "tripped"
    assert (model.opened, model.closed_early) == (1, 1)
    assert any(isinstance(c, CloseStream) for c in ran.trace.commands)


@pytest.mark.anyio
async def test_the_async_interpreter_closes_the_stream_when_the_loop_says_so() -> None:
    model = AsyncTrackedModel([Say(["fine ", "bad", " never"])])
    result = await AsyncInterpreter(model).run(
        Agent.create("m", output_processors=[_AbortOn("bad")]), "hi"
    )
    assert result.status == "tripped"
    assert (model.opened, model.closed_early) == (1, 1)
