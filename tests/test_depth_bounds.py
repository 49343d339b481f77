"""JSON values nest at most `MAX_JSON_DEPTH` levels wherever they come in (OpenAI-style
input, a run's messages, a tool's arguments, a provider's tool call): deeper is a typed
error naming where, never a `RecursionError`, checked at 10,000 levels."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from interpreters.providers.codec import parse_tool_args
from interpreters.sync import SyncInterpreter
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.tools import make_tool
from pipeline.values.bounds import (
    MAX_JSON_DEPTH,
    MAX_TOOL_ARGS_BYTES,
    json_too_deep,
    value_too_deep,
)
from pipeline.values.messages import Message, MessageList, TextPart, ToolCallPart, ToolResultPart
from pipeline.values.openai_input import from_openai
from pipeline.values.result import InvalidInput
from pipeline.values.validate import InvalidInputError, check_messages

DEEP = 10_000


def nested_text(depth: int) -> str:
    """An object whose one value is lists nested so that the whole is `depth` deep."""
    return '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def nested(depth: int) -> dict[str, object]:
    """The same as a Python value, built without recursion."""
    v: list[object] = []
    for _ in range(depth - 2):
        v = [v]
    return {"a": v}


def _openai(arguments: str) -> list[dict[str, object]]:
    return [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "t", "arguments": arguments}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]


def test_the_depth_checks_agree_and_do_not_recurse() -> None:
    for depth in (1, 2, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, DEEP):
        too_deep = depth > MAX_JSON_DEPTH
        assert json_too_deep(nested_text(depth)) is too_deep, depth
        assert value_too_deep(nested(depth)) is too_deep, depth
    assert not json_too_deep('["' + "[" * DEEP + '"]')  # brackets in a string
    assert not json_too_deep("[" + ",".join(["[]"] * DEEP) + "]")  # wide, not deep
    assert json_too_deep("[" * DEEP)  # unclosed: a decoder would descend into all
    inside = "[" * DEEP
    assert not json_too_deep('["a\\"' + inside + '", "b\\\\"]')  # escaped quotes
    assert json_too_deep('["a\\\\", ' + nested_text(DEEP) + "]")  # an escaped backslash
    for text in ('["a\\"' + inside + '"]', '["a\\\\", ' + nested_text(DEEP) + "]"):
        try:  # what the decoder makes of the same text agrees
            msgspec.json.decode(text)
            deep = False
        except RecursionError:
            deep = True
        assert deep is json_too_deep(text)


def test_from_openai_refuses_arguments_nested_too_deep_with_a_typed_error() -> None:
    with pytest.raises(InvalidInputError) as e:
        from_openai(_openai(nested_text(DEEP)))
    err = e.value.error
    assert isinstance(err, InvalidInput)
    assert err.message_index == 1 and err.field == "tool_calls[0].function.arguments"
    assert f"deeper than {MAX_JSON_DEPTH}" in err.problem
    ml = from_openai(_openai(nested_text(MAX_JSON_DEPTH)))
    assert ml.messages[1].tool_calls()[0].args == nested(MAX_JSON_DEPTH)


def test_from_openai_refuses_arguments_over_the_size_cap() -> None:
    huge = '{"a":"' + "x" * MAX_TOOL_ARGS_BYTES + '"}'
    with pytest.raises(InvalidInputError) as e:
        from_openai(_openai(huge))
    assert e.value.error.field == "tool_calls[0].function.arguments"
    assert f"cap of {MAX_TOOL_ARGS_BYTES}" in e.value.error.problem


def _deep_history(depth: int) -> MessageList:
    return MessageList.of([
        Message(id="u", role="user", parts=(TextPart("hi"),)),
        Message(id="a", role="assistant", parts=(ToolCallPart("c1", "t", nested(depth)),)),
        Message(id="r", role="tool", parts=(ToolResultPart("c1", "t", "ok"),)),
    ])


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 900, DEEP])
def test_a_run_refuses_input_nested_too_deep_on_every_interpreter(depth: int) -> None:
    found = check_messages(_deep_history(depth))
    assert isinstance(found, InvalidInput) and found.message_index == 1
    assert f"deeper than {MAX_JSON_DEPTH}" in found.problem
    agent = Agent.create("m")
    for r in (
        Simulator(ScriptedModel([Say("ok")])).run(agent, _deep_history(depth)).result,
        SyncInterpreter(ScriptedModel([Say("ok")])).run(agent, _deep_history(depth)),
    ):
        assert r.status == "failed" and isinstance(r.error, InvalidInput)
        assert r.error.message_index == 1
    assert check_messages(_deep_history(MAX_JSON_DEPTH)) is None


@pytest.mark.anyio
async def test_the_async_interpreter_refuses_input_nested_too_deep() -> None:
    run = await AsyncSimulator(ScriptedModel([Say("ok")])).run(
        Agent.create("m"), _deep_history(DEEP)
    )
    assert run.result.status == "failed" and isinstance(run.result.error, InvalidInput)


def test_tool_arguments_nested_too_deep_are_an_error_result_not_a_crash() -> None:
    def t(x: Any) -> str:
        """Takes anything."""
        return "ran"

    tool = make_tool(t)
    for depth in (900, DEEP):
        with pytest.raises(msgspec.ValidationError, match=f"deeper than {MAX_JSON_DEPTH}"):
            tool.bind({"x": nested(depth)})
    model = ScriptedModel([Say("", calls=[call("t", x=nested(MAX_JSON_DEPTH + 5))]), Say("ok")])
    r = Simulator(model).run(Agent.create("m", tools=[tool]), "go").result
    [res] = r.steps[0].tool_results
    assert res.is_error and "invalid arguments" in str(res.result)


def test_a_providers_tool_call_nested_too_deep_is_invalid_arguments() -> None:
    assert parse_tool_args(nested_text(DEEP)) is None
    assert parse_tool_args(nested_text(MAX_JSON_DEPTH)) == nested(MAX_JSON_DEPTH)


def test_a_structured_reply_nested_too_deep_is_an_output_decode_error() -> None:
    from pipeline.values.output_type import OutputDecodeError, TypedOutput

    class Reply(msgspec.Struct):
        data: Any

    typed = TypedOutput.of(Reply)
    with pytest.raises(OutputDecodeError, match=f"deeper than {MAX_JSON_DEPTH}"):
        typed.decode('{"data":' + nested_text(DEEP) + "}")
    assert typed.decode('{"data": [1]}') == Reply([1])


def test_a_judges_answer_nested_too_deep_is_a_judge_error() -> None:
    from pipeline.processor import ModelAnswer
    from pipeline.processors.guards.common import JudgeError, decode_verdict

    class Verdict(msgspec.Struct):
        flagged: bool
        detail: Any = None

    text = '{"flagged": false, "detail": ' + nested_text(DEEP) + "}"
    with pytest.raises(JudgeError, match=f"deeper than {MAX_JSON_DEPTH}"):
        decode_verdict(ModelAnswer(text), Verdict)
    assert decode_verdict(ModelAnswer('{"flagged": true}'), Verdict) == Verdict(True)


def test_from_openai_refuses_input_over_the_total_size_cap() -> None:
    from pipeline.values.bounds import MAX_CONVERT_CHARS

    half = "x" * (MAX_CONVERT_CHARS // 2)
    messages = [{"role": "user", "content": half}, {"role": "assistant", "content": half},
                {"role": "user", "content": "one more"}]
    with pytest.raises(InvalidInputError) as e:
        from_openai(messages)
    assert e.value.error.message_index == 2 and e.value.error.field == "content"
    assert f"cap of {MAX_CONVERT_CHARS}" in e.value.error.problem
    assert len(from_openai(messages[:2]).messages) == 2
