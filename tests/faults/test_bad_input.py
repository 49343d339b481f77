"""Fault matrix, loop side: bad caller input, checked at the door by every interpreter.

Each cell runs the same bad input on the sync simulator and on the async simulator
(asyncio and trio) and asserts the typed error (`InvalidInput`, status "failed", naming
the message and the field), that no model was called, and that the stream ended with an
error chunk. OpenAI-style dicts are refused with a pointer to `from_openai`,
which converts them; a hook that puts such messages in place fails as `ProcessorFailed`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import msgspec
import pytest

from effects import Replace
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.loop import agent_loop
from pipeline.processor import InputArgs, InputResult, OutputStepArgs, OutputStepResult, processor
from pipeline.values.chunks import ErrorChunk
from pipeline.values.context import RunContext
from pipeline.values.messages import (
    FilePart,
    Message,
    MessageList,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.model import ModelRequest
from pipeline.values.openai_input import from_openai
from pipeline.values.pairing import is_paired
from pipeline.values.result import InvalidInput, ProcessorFailed, RunResult
from pipeline.values.validate import InvalidInputError


class Opaque:
    pass


class _Str(str):
    """A str subclass with its own equality: never mistaken for a known source."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = str.__hash__


def _unchecked(value: object) -> Any:
    """A deliberately ill-typed value: what an untyped caller can pass."""
    return value


def _user(**changes: object) -> Message:
    m = Message(id="u1", role="user", parts=(TextPart("hi"),))
    return msgspec.structs.replace(m, **changes)


BAD: dict[str, tuple[Callable[[], object], int | None, str]] = {
    # name: (input, message index, field)
    "unknown role": (lambda: [_user(role="robot")], 0, "role"),
    "parts as a string": (lambda: [_user(parts="hello")], 0, "parts"),
    "non-string text": (lambda: [_user(parts=(TextPart(_unchecked(5)),))], 0, "parts[0].text"),
    "a str where a part goes": (lambda: [_user(parts=("hi",))], 0, "parts[0]"),
    "id not a string": (lambda: [_user(id=7)], 0, "id"),
    "second message bad": (lambda: [_user(), _user(id="u2", role="bot")], 1, "role"),
    "not a message": (lambda: [_user(), "oops"], 1, "message"),
    "openai dicts": (lambda: [{"role": "user", "content": "hi"}], 0, "message"),
    "one openai dict": (lambda: {"role": "user", "content": "hi"}, None, "messages"),
    "a number": (lambda: 42, None, "messages"),
    "None": (lambda: None, None, "messages"),
    "bytes": (lambda: b"hi", None, "messages"),
    "tool args not an object": (
        lambda: [Message(id="a", role="assistant",
                         parts=(ToolCallPart("c", "t", _unchecked("x")),))],
        0, "parts[0].args",
    ),
    "unencodable tool result": (
        lambda: [Message(id="t", role="tool", parts=(ToolResultPart("c", "t", Opaque()),))],
        0, "parts",
    ),
    "bad system message": (
        lambda: MessageList.of([_user()], system=[SystemMessage(_unchecked(5))]),
        None, "system[0].content",
    ),
    "created_at a string": (lambda: [_user(created_at="now")], 0, "created_at"),
    # After a long run of good messages (the fast pass over the input stops there).
    "bad role after 40 good": (
        lambda: [_user(id=f"u{i}") for i in range(40)] + [_user(id="x", role="bot")],
        40, "role",
    ),
    "thread_id a number after good ones": (
        lambda: [_user(), _user(id="u2"), _user(id="u3", thread_id=_unchecked(3))],
        2, "thread_id",
    ),
    "incomplete not a bool": (lambda: [_user(), _user(id="u2", incomplete=1)], 1, "incomplete"),
    "unknown source": (
        lambda: MessageList((_user(), _user(id="u2")), ("input", _unchecked("elsewhere"))),
        1, "source",
    ),
    # Sources are checked in one pass for a short input and with sets for a long one.
    "unhashable source, short input": (
        lambda: MessageList((_user(), _user(id="u2")), ("input", _unchecked(["input"]))),
        1, "source",
    ),
    "str subclass source, short input": (
        lambda: MessageList((_user(), _user(id="u2")), ("input", _unchecked(_Str("input")))),
        1, "source",
    ),
    "unhashable source after 40 good": (
        lambda: MessageList(
            tuple(_user(id=f"u{i}") for i in range(41)),
            (*("input",) * 40, _unchecked({"input": 1})),
        ),
        40, "source",
    ),
    "int source after 40 good": (
        lambda: MessageList(
            tuple(_user(id=f"u{i}") for i in range(41)), (*("input",) * 40, _unchecked(1))
        ),
        40, "source",
    ),
    "metadata a list": (lambda: [_user(metadata=_unchecked([1]))], 0, "metadata"),
    "created_at a bool": (lambda: [_user(), _user(id="u2", created_at=True)], 1, "created_at"),
}


def test_the_fast_pass_unpacks_message_fields_in_their_order() -> None:
    from pipeline.values.validate import MESSAGE_FIELDS

    assert Message.__struct_fields__ == MESSAGE_FIELDS


def _assert_refused(result: RunResult, chunks: Sequence[object], index: int | None, field: str,
                    model: ScriptedModel) -> InvalidInput:
    assert result.status == "failed"
    err = result.error
    assert isinstance(err, InvalidInput), err
    assert (err.message_index, err.field) == (index, field)
    assert field in str(err) and "invalid input" in str(err)
    if index is not None:
        assert f"message {index}" in str(err)
    assert model.requests == []  # before any model call
    assert isinstance(chunks[-1], ErrorChunk) and chunks[-1].kind == "InvalidInput"
    assert is_paired(result.messages.messages)
    msgspec.json.encode(result)  # the result itself encodes
    return err


@pytest.mark.parametrize("n", [2, 41])
def test_a_known_source_as_a_str_subclass_is_accepted_short_or_long(n: int) -> None:
    """What the full check accepts (a str equal to a known source) runs, whichever pass
    looked at the sources (one loop for a short input, C passes for a long one)."""

    class Src(str):
        pass

    ml = MessageList(
        tuple(_user(id=f"u{i}") for i in range(n)),
        _unchecked((*("input",) * (n - 1), Src("input"))),
    )
    model = ScriptedModel([Say("ok")])
    ran = Simulator(model).run(Agent.create("m"), ml)
    assert ran.result.status == "finished" and len(model.requests) == 1


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_input_is_refused_before_any_call_sync(case: str) -> None:
    make, index, field = BAD[case]
    model = ScriptedModel([Say("never")])
    ran = Simulator(model).run(Agent.create("m"), _unchecked(make()))
    err = _assert_refused(ran.result, ran.chunks, index, field, model)
    if "openai" in case:
        assert "from_openai" in err.problem


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_input_is_refused_before_any_call_async(case: str, backend: str) -> None:
    make, index, field = BAD[case]
    model = ScriptedModel([Say("never")])

    async def go() -> None:
        ran = await AsyncSimulator(model).run(Agent.create("m"), _unchecked(make()))
        _assert_refused(ran.result, ran.chunks, index, field, model)

    anyio.run(go, backend=backend)


def test_the_stream_api_refuses_bad_input_the_same_way() -> None:
    model = ScriptedModel([Say("never")])
    with Simulator(model).stream(Agent.create("m"), [_user(role="robot")]) as stream:
        chunks = list(stream)
    _assert_refused(stream.result, list(chunks), 0, "role", model)


def test_agent_loop_checks_its_message_list_too() -> None:
    ml = MessageList.of([_user(parts="oops")])
    loop = agent_loop(Agent.create("m"), ml, context=RunContext(run_id="r"))
    cmd = next(loop)
    while not hasattr(cmd, "result"):
        cmd = loop.send(None)
    result = cmd.result
    assert isinstance(result, RunResult) and isinstance(result.error, InvalidInput)


# --- hooks that put bad messages in place ------------------------------------------------


def test_a_process_input_replace_with_bad_messages_fails_naming_the_processor() -> None:
    def bad(args: InputArgs[None]) -> InputResult[None]:
        return Replace(args.message_list.add(_user(id="x", role="robot")))

    model = ScriptedModel([Say("never")])
    agent = Agent.create("m", input_processors=[processor("rewriter", process_input=bad)])
    r = Simulator(model).run(agent, "hi").result
    assert r.status == "failed"
    assert isinstance(r.error, ProcessorFailed)
    assert r.error.processor_id == "rewriter" and r.error.hook == "process_input"
    assert "role" in r.error.message and model.requests == []


def test_an_output_step_replace_with_openai_dicts_fails_closed() -> None:
    def bad(args: OutputStepArgs[None]) -> OutputStepResult[None]:
        ml = args.message_list
        dicts = MessageList(
            (*ml.messages, _unchecked({"role": "assistant", "content": "x"})),
            (*ml.sources, "response"),
        )
        return Replace(dicts)

    agent = Agent.create("m", output_processors=[processor("forger", process_output_step=bad)])
    r = Simulator(ScriptedModel([Say("answer")])).run(agent, "hi").result
    assert isinstance(r.error, ProcessorFailed) and r.error.processor_id == "forger"
    assert "from_openai" in r.error.message
    assert r.text == ""  # the unapproved response is not kept


# --- the documented helper -----------------------------------------------------------------


def test_from_openai_converts_a_chat_history_that_then_runs() -> None:
    ml = from_openai([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather "},
                                     {"type": "image_url",
                                      "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "and tomorrow?"},
    ])
    assert [s.content for s in ml.system] == ["Be brief."]
    assert [m.role for m in ml.messages] == ["user", "assistant", "tool", "user"]
    assert ml.messages[1].tool_calls()[0].args == {"city": "Paris"}
    assert ml.messages[2].tool_results()[0].tool_name == "weather"
    assert is_paired(ml.messages)

    def weather(city: str) -> str:
        """Weather."""
        return "rain"

    model = ScriptedModel([Say("", calls=[call("weather", city="Paris")]), Say("Rain.")])
    r = Simulator(model).run(Agent.create("m", tools=[weather]), ml).result
    assert r.status == "finished" and r.text == "Rain."
    image = model.requests[0].messages[0].parts[1]
    assert isinstance(image, FilePart) and image.media_type == "image/png"


def test_from_openai_converts_documents_and_audio_the_codecs_send_back() -> None:
    from interpreters.providers import OpenAIChatCodec

    ml = from_openai([{"role": "user", "content": [
        {"type": "text", "text": "Summarize, then transcribe."},
        {"type": "file", "file": {"filename": "q3.pdf",
                                  "file_data": "data:application/pdf;base64,JVBERi0x"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    ]}])
    _, pdf, wav = ml.messages[0].parts
    assert pdf == FilePart("application/pdf", "JVBERi0x", filename="q3.pdf")
    assert wav == FilePart("audio/wav", "UklGRg==")
    sent = json.loads(OpenAIChatCodec().encode(
        ModelRequest(model="m", system=(), messages=ml.messages), model="m", stream=False
    ).body)
    assert sent["messages"][0]["content"][1:] == [
        {"type": "file", "file": {"filename": "q3.pdf",
                                  "file_data": "data:application/pdf;base64,JVBERi0x"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    ]


@pytest.mark.parametrize(
    ("dicts", "index", "field"),
    [
        ([{"role": "wizard", "content": "x"}], 0, "role"),
        ([{"role": "user", "content": 5}], 0, "content"),
        ([{"role": "user", "content": "a"}, "b"], 1, "message"),
        ([{"role": "tool", "content": "x"}], 0, "tool_call_id"),
        ([{"role": "assistant", "tool_calls": [{"id": "c", "function": {
            "name": "t", "arguments": "{not json"}}]}], 0, "tool_calls[0].function.arguments"),
        ([{"role": "user", "content": [{"type": "audio"}]}], 0, "content[0]"),
        ([{"role": "user", "content": [{"type": "file", "file": {"file_id": "file-1"}}]}],
         0, "content[0].file.file_data"),
        ([{"role": "user", "content": [{"type": "file", "file": "x.pdf"}]}],
         0, "content[0].file"),
        ([{"role": "user", "content": [{"type": "file", "file": {
            "file_data": "data:application/pdf;base64,JVBE", "filename": 3}}]}],
         0, "content[0].file.filename"),
        ([{"role": "user", "content": [{"type": "input_audio",
                                        "input_audio": {"data": "AAAA", "format": "ogg"}}]}],
         0, "content[0].input_audio.format"),
        ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}],
         0, "content[0].input_audio"),
    ],
)
def test_from_openai_refuses_what_it_cannot_read_naming_message_and_field(
    dicts: list[object], index: int, field: str
) -> None:
    with pytest.raises(InvalidInputError) as e:
        from_openai(_unchecked(dicts))
    assert (e.value.error.message_index, e.value.error.field) == (index, field)
