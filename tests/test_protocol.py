"""The command protocol: a reply of the wrong type is an interpreter bug, caught at once.

Each command declares its reply type; the loop checks every reply and raises
`ProtocolError` naming the command and what came back, instead of carrying a wrong value
on (an interpreter answering CallModel with 42 used to get 42 published as a chunk).
"""

from __future__ import annotations

import pytest

from effects import CallModel, Publish, Pull, RunTools
from pipeline import agent_loop
from pipeline.agent import Agent
from pipeline.chunks import ModelFinish, TextDelta, Usage
from pipeline.messages import Message, MessageList, TextPart
from pipeline.processor import RunContext
from pipeline.protocol import AgentLoop, ProtocolError
from pipeline.tools import tool


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
    from pipeline.chunks import ToolCall

    cmd = loop.send(ToolCall("c1", "echo", {"x": "a"}))
    while not isinstance(cmd, RunTools):
        cmd = loop.send(ModelFinish("tool-calls", Usage()) if isinstance(cmd, Pull) else None)
    with pytest.raises(ProtocolError, match=r"RunTools.*\(\)"):
        loop.send(())
