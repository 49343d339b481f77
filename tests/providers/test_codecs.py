"""Encoding details of both wire formats, and decoding cases the recordings lack."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from interpreters.providers import (
    AnthropicCodec,
    AnthropicOptions,
    BedrockCodec,
    ByteStreamDecoder,
    GeminiCodec,
    OpenAIChatCodec,
    OpenAIChatOptions,
    OpenAIResponsesCodec,
)
from interpreters.providers.codec import Codec, Encoded
from interpreters.providers.provider import ProviderError
from pipeline.values.chunks import (
    ModelEvent,
    ModelFinish,
    ReasoningDelta,
    ReasoningEnd,
    ServerToolCall,
    ServerToolResult,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from pipeline.values.messages import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolResultPart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.model import (
    ModelRequest,
    ModelSettings,
    StructuredOutput,
    ToolChoiceTool,
    ToolSpec,
)
from tests.providers.helpers import oa_chunk, sse

PNG = base64.b64encode(b"\x89PNG...").decode()
WEATHER = ToolSpec("get_weather", "Weather for a city", {"type": "object", "properties": {
    "city": {"type": "string"}}})


def msg(role: str, *parts: Part, id: str = "m") -> Message:
    return Message(id=id, role=role, parts=parts)  # type: ignore[arg-type]


def req(*messages: Message, **kw: object) -> ModelRequest:
    return ModelRequest(model="x/m", system=kw.pop("system", ()),  # type: ignore[arg-type]
                        messages=messages, **kw)  # type: ignore[arg-type]


def body(codec: Codec, r: ModelRequest, stream: bool = True) -> dict[str, Any]:
    out = json.loads(codec.encode(r, model="m", stream=stream).body)
    assert isinstance(out, dict)
    return out


def decode(codec: Codec, enc: Encoded, raw: bytes) -> list[ModelEvent]:
    d = ByteStreamDecoder(codec.stream_decoder(enc, status=200, request_id=None), enc.restore,
                          status=200, request_id=None)
    out = d.feed(raw) + d.close()
    d.check()
    return out


CALL = ToolCallPart("call_1", "get_weather", {"city": "Paris"})
RESULT = ToolResultPart("call_1", "get_weather", {"temp": 21})

# --- OpenAI Chat Completions: encoding -------------------------------------------------


def test_openai_messages() -> None:
    b = body(OpenAIChatCodec(), req(
        msg("user", TextPart("hi")),
        msg("assistant", ReasoningPart("hmm", signature="s"), TextPart("Let me look."), CALL),
        msg("tool", RESULT),
        msg("assistant", ReasoningPart("only reasoning")),
        msg("user", TextPart("and?"), FilePart("image/png", PNG),
            FilePart("image/jpeg", "https://x/y.jpg", is_url=True)),
        system=(SystemMessage("Be brief."), SystemMessage("Use metric.", tag="memory")),
    ))
    assert b["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Use metric."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp":21}'},
        {"role": "user", "content": [
            {"type": "text", "text": "and?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            {"type": "image_url", "image_url": {"url": "https://x/y.jpg"}}]},
    ]


def test_openai_files_of_other_kinds() -> None:
    pdf = FilePart("application/pdf", "JVBERi0=", filename="a.pdf")
    wav = FilePart("audio/wav", "UklGRg==")
    txt = FilePart("text/plain", base64.b64encode("notes é".encode()).decode())
    b = body(OpenAIChatCodec(), req(msg("user", pdf, wav, txt)))
    assert b["messages"] == [{"role": "user", "content": [
        {"type": "file", "file": {"filename": "a.pdf",
                                  "file_data": "data:application/pdf;base64,JVBERi0="}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "text", "text": "notes é"},
    ]}]
    with pytest.raises(ProviderError) as info:
        body(OpenAIChatCodec(), req(msg("user", FilePart("video/mp4", "AAAA"))))
    assert info.value.error.error_type == "unsupported_content"


def test_openai_tools_choice_format_settings_options() -> None:
    codec = OpenAIChatCodec(OpenAIChatOptions(max_tokens_field="max_completion_tokens",
                                              system_role="developer"))
    b = body(codec, req(
        msg("user", TextPart("hi")),
        system=(SystemMessage("sys"),),
        tools=(WEATHER,),
        tool_choice=ToolChoiceTool("get_weather"),
        model_settings=ModelSettings(temperature=0.2, max_tokens=50, top_p=0.9,
                                     stop=("END",), seed=7),
        structured_output=StructuredOutput({"type": "object"}, name="Answer"),
        provider_options={"openai": {"service_tier": "flex", "n": 1},
                          "anthropic": {"thinking": {"type": "enabled"}}},
    ))
    assert b["messages"][0] == {"role": "developer", "content": "sys"}
    assert b["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city",
        "parameters": WEATHER.parameters}}]
    assert b["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert b["response_format"] == {"type": "json_schema", "json_schema": {  # strict: closed
        "name": "Answer", "strict": True, "schema": {
            "type": "object", "properties": {}, "required": [], "additionalProperties": False}}}
    assert (b["temperature"], b["max_completion_tokens"], b["top_p"], b["stop"], b["seed"]) == (
        0.2, 50, 0.9, ["END"], 7)
    assert "max_tokens" not in b
    assert (b["service_tier"], b["n"]) == ("flex", 1) and "thinking" not in b
    assert b["stream"] is True and b["stream_options"] == {"include_usage": True}


def test_openai_no_tools_means_no_tool_choice_and_no_stream_options_when_not_streaming() -> None:
    b = body(OpenAIChatCodec(), req(msg("user", TextPart("hi"))), stream=False)
    assert "tools" not in b and "tool_choice" not in b
    assert b["stream"] is False and "stream_options" not in b
    b = body(OpenAIChatCodec(OpenAIChatOptions(stream_usage=False)),
             req(msg("user", TextPart("hi"))))
    assert "stream_options" not in b


def test_openai_ids_and_names_sanitized_on_the_wire_and_restored_in_events() -> None:
    codec = OpenAIChatCodec()
    bad_id = "functions.get.weather:0"  # a Kimi-style id OpenAI rejects
    r = req(
        msg("user", TextPart("hi"), id="u"),
        msg("assistant", ToolCallPart(bad_id, "get.weather", {}), id="a"),
        msg("tool", ToolResultPart(bad_id, "get.weather", "sunny"), id="t"),
        tools=(ToolSpec("get.weather", "", {"type": "object"}),),
    )
    enc = codec.encode(r, model="m", stream=True)
    wire = json.loads(enc.body)
    wire_id = wire["messages"][1]["tool_calls"][0]["id"]
    wire_name = wire["tools"][0]["function"]["name"]
    assert wire_id != bad_id and wire_name == "get_weather"
    assert wire["messages"][2]["tool_call_id"] == wire_id
    assert wire["messages"][1]["tool_calls"][0]["function"]["name"] == wire_name
    # The model answers with the wire names; the caller sees its own.
    raw = sse(
        oa_chunk({"tool_calls": [{"index": 0, "id": wire_id, "function": {
            "name": wire_name, "arguments": "{}"}}]}),
        oa_chunk(finish="tool_calls"), "data: [DONE]\n\n")
    events = decode(codec, enc, raw)
    calls = [e for e in events if isinstance(e, ToolCall | ToolCallDelta)]
    assert calls and all(
        (e.tool_call_id, e.tool_name) == (bad_id, "get.weather") for e in calls)


def test_openai_pairing_repaired_before_sending() -> None:
    # A call whose result was trimmed away: the provider would reject the history.
    r = req(msg("user", TextPart("hi"), id="u"), msg("assistant", CALL, id="a"),
            msg("user", TextPart("next"), id="u2"))
    b = body(OpenAIChatCodec(), r)
    roles = [m["role"] for m in b["messages"]]
    assert roles == ["user", "assistant", "tool", "user"]
    assert b["messages"][2]["tool_call_id"] == "call_1"


# --- OpenAI Chat Completions: decoding --------------------------------------------------


def test_openai_reasoning_content_index_less_calls_object_arguments_groq_usage() -> None:
    raw = sse(
        oa_chunk({"reasoning_content": "think"}),
        oa_chunk({"content": "ok"}),
        oa_chunk({"tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {"a": 1}}}]}),
        oa_chunk({"tool_calls": [{"id": "c2", "function": {"name": "g", "arguments": "{}"}}]}),
        {"id": "x", "choices": [{"index": 1, "delta": {"content": "other choice"}}]},
        {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
         "x_groq": {"usage": {"prompt_tokens": 4, "completion_tokens": 2,
                              "prompt_tokens_details": {"cached_tokens": 1}}}},
        "data: [DONE]\n\n",
    )
    codec = OpenAIChatCodec()
    events = decode(codec, Encoded(b""), raw)
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "think"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "ok"
    assert [(e.tool_call_id, e.tool_name, dict(e.args)) for e in events
            if isinstance(e, ToolCall)] == [("c1", "f", {"a": 1}), ("c2", "g", {})]
    fin = events[-1]
    assert isinstance(fin, ModelFinish)
    assert fin.finish_reason == "tool-calls"
    assert fin.usage == Usage(input_tokens=4, output_tokens=2, cached_input_tokens=1)


def test_openai_reasoning_closes_before_text_starts() -> None:
    raw = sse(oa_chunk({"reasoning": "a"}), oa_chunk({"content": "b"}),
              oa_chunk(finish="stop"), "data: [DONE]\n\n")
    kinds = [type(e).__name__ for e in decode(OpenAIChatCodec(), Encoded(b""), raw)]
    assert kinds == ["ReasoningStart", "ReasoningDelta", "ReasoningEnd", "TextStart",
                     "TextDelta", "TextEnd", "ModelFinish"]


def test_openai_unknown_finish_reason_is_other_and_done_without_finish() -> None:
    raw = sse(oa_chunk({"content": "x"}), oa_chunk(finish="weird"), "data: [DONE]\n\n")
    fin = decode(OpenAIChatCodec(), Encoded(b""), raw)[-1]
    assert isinstance(fin, ModelFinish) and fin.finish_reason == "other"


# --- Anthropic Messages: encoding ------------------------------------------------------


def test_anthropic_messages_merge_roles_and_send_thinking_back() -> None:
    b = body(AnthropicCodec(), req(
        msg("user", TextPart("hi"), FilePart("image/png", PNG), id="u1"),
        msg("user", TextPart(""), id="u2"),  # empty text: the API rejects it
        msg("assistant", ReasoningPart("plan", signature="sig"), ReasoningPart("", redacted="R"),
            ReasoningPart("from another provider"), TextPart("Checking."), CALL, id="a"),
        msg("user", TextPart("also this"), id="u3"),
        # call_2 has no call: pairing repair drops this orphan result before encoding
        msg("tool", RESULT, ToolResultPart("call_2", "f", "boom", is_error=True), id="t"),
        msg("system", TextPart("Late system note."), id="s"),
        system=(SystemMessage("Be brief."),),
    ), stream=False)
    assert b["system"] == [{"type": "text", "text": "Be brief."},
                           {"type": "text", "text": "Late system note."}]
    assert b["max_tokens"] == 4096 and b["stream"] is False
    assert b["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PNG}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan", "signature": "sig"},
            {"type": "redacted_thinking", "data": "R"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather",
             "input": {"city": "Paris"}}]},
        # results open the user turn that answers the calls; the user's text follows
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": '{"temp":21}'},
            {"type": "text", "text": "also this"}]},
    ]


def test_anthropic_error_results_are_flagged() -> None:
    b = body(AnthropicCodec(), req(
        msg("user", TextPart("hi"), id="u"),
        msg("assistant", ToolCallPart("toolu_1", "f", {}), id="a"),
        msg("tool", ToolResultPart("toolu_1", "f", "boom", is_error=True), id="t"),
    ))
    assert b["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom", "is_error": True}]}


def test_anthropic_tools_choice_settings_structured_output() -> None:
    codec = AnthropicCodec(AnthropicOptions(default_max_tokens=1000))
    b = body(codec, req(
        msg("user", TextPart("hi")), tools=(WEATHER,), tool_choice="required",
        model_settings=ModelSettings(temperature=0.5, top_p=0.8, stop=("X",), seed=3),
        provider_options={"anthropic": {"thinking": {"type": "enabled", "budget_tokens": 512}}},
    ))
    assert b["tools"] == [{"name": "get_weather", "description": "Weather for a city",
                           "input_schema": WEATHER.parameters}]
    assert b["tool_choice"] == {"type": "any"}
    assert (b["temperature"], b["top_p"], b["stop_sequences"], b["max_tokens"]) == (
        0.5, 0.8, ["X"], 1000)
    assert "seed" not in b
    assert b["thinking"] == {"type": "enabled", "budget_tokens": 512}
    so = body(codec, req(msg("user", TextPart("hi")),
                         structured_output=StructuredOutput({"type": "object"}, name="city")))
    assert so["tool_choice"] == {"type": "tool", "name": "city"}
    assert so["tools"][-1]["name"] == "city"
    none = body(codec, req(msg("user", TextPart("hi")), tools=(WEATHER,), tool_choice="none"))
    assert none["tool_choice"] == {"type": "none"}


def test_anthropic_default_max_tokens_leaves_room_above_a_thinking_budget() -> None:
    def max_tokens(budget: int) -> object:
        think = {"anthropic": {"thinking": {"type": "enabled", "budget_tokens": budget}}}
        return body(AnthropicCodec(), req(msg("user", TextPart("hi")),
                                          provider_options=think))["max_tokens"]
    assert max_tokens(1024) == 4096
    assert max_tokens(10_000) == 14_096


def test_anthropic_files() -> None:
    b = body(AnthropicCodec(), req(msg("user", FilePart("application/pdf", "JVBE"),
                                       FilePart("image/png", "https://i/p.png", is_url=True))))
    assert b["messages"][0]["content"] == [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": "JVBE"}},
        {"type": "image", "source": {"type": "url", "url": "https://i/p.png"}}]
    with pytest.raises(ProviderError):
        body(AnthropicCodec(), req(msg("user", FilePart("audio/wav", "AAAA"))))


# --- Anthropic Messages: decoding ------------------------------------------------------


def _an(*frames: dict[str, object]) -> bytes:
    return sse({"type": "message_start", "message": {"id": "msg", "model": "m", "usage": {
        "input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}}},
        *frames, {"type": "message_stop"})


def test_anthropic_redacted_thinking_unknown_blocks_and_cached_usage() -> None:
    raw = _an(
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "redacted_thinking", "data": "ENCRYPTED"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "server_tool_use", "id": "srv", "name": "web_search"}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "some_future_event"},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 7}},
    )
    events = decode(AnthropicCodec(), Encoded(b""), raw)
    ends = [e for e in events if isinstance(e, ReasoningEnd)]
    assert [(e.signature, e.redacted) for e in ends] == [(None, "ENCRYPTED")]
    assert not any(isinstance(e, ToolCall | ToolCallDelta) for e in events)
    fin = events[-1]
    assert isinstance(fin, ModelFinish)
    assert fin.usage == Usage(input_tokens=100, output_tokens=7, cached_input_tokens=90)


SEARCHED = [{"type": "web_search_result", "title": "Paris weather", "url": "https://w.example",
             "encrypted_content": "EqgfCioIARgBIiQ3YTAw", "page_age": "2 hours ago"}]


def test_anthropic_server_tools_are_server_tool_parts_never_calls() -> None:
    raw = _an(
        {"type": "content_block_start", "index": 0, "content_block": {
            "type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {}}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": '{"query": "weather'}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "input_json_delta", "partial_json": ' Paris"}'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "web_search_tool_result", "tool_use_id": "srvtoolu_01",
            "content": SEARCHED}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {
            "type": "server_tool_use", "id": "srvtoolu_02", "name": "web_search",
            "input": {"query": "again"}}},
        {"type": "content_block_stop", "index": 2},
        {"type": "content_block_start", "index": 3, "content_block": {
            "type": "web_search_tool_result", "tool_use_id": "srvtoolu_02", "content": {
                "type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}}},
        {"type": "content_block_stop", "index": 3},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
    )
    events = decode(AnthropicCodec(), Encoded(b""), raw)
    assert not any(isinstance(e, ToolCall | ToolCallDelta) for e in events)
    assert [e for e in events if isinstance(e, ServerToolCall | ServerToolResult)] == [
        ServerToolCall("srvtoolu_01", "web_search", {"query": "weather Paris"}),
        ServerToolResult("srvtoolu_01", "web_search", SEARCHED),
        ServerToolCall("srvtoolu_02", "web_search", {"query": "again"}),
        ServerToolResult("srvtoolu_02", "web_search", {
            "type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
            is_error=True),
    ]
    assert isinstance(events[-1], ModelFinish) and events[-1].finish_reason == "stop"


def test_server_tool_parts_are_not_sent_back_by_any_wire_format() -> None:
    plain = req(msg("user", TextPart("hi")), msg("assistant", TextPart("Found it."), CALL),
                msg("tool", RESULT), msg("assistant", TextPart("Sunny.")))
    server = (ServerToolCallPart("srv_1", "web_search", {"query": "x"}),
              ServerToolResultPart("srv_1", "web_search", SEARCHED))
    with_server = req(msg("user", TextPart("hi")),
                      msg("assistant", *server, TextPart("Found it."), CALL),
                      msg("tool", RESULT), msg("assistant", *server, TextPart("Sunny.")))
    codecs: list[Codec] = [OpenAIChatCodec(), AnthropicCodec(), OpenAIResponsesCodec(),
                           GeminiCodec(), BedrockCodec()]
    for c in codecs:
        assert body(c, with_server) == body(c, plain), type(c).__name__


def test_anthropic_delta_for_a_block_never_started_is_invalid() -> None:
    raw = _an({"type": "content_block_delta", "index": 3,
               "delta": {"type": "text_delta", "text": "x"}})
    with pytest.raises(ProviderError) as info:
        decode(AnthropicCodec(), Encoded(b""), raw)
    assert info.value.error.error_type == "invalid_response"


@pytest.mark.parametrize(("raw", "reason"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
    ("tool_use", "tool-calls"), ("refusal", "content-filter"), ("new_reason", "other")])
def test_anthropic_stop_reasons(raw: str, reason: str) -> None:
    events = decode(AnthropicCodec(), Encoded(b""), _an(
        {"type": "message_delta", "delta": {"stop_reason": raw}}))
    assert isinstance(events[-1], ModelFinish) and events[-1].finish_reason == reason
