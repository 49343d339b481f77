"""The web stream adapter's pure core: a run's chunks as AI SDK UI message stream
frames (server-sent events, protocol v1 as `useChat` reads it) and as NDJSON lines."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio

from effects import Continue
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.processor import OutputStepArgs, OutputStepResult, Processor, abort
from pipeline.processors import PIIDetector
from pipeline.ui_stream import (
    NDJSON_HEADERS,
    SSE_DONE,
    UI_MESSAGE_STREAM_HEADERS,
    UIData,
    UIStreamState,
    ndjson,
    ndjson_async,
    sse_frame,
    ui_end,
    ui_message_sse,
    ui_message_sse_async,
    ui_parts,
    ui_start,
)
from pipeline.values.chunks import (
    Chunk,
    DataChunk,
    ErrorChunk,
    Finish,
    ReasoningStart,
    ServerToolCall,
    ServerToolResult,
    SourceChunk,
    StepFinish,
    StepStart,
    TextDelta,
    TextStart,
    ToolCall,
    ToolCallDelta,
    ToolError,
    ToolResult,
    Tripwire,
    Usage,
    chunk_decoder,
)

JsonDict = dict[str, object]


def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


class Guard(Processor):
    id = "guard"

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if len(args.text) < 10 and not args.tool_calls:
            abort("Too short, please elaborate.", retry=True)
        return Continue()


def events(frames: list[bytes]) -> list[JsonDict]:
    """Parse SSE frames as a client does: every `data:` line, up to `[DONE]`."""
    body = b"".join(frames).decode()
    assert body.endswith("data: [DONE]\n\n")
    out: list[JsonDict] = []
    for event in body.split("\n\n")[:-2]:  # the last two: "data: [DONE]" and ""
        assert event.startswith("data: "), event
        out.append(json.loads(event.removeprefix("data: ")))
    return out


def types(evs: list[JsonDict]) -> list[object]:
    return [e["type"] for e in evs]


def test_a_run_with_reasoning_a_tool_and_a_retry_in_protocol_order() -> None:
    model = ScriptedModel([
        Say("Let me check.", reasoning="think", calls=[call("weather", city="Paris")]),
        Say("Sunny."),  # too short: discarded, the step runs again
        Say(["It is sunny ", "in Paris."]),
    ])
    agent = Agent.create("m", tools=[weather], output_processors=[Guard()])
    with Simulator(model).stream(agent, "Weather?") as stream:
        evs = events(list(ui_message_sse(stream, message_id="msg-1")))
    assert types(evs) == [
        "start",
        "start-step",
        "reasoning-start", "reasoning-delta", "reasoning-end",
        "text-start", "text-delta", "text-end",
        "tool-input-start", "tool-input-delta", "tool-input-available",
        "tool-output-available",
        "finish-step",
        "start-step",
        "text-start", "text-delta", "text-end",
        "data-step-discarded",
        "finish-step",
        "start-step",
        "text-start", "text-delta", "text-delta", "text-end",
        "finish-step",
        "finish",
    ]
    assert evs[0] == {"type": "start", "messageId": "msg-1"}
    assert evs[3] == {"type": "reasoning-delta", "id": "reasoning-0", "delta": "think"}
    assert evs[6] == {"type": "text-delta", "id": "text-0", "delta": "Let me check."}
    assert evs[8] == {"type": "tool-input-start", "toolCallId": "call_0_0", "toolName": "weather"}
    assert evs[9] == {
        "type": "tool-input-delta", "toolCallId": "call_0_0", "inputTextDelta": '{"city": "Paris"}',
    }
    assert evs[10] == {
        "type": "tool-input-available", "toolCallId": "call_0_0", "toolName": "weather",
        "input": {"city": "Paris"},
    }
    assert evs[11] == {
        "type": "tool-output-available", "toolCallId": "call_0_0", "output": "sunny in Paris",
    }
    # The discarded answer is marked as such, in the message (not transient), naming the
    # parts it discards, and its step is closed: the next answer is a new text part.
    discarded = evs[17]
    assert discarded == {
        "type": "data-step-discarded",
        "data": {
            "step_number": 1, "processor_id": "guard", "reason": "Too short, please elaborate.",
            "retry_count": 1, "part_ids": ["text-1"],
        },
    }
    assert evs[-1] == {"type": "finish"}


def test_events_carry_only_fields_the_protocol_knows() -> None:
    """AI SDK validates chunks with strict schemas: an unknown key fails the stream."""
    allowed: dict[str, set[str]] = {
        "start": {"messageId", "messageMetadata"},
        "start-step": set(), "finish-step": set(),
        "finish": {"messageMetadata"},
        "text-start": {"id"}, "text-delta": {"id", "delta"}, "text-end": {"id"},
        "reasoning-start": {"id"}, "reasoning-delta": {"id", "delta"}, "reasoning-end": {"id"},
        "tool-input-start": {"toolCallId", "toolName"},
        "tool-input-delta": {"toolCallId", "inputTextDelta"},
        "tool-input-available": {"toolCallId", "toolName", "input", "providerExecuted"},
        "tool-output-available": {"toolCallId", "output", "providerExecuted"},
        "tool-output-error": {"toolCallId", "errorText", "providerExecuted"},
        "source-url": {"sourceId", "url", "title"},
        "error": {"errorText"},
    }
    chunks: list[Chunk] = [
        StepStart(0), TextStart("t"), TextDelta("t", "x"),
        SourceChunk("s1", "https://example.org", "Example"),
        ToolCall("c1", "weather", {"city": "P"}), ToolError("c1", "weather", "boom"),
        ServerToolCall("s1", "web_search", {"query": "q"}),
        ServerToolResult("s1", "web_search", [{"url": "https://example.org"}]),
        DataChunk("data-progress", {"pct": 50}, transient=True),
        StepFinish(0, "stop", Usage()), ErrorChunk("StreamFailed", "the stream broke"),
    ]
    evs = events(list(ui_message_sse(chunks)))
    for e in evs:
        t = str(e["type"])
        keys = set(e) - {"type"}
        if t.startswith("data-"):
            assert keys <= {"id", "data", "transient"}
        else:
            assert keys <= allowed[t], e
    by_type = {str(e["type"]): e for e in evs}
    assert by_type["start"] == {"type": "start"}  # no id given: the client makes one
    assert by_type["source-url"] == {
        "type": "source-url", "sourceId": "s1", "url": "https://example.org", "title": "Example",
    }
    assert by_type["tool-output-error"] == {
        "type": "tool-output-error", "toolCallId": "c1", "errorText": "boom",
    }
    assert by_type["data-progress"] == {
        "type": "data-progress", "data": {"pct": 50}, "transient": True,
    }
    assert by_type["error"] == {"type": "error", "errorText": "StreamFailed: the stream broke"}
    assert types(evs)[-1] == "finish"  # the stream is always closed for the client


def test_a_tripwire_is_a_data_part_an_error_then_finish() -> None:
    state, _ = ui_start(None)
    state, parts = ui_parts(state, Tripwire("blocked: PII", False, "pii", {"kind": "email"}))
    frames = [sse_frame(p) for p in (*parts, *ui_end(state))]
    evs = events([*frames, SSE_DONE])
    assert evs == [
        {"type": "data-tripwire", "data": {
            "reason": "blocked: PII", "retry": False, "processor_id": "pii",
        }},  # the metadata stays server-side
        {"type": "error", "errorText": "blocked by pii: blocked: PII"},
        {"type": "finish"},
    ]


def _open_parts(evs: list[JsonDict]) -> list[str]:
    """Text and reasoning parts started and never ended, and tool inputs started and
    never completed (available) or answered (an output error)."""
    open_: dict[str, str] = {}
    for e in evs:
        t = str(e["type"])
        if t in ("text-start", "reasoning-start"):
            open_[f"{t[:-6]}:{e['id']}"] = t
        elif t in ("text-end", "reasoning-end"):
            open_.pop(f"{t[:-4]}:{e['id']}", None)
        elif t == "tool-input-start":
            open_[f"tool:{e['toolCallId']}"] = t
        elif t in ("tool-input-available", "tool-output-error"):
            open_.pop(f"tool:{e['toolCallId']}", None)
    return sorted(open_)


def test_a_run_tripped_on_the_stream_closes_its_open_parts_and_sends_the_reason() -> None:
    pii = PIIDetector(types=("email",), strategy="block")
    run = Simulator(ScriptedModel([Say(["Hello there, I am writing to you about it: ",
                                        "mail ada@example.com now"])])).run(
        Agent.create("m", output_processors=[pii]), "hi")
    assert run.result.status == "tripped"
    evs = events(list(ui_message_sse(run.trace.chunks)))
    assert "text-start" in types(evs)
    assert _open_parts(evs) == []
    assert types(evs)[-5:] == ["text-end", "data-tripwire", "error", "finish-step", "finish"]
    assert "PII detected: email" in str(evs[-3]["errorText"])


def test_a_failed_or_cut_stream_closes_open_text_reasoning_and_tool_inputs() -> None:
    state, _ = ui_start(None)
    out: list[object] = []
    for c in (StepStart(0), ReasoningStart("r"), TextStart("t"), TextDelta("t", "half"),
              ToolCallDelta("c1", "echo", '{"x"'), ErrorChunk("StreamFailed", "it broke")):
        state, parts = ui_parts(state, c)
        out.extend(parts)
    out.extend(ui_end(state))
    evs = events([*(sse_frame(p) for p in out), SSE_DONE])  # type: ignore[arg-type]
    assert _open_parts(evs) == []
    assert types(evs)[-3:] == ["error", "finish-step", "finish"]
    closing = types(evs)[types(evs).index("tool-input-delta") + 1:-3]
    assert sorted(map(str, closing)) == ["reasoning-end", "text-end", "tool-output-error"]
    # a stream that just ran out is closed too
    state, _ = ui_start(None)
    for c in (StepStart(0), TextStart("t"), TextDelta("t", "x")):
        state, _ = ui_parts(state, c)
    assert types(events([*(sse_frame(p) for p in ui_end(state)), SSE_DONE])) == [
        "text-end", "finish-step", "finish"]


def test_a_cancelled_run_ends_with_an_error_then_finish() -> None:
    model = ScriptedModel([Say(["one ", "two ", "three"], latency=5.0)])

    async def go() -> list[bytes]:
        sim = AsyncSimulator(model)
        async with sim.stream(Agent.create("m"), "hi", timeout=0.0) as stream:
            return [f async for f in ui_message_sse_async(stream)]

    evs = events(anyio.run(go))
    assert types(evs)[-2:] == ["error", "finish"]
    assert "cancelled" in str(evs[-2]["errorText"])


def test_a_tool_delta_for_a_new_call_opens_its_input_once() -> None:
    state = UIStreamState()
    out: list[object] = []
    chunks: list[Chunk] = [
        ToolCallDelta("a", "f", '{"x"'), ToolCallDelta("a", "f", ": 1}"),
        ToolCallDelta("b", "g", "{}"), ToolResult("a", "f", {"ok": True}),
    ]
    for c in chunks:
        state, parts = ui_parts(state, c)
        out.extend(parts)
    names = [type(p).__name__ for p in out]
    assert names == [
        "UIToolInputStart", "UIToolInputDelta", "UIToolInputDelta",
        "UIToolInputStart", "UIToolInputDelta", "UIToolOutputAvailable",
    ]


def test_a_discarded_tool_call_is_named_once() -> None:
    state, _ = ui_parts(UIStreamState(), StepStart(0))
    chunks: list[Chunk] = [ToolCallDelta("a", "f", "{}"), ToolCall("a", "f", {}),
                           ToolCall("b", "g", {})]
    for c in chunks:
        state, _ = ui_parts(state, c)
    _, parts = ui_parts(state, DataChunk("data-step-discarded", {"step_number": 0}, True))
    assert [type(p).__name__ for p in parts] == ["UIData", "UIFinishStep"]
    assert parts[0] == UIData("data-step-discarded", {"step_number": 0, "part_ids": ["a", "b"]})


def test_a_result_that_is_not_json_is_sent_as_its_text() -> None:
    class Point:
        def __str__(self) -> str:
            return "Point(1, 2)"

    evs = events(list(ui_message_sse([ToolResult("a", "f", Point())])))
    assert evs[1] == {"type": "tool-output-available", "toolCallId": "a", "output": "Point(1, 2)"}


def test_ndjson_lines_decode_back_to_the_chunks() -> None:
    chunks: list[Chunk] = [StepStart(0), TextStart("t"), TextDelta("t", "hi\nthere"),
                           Finish("stop", Usage(1, 2))]
    lines = b"".join(ndjson(chunks)).decode().splitlines()
    assert [chunk_decoder.decode(line) for line in lines] == chunks

    async def go() -> list[bytes]:
        async def gen() -> AsyncIterator[Chunk]:
            for c in chunks:
                yield c

        return [x async for x in ndjson_async(gen())]

    assert b"".join(anyio.run(go)) == b"".join(ndjson(chunks))


def test_headers_name_the_protocol() -> None:
    assert (b"x-vercel-ai-ui-message-stream", b"v1") in UI_MESSAGE_STREAM_HEADERS
    assert (b"content-type", b"text/event-stream") in UI_MESSAGE_STREAM_HEADERS
    assert NDJSON_HEADERS == ((b"content-type", b"application/x-ndjson"),)


def test_nothing_after_finish_but_done() -> None:
    state, _ = ui_start(None)
    state, parts = ui_parts(state, Finish("stop", Usage()))
    assert [type(p).__name__ for p in parts] == ["UIFinish"]
    assert ui_end(state) == ()
