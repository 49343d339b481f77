"""Tools a provider runs on its side (a code interpreter, a web search): kept in the
answer's message and in the stream, shown to a web client as provider-executed, never run
by the agent, never paired with a tool message, never sent back to a model; recorded in
journals and encoded by the codecs like every other part."""

from __future__ import annotations

import json

import msgspec
import pytest

from interpreters.record.journal import Journal, Recorder
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.processors import PIIDetector
from pipeline.ui_stream import ndjson_line, ui_message_sse
from pipeline.values import (
    ServerToolCall,
    ServerToolCallPart,
    ServerToolResult,
    ServerToolResultPart,
)
from pipeline.values.chunks import (
    Chunk,
    ErrorChunk,
    StepFinish,
    StepStart,
    TextDelta,
    ToolCall,
    Usage,
    chunk_decoder,
)
from pipeline.values.messages import (
    Message,
    MessageList,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    user,
)
from pipeline.values.pairing import PairedHistory, cut_points, is_paired, repair_pairing
from tests.test_ui_stream import events

CODE = {"code": "numbers = [10, 24, 2]\nsum(numbers) / len(numbers)"}
OUTPUT = '{"stdOut":"12.0","stdErr":"","exitCode":0,"isError":false}'
CALL = ServerToolCall("tooluse_W1", "nova_code_interpreter", CODE)
RESULT = ServerToolResult("tooluse_W1", "nova_code_interpreter", OUTPUT)

ran: list[str] = []


def nova_code_interpreter(code: str) -> str:
    """A local tool that happens to have the server tool's name: it must never run."""
    ran.append(code)
    return "ran locally"


def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def test_a_server_tool_is_kept_in_the_answer_and_never_run() -> None:
    ran.clear()
    model = ScriptedModel([Say("The average is 12.", server_tools=[CALL, RESULT])])
    agent = Agent.create("m", tools=[nova_code_interpreter])
    with Simulator(model).stream(agent, "Average of 10, 24, 2?") as stream:
        chunks = list(stream)
        result = stream.result
    assert result.status == "finished", result.error
    assert ran == [] and len(model.requests) == 1, "one answer: nothing to run, no tool turn"
    assert [c for c in chunks if isinstance(c, ServerToolCall | ServerToolResult)] == [
        CALL, RESULT]
    answer = result.messages.messages[-1]
    assert answer.role == "assistant" and answer.parts == (
        ServerToolCallPart("tooluse_W1", "nova_code_interpreter", CODE),
        ServerToolResultPart("tooluse_W1", "nova_code_interpreter", OUTPUT),
        TextPart("The average is 12."),
    )
    assert result.steps[0].tool_calls == () and result.text == "The average is 12."


def test_a_server_tool_beside_a_local_call_runs_only_the_local_one() -> None:
    model = ScriptedModel([
        Say(server_tools=[CALL, RESULT], calls=[call("weather", city="Paris")]),
        Say("Done."),
    ])
    result = Simulator(model).run(Agent.create("m", tools=[weather]), "go").result
    assert result.status == "finished", result.error
    tool_message = result.messages.messages[-2]
    assert tool_message.role == "tool"
    assert [(p.tool_name, p.result) for p in tool_message.tool_results()] == [
        ("weather", "sunny in Paris")]
    # The next request carries the server's parts in the assistant message as they came.
    sent = model.requests[1].messages
    assert [type(p) for p in sent[1].parts] == [ServerToolCallPart, ServerToolResultPart,
                                                ToolCallPart]


def test_server_tool_parts_need_no_tool_message_to_be_paired() -> None:
    history = (
        user("go", id="u1"),
        Message(id="a1", role="assistant", parts=(
            ServerToolCallPart("srv_1", "web_search", {"query": "x"}),
            ServerToolResultPart("srv_1", "web_search", [{"url": "https://e.org"}]),
            ToolCallPart("call_1", "weather", {"city": "P"}),
        )),
        Message(id="t1", role="tool", parts=(ToolResultPart("call_1", "weather", "sunny"),)),
        Message(id="a2", role="assistant", parts=(
            ServerToolCallPart("srv_2", "web_search", {"query": "y"}),
            ServerToolResultPart("srv_2", "web_search", "error", is_error=True),
            TextPart("Sunny."),
        )),
    )
    assert is_paired(history)
    assert repair_pairing(history) is history
    assert cut_points(history) == (0, 1, 3, 4)
    ml = MessageList.of(history)
    assert PairedHistory().messages(ml) is ml.messages
    # A local call without its result is still repaired; the server's parts stay put.
    repaired = repair_pairing(history[:2])
    assert repaired[1] is history[1] and repaired[2].role == "tool"


def test_the_ui_stream_marks_server_tools_provider_executed() -> None:
    failed = ServerToolResult("srv_2", "web_search", "the search failed", is_error=True)
    chunks: list[Chunk] = [
        StepStart(0), CALL, RESULT, ServerToolCall("srv_2", "web_search", {"query": "x"}),
        failed, StepFinish(0, "stop", Usage()),
    ]
    evs = events(list(ui_message_sse(chunks)))
    assert evs[2:6] == [
        {"type": "tool-input-available", "toolCallId": "tooluse_W1",
         "toolName": "nova_code_interpreter", "input": CODE, "providerExecuted": True},
        {"type": "tool-output-available", "toolCallId": "tooluse_W1", "output": OUTPUT,
         "providerExecuted": True},
        {"type": "tool-input-available", "toolCallId": "srv_2", "toolName": "web_search",
         "input": {"query": "x"}, "providerExecuted": True},
        {"type": "tool-output-error", "toolCallId": "srv_2", "errorText": "the search failed",
         "providerExecuted": True},
    ]


def test_a_run_stopped_before_the_servers_result_closes_its_call() -> None:
    evs = events(list(ui_message_sse(
        [StepStart(0), CALL, ErrorChunk("StreamFailed", "the stream broke")])))
    assert [e["type"] for e in evs] == [
        "start", "start-step", "tool-input-available", "tool-output-error", "error",
        "finish-step", "finish"]
    assert evs[3] == {"type": "tool-output-error", "toolCallId": "tooluse_W1",
                      "errorText": "StreamFailed: the stream broke"}


def test_server_tool_chunks_and_parts_round_trip_the_codecs() -> None:
    for chunk in (CALL, RESULT, ServerToolResult("s", "n", {"a": [1]}, is_error=True)):
        assert chunk_decoder.decode(ndjson_line(chunk)) == chunk
    m = Message(id="a", role="assistant", parts=(
        ServerToolCallPart("s", "n", {"q": 1}), ServerToolResultPart("s", "n", [1, "x"])))
    assert msgspec.json.decode(msgspec.json.encode(m), type=Message) == m
    assert json.loads(ndjson_line(CALL))["type"] == "server-tool-call"


def test_a_durable_runs_stored_stream_and_result_keep_server_tools() -> None:
    from interpreters.durable.payload import compact_chunks, expand_chunks

    batch: tuple[Chunk, ...] = (CALL, RESULT, TextDelta("text-0", "The average is 12."))
    assert expand_chunks(compact_chunks(batch, {}), lambda n, cid: None) == batch
    model = ScriptedModel([Say("The average is 12.", server_tools=[CALL, RESULT])])
    result = Simulator(model).run(Agent.create("m"), "Average?").result
    stored = msgspec.json.decode(msgspec.json.encode(result), type=type(result))
    assert stored == result


def test_a_recorded_run_with_a_server_tool_replays_identically() -> None:
    rec = Recorder()
    model = ScriptedModel([Say("The average is 12.", server_tools=[CALL, RESULT])])
    agent = Agent.create("m")
    run = Simulator(model, observers=[rec]).run(agent, "Average?")
    journal = Journal.from_ndjson(rec.last().to_ndjson())
    replay = Simulator.replay(journal, agent)
    assert replay.result == run.result and replay.identical


@pytest.mark.parametrize("scan_tools", [False, True])
def test_the_pii_guard_redacts_what_a_server_tool_returned(scan_tools: bool) -> None:
    leak = ServerToolResult("srv_1", "web_search", {"hits": ["mail bob@example.com"]})
    model = ScriptedModel([Say("Found it.", server_tools=[
        ServerToolCall("srv_1", "web_search", {"query": "bob@example.com"}), leak])])
    guard = PIIDetector(strategy="redact", scan_tools=scan_tools)
    agent = Agent.create("m", output_processors=[guard])
    with Simulator(model).stream(agent, "find bob") as stream:
        chunks = list(stream)
        result = stream.result
    assert result.status == "finished", result.error
    [streamed] = [c for c in chunks if isinstance(c, ServerToolResult)]
    assert streamed.result == {"hits": ["mail [REDACTED:email]"]}
    answer = result.messages.messages[-1]
    assert answer.parts[1] == ServerToolResultPart(
        "srv_1", "web_search", {"hits": ["mail [REDACTED:email]"]})
    # Its input, as tool-call arguments sent out: handled too, with or without
    # `scan_tools` (what leaves the run; the provider ran the tool already).
    [called] = [c for c in chunks if isinstance(c, ServerToolCall)]
    assert called.args == {"query": "[REDACTED:email]"}
    assert "bob@example.com" not in str(answer.parts[0])
    assert not any(isinstance(c, ToolCall | TextDelta) and "bob@" in str(c) for c in chunks)
