"""The OpenAI Responses wire format: encoding, decoding the cases its recordings lack,
bad input, its recorded streams read one byte at a time, choosing it for `openai/`, and
agents that run on it over HTTP (loopback server and httpx MockTransport), sync, asyncio
and trio. Its recorded traffic is replayed in test_conformance.py as well."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import msgspec
import pytest

from interpreters.aio import AsyncInterpreter
from interpreters.observers.otel import provider_of
from interpreters.providers import (
    AsyncResolver,
    ByteStreamDecoder,
    OpenAIResponsesCodec,
    OpenAIResponsesOptions,
    ProviderConfigError,
    Resolver,
    provider_config,
)
from interpreters.providers.codec import Encoded
from interpreters.providers.openai_responses import decode_body
from interpreters.providers.prices import genai_prices
from interpreters.providers.provider import ProviderError
from interpreters.sync import SyncInterpreter
from pipeline import RunResult
from pipeline.agent import Agent
from pipeline.tools import tool
from pipeline.values.chunks import (
    ModelEvent,
    ModelFinish,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    ServerToolCall,
    ServerToolResult,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    Usage,
)
from pipeline.values.cost import PriceQuery
from pipeline.values.messages import (
    FilePart,
    Message,
    Part,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.model import (
    ApiError,
    ModelRequest,
    ModelSettings,
    PromptCache,
    StructuredOutput,
    ToolChoiceTool,
    ToolSpec,
)
from tests.providers.cassettes import index_files, load, traffic_dir
from tests.providers.helpers import KEY, rs_response, sse
from tests.providers.helpers import rs_text_stream as text_stream
from tests.providers.server import ReplayServer, Reply

ROOT = traffic_dir()
RS = "pydantic+pydantic-ai/tests/models/cassettes/test_openai_responses/"
WEATHER = ToolSpec("get_weather", "Weather for a city", {"type": "object", "properties": {
    "city": {"type": "string"}}})
PNG = base64.b64encode(b"\x89PNG...").decode()


def msg(role: str, *parts: Part, id: str = "m") -> Message:
    return Message(id=id, role=role, parts=parts)  # type: ignore[arg-type]


def req(*messages: Message, **kw: Any) -> ModelRequest:
    return ModelRequest(model="openai-responses/m", system=kw.pop("system", ()),
                        messages=messages, **kw)


def body(r: ModelRequest, codec: OpenAIResponsesCodec | None = None,
         stream: bool = True) -> dict[str, Any]:
    out = json.loads((codec or OpenAIResponsesCodec()).encode(r, model="m", stream=stream).body)
    assert isinstance(out, dict)
    return out


def decode(raw: bytes, pieces: int | None = None,
           codec: OpenAIResponsesCodec | None = None,
           enc: Encoded | None = None) -> list[ModelEvent]:
    """The stream decoded, read in `pieces`-byte reads (None: one read)."""
    c = codec or OpenAIResponsesCodec()
    e = enc or Encoded(b"")
    d = ByteStreamDecoder(c.stream_decoder(e, status=200, request_id=None), e.restore,
                          status=200, request_id=None)
    step = pieces or max(len(raw), 1)
    out: list[ModelEvent] = []
    for i in range(0, len(raw), step):
        out += d.feed(raw[i:i + step])
    out += d.close()
    d.check()
    return out


def failure(raw: bytes) -> tuple[list[ModelEvent], ApiError]:
    """What a stream that fails delivered before it failed, and its error."""
    got: list[ModelEvent] = []
    d = ByteStreamDecoder(OpenAIResponsesCodec().stream_decoder(
        Encoded(b""), status=200, request_id=None), lambda e: e, status=200, request_id=None)
    with pytest.raises(ProviderError) as info:
        got += d.feed(raw)
        got += d.close()
        d.check()
    return got, info.value.error


CALL = ToolCallPart("call_1", "get_weather", {"city": "Paris"})
RESULT = ToolResultPart("call_1", "get_weather", {"temp": 21})
THOUGHT = ReasoningPart("I should look it up.", signature="rs_1 gAAAAenc")

# --- encoding -------------------------------------------------------------------------


def test_messages_become_input_items_in_order() -> None:
    b = body(req(
        msg("user", TextPart("weather in Paris?")),
        msg("assistant", TextPart("Let me check."), THOUGHT, CALL),
        msg("tool", RESULT),
        msg("system", TextPart("Be brief.")),
        msg("assistant", TextPart("21 degrees.")),
        system=(SystemMessage("You are helpful."),),
    ), stream=False)
    assert b["input"] == [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "content": "Let me check."},
        # The reasoning item goes back right before the call that followed it.
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAenc",
         "summary": [{"type": "summary_text", "text": "I should look it up."}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"temp":21}'},
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": "21 degrees."},
    ]
    assert b["stream"] is False and b["model"] == "m"


def test_reasoning_of_another_provider_or_without_an_item_is_not_sent() -> None:
    b = body(req(msg("assistant", ReasoningPart("hm", signature="EqEECkYICxgC"),
                     ReasoningPart("plain"), ReasoningPart("", signature="rs_2"),
                     TextPart("ok"))))
    assert b["input"] == [
        {"type": "reasoning", "id": "rs_2", "summary": []},
        {"role": "assistant", "content": "ok"},
    ]


def test_without_stored_responses_reasoning_goes_back_only_with_its_content() -> None:
    codec = OpenAIResponsesCodec(OpenAIResponsesOptions(store=False))
    b = body(req(msg("assistant", ReasoningPart("a", signature="rs_1"), THOUGHT,
                     TextPart("ok"))), codec)
    # The id-only item is left out; the one with its encrypted content goes.
    assert b["input"][0]["id"] == "rs_1" and len(b["input"]) == 2
    assert [i.get("type", "message") for i in b["input"]] == ["reasoning", "message"]
    assert b["input"][0]["encrypted_content"] == "gAAAAenc"


def test_user_files_as_input_parts() -> None:
    b = body(req(msg("user", TextPart("look"), FilePart("image/png", PNG),
                     FilePart("image/jpeg", "https://x/y.jpg", is_url=True),
                     FilePart("application/pdf", PNG, filename="a.pdf"),
                     FilePart("application/pdf", "https://x/a.pdf", is_url=True))))
    assert b["input"][0]["content"] == [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
        {"type": "input_image", "image_url": "https://x/y.jpg"},
        {"type": "input_file", "filename": "a.pdf",
         "file_data": f"data:application/pdf;base64,{PNG}"},
        {"type": "input_file", "file_url": "https://x/a.pdf"},
    ]
    with pytest.raises(ProviderError, match="OpenAI Responses format cannot send a audio/wav"):
        body(req(msg("user", FilePart("audio/wav", PNG))))


def test_tools_tool_choice_and_structured_output() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    b = body(req(msg("user", TextPart("hi")), tools=(WEATHER,),
                 tool_choice=ToolChoiceTool("get_weather"),
                 structured_output=StructuredOutput(schema, "Answer")))
    assert b["tools"] == [{"type": "function", "name": "get_weather",
                           "description": "Weather for a city",
                           "parameters": dict(WEATHER.parameters), "strict": False}]
    assert b["tool_choice"] == {"type": "function", "name": "get_weather"}
    fmt = b["text"]["format"]
    assert (fmt["type"], fmt["name"], fmt["strict"]) == ("json_schema", "Answer", True)
    assert fmt["schema"]["additionalProperties"] is False  # closed for strict mode
    assert body(req(msg("user", TextPart("hi")), tools=(WEATHER,),
                    tool_choice="required"))["tool_choice"] == "required"
    strict = body(req(msg("user", TextPart("hi")), tools=(WEATHER,)),
                  OpenAIResponsesCodec(OpenAIResponsesOptions(strict_tools=True)))
    assert strict["tools"][0]["strict"] is True
    assert strict["tools"][0]["parameters"]["required"] == ["city"]


def test_settings_reasoning_and_options() -> None:
    options = OpenAIResponsesOptions(system_role="developer", reasoning_effort="low",
                                     reasoning_summary="auto", encrypted_reasoning=True,
                                     store=False)
    b = body(req(msg("user", TextPart("hi")), system=(SystemMessage("sys"),),
                 model_settings=ModelSettings(temperature=0.5, max_tokens=99, top_p=0.9),
                 provider_options={"openai": {"service_tier": "flex"}, "other": {"x": 1}}),
             OpenAIResponsesCodec(options))
    assert b["input"][0] == {"role": "developer", "content": "sys"}
    assert (b["temperature"], b["top_p"], b["max_output_tokens"]) == (0.5, 0.9, 99)
    assert b["reasoning"] == {"effort": "low", "summary": "auto"}
    assert b["include"] == ["reasoning.encrypted_content"]
    assert b["store"] is False and b["service_tier"] == "flex" and "x" not in b
    plain = body(req(msg("user", TextPart("hi"))))
    assert not {"reasoning", "include", "store", "max_output_tokens"} & set(plain)


def test_the_prompt_cache_hint_changes_nothing_its_reads_are_reported() -> None:
    plain = req(msg("user", TextPart("hi")), system=(SystemMessage("s"),), tools=(WEATHER,))
    hinted = msgspec.structs.replace(
        plain, model_settings=ModelSettings(prompt_cache=PromptCache(messages=2)))
    assert body(hinted) == body(plain)  # OpenAI caches long prefixes by itself
    [finish] = [e for e in decode(text_stream("x")) if isinstance(e, ModelFinish)]
    assert finish.usage.cached_input_tokens == 3


@pytest.mark.parametrize("settings", [ModelSettings(stop=("x",)), ModelSettings(seed=1)])
def test_settings_the_format_lacks_are_refused(settings: ModelSettings) -> None:
    with pytest.raises(ProviderError) as info:
        body(req(msg("user", TextPart("hi")), model_settings=settings))
    assert info.value.error.error_type == "configuration"
    assert "has no" in info.value.error.message


@pytest.mark.parametrize("bad", [
    {"reasoning_effort": "hihg"}, {"reasoning_summary": "short"}, {"system_role": "admin"},
    {"encrypted_reasoning": "yes"}, {"store": 1},
])
def test_options_are_checked_when_made(bad: dict[str, object]) -> None:
    with pytest.raises((ValueError, TypeError)):
        OpenAIResponsesOptions(**bad)  # type: ignore[arg-type]


def test_ids_and_names_are_fitted_to_the_server_and_restored() -> None:
    long_id, odd_name = "call_" + "x" * 80, "weather.now"
    codec = OpenAIResponsesCodec()
    r = req(msg("user", TextPart("hi")),
            msg("assistant", ToolCallPart(long_id, odd_name, {})),
            msg("tool", ToolResultPart(long_id, odd_name, "sunny")),
            tools=(ToolSpec(odd_name, "", {"type": "object"}),))
    enc = codec.encode(r, model="m", stream=True)
    sent = json.loads(enc.body)
    wire_id, wire_name = sent["input"][1]["call_id"], sent["input"][1]["name"]
    assert len(wire_id) <= 64 and wire_id == sent["input"][2]["call_id"]
    assert wire_name == sent["tools"][0]["name"] and "." not in wire_name
    raw = sse(
        {"type": "response.output_item.added", "item": {
            "type": "function_call", "id": "fc_9", "call_id": wire_id, "name": wire_name}},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_9", "delta": "{}"},
        {"type": "response.output_item.done", "item": {
            "type": "function_call", "id": "fc_9", "call_id": wire_id, "name": wire_name,
            "arguments": "{}", "status": "completed"}},
        {"type": "response.completed", "response": rs_response()},
    )
    calls = [e for e in decode(raw, enc=enc) if isinstance(e, ToolCall)]
    assert calls == [ToolCall(long_id, odd_name, {})]


# --- decoding -------------------------------------------------------------------------


def test_text_stream_events_usage_and_finish() -> None:
    events = decode(text_stream("Hel", "lo"))
    assert events == [
        TextStart("text-0"), TextDelta("text-0", "Hel"), TextDelta("text-0", "lo"),
        TextEnd("text-0"),
        ModelFinish("stop", Usage(7, 5, reasoning_tokens=2, cached_input_tokens=3),
                    "resp_1", "gpt-5"),
    ]


def test_reasoning_summary_parts_and_the_item_to_send_back() -> None:
    raw = sse(
        {"type": "response.output_item.added", "item": {"type": "reasoning", "id": "rs_7"}},
        {"type": "response.reasoning_summary_text.delta", "item_id": "rs_7",
         "summary_index": 0, "delta": "First."},
        {"type": "response.reasoning_summary_text.delta", "item_id": "rs_7",
         "summary_index": 1, "delta": "Second."},
        {"type": "response.output_item.done", "item": {
            "type": "reasoning", "id": "rs_7", "encrypted_content": "gAAAAx",
            "summary": [{"type": "summary_text", "text": "First."},
                        {"type": "summary_text", "text": "Second."}]}},
        {"type": "response.completed", "response": rs_response()},
    )
    events = decode(raw)
    assert events[:5] == [
        ReasoningStart("reasoning-0"), ReasoningDelta("reasoning-0", "First."),
        ReasoningDelta("reasoning-0", "\n\n"), ReasoningDelta("reasoning-0", "Second."),
        ReasoningEnd("reasoning-0", "rs_7 gAAAAx", provider="openai"),  # its route signed it
    ]
    assert isinstance(events[-1], ModelFinish) and events[-1].finish_reason == "stop"


def test_a_message_sent_only_as_an_item_is_its_text() -> None:
    raw = sse(
        {"type": "response.output_item.added", "item": {"type": "message", "id": "msg_1"}},
        {"type": "response.output_item.done", "item": {"type": "message", "id": "msg_1",
                                                        "content": [{"type": "output_text",
                                                                     "text": "whole"}]}},
        {"type": "response.completed", "response": rs_response()},
    )
    events = decode(raw)
    assert events[:3] == [TextStart("text-0"), TextDelta("text-0", "whole"), TextEnd("text-0")]


def test_refusal_is_text_and_finishes_as_content_filter() -> None:
    raw = sse(
        {"type": "response.refusal.delta", "item_id": "msg_1", "content_index": 0,
         "delta": "I can't help with that."},
        {"type": "response.refusal.done", "item_id": "msg_1", "content_index": 0},
        {"type": "response.completed", "response": rs_response()},
    )
    events = decode(raw)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == \
        "I can't help with that."
    assert isinstance(events[-1], ModelFinish)
    assert events[-1].finish_reason == "content-filter"


def test_incomplete_response_finishes_by_length_and_drops_a_cut_call() -> None:
    raw = sse(
        {"type": "response.output_item.added", "item": {
            "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f"}},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1",
         "delta": '{"a": '},
        {"type": "response.incomplete", "response": rs_response(
            "incomplete", incomplete_details={"reason": "max_output_tokens"})},
    )
    events = decode(raw)
    assert not any(isinstance(e, ToolCall) for e in events)
    assert isinstance(events[-1], ModelFinish) and events[-1].finish_reason == "length"


def test_whole_body_with_reasoning_text_and_a_call() -> None:
    raw = json.dumps(rs_response(output=[
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text",
                                                          "text": "think"}]},
        {"type": "message", "id": "msg_1", "content": [
            {"type": "output_text", "text": "Calling."}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
         "arguments": '{"x": 1}'},
    ])).encode()
    events = decode_body(raw)
    assert events == [
        ReasoningStart("reasoning-0"), ReasoningDelta("reasoning-0", "think"),
        ReasoningEnd("reasoning-0", "rs_1"),
        TextStart("text-1"), TextDelta("text-1", "Calling."), TextEnd("text-1"),
        ToolCall("call_1", "f", {"x": 1}),
        ModelFinish("tool-calls", Usage(7, 5, reasoning_tokens=2, cached_input_tokens=3),
                    "resp_1", "gpt-5"),
    ]


def test_a_failed_whole_body_is_a_typed_error() -> None:
    raw = json.dumps(rs_response("failed", error={"code": "server_error",
                                           "message": "try again"})).encode()
    with pytest.raises(ProviderError) as info:
        decode_body(raw)
    e = info.value.error
    assert (e.code, e.retryable, e.status) == ("server_error", True, 500)
    assert "try again" in e.message


def copilot_stream(*, rotate: bool) -> bytes:
    """A stream with a reasoning item (two summary parts), a message and a function call,
    shaped as GitHub Copilot's `/responses` endpoint sends it (a public capture of it is
    vercel/ai's `github-copilot-id-rotation.1.chunks.txt`): with `rotate`, every event
    names its item by a new `item_id` (`item.id` on the item events too), and only
    `output_index` ties the events of one item together. Without, the ids OpenAI sends."""
    fresh = iter(range(1, 1000))

    def item_id(stable: str) -> str:
        return f"capture-id-{next(fresh)}" if rotate else stable

    def ev(kind: str, index: int, stable: str, **fields: object) -> dict[str, object]:
        return {"type": kind, "item_id": item_id(stable), "output_index": index, **fields}

    def item(kind: str, index: int, stable: str, **fields: object) -> dict[str, object]:
        return {"type": kind, "output_index": index,
                "item": {"id": item_id(stable), **fields}}

    summary = [{"type": "summary_text", "text": "**Counting**"},
               {"type": "summary_text", "text": "Three of them."}]
    answer = "There are **3** r's."
    head = rs_response("in_progress", usage=None)
    return sse(
        {"type": "response.created", "response": head},
        {"type": "response.in_progress", "response": head},
        item("response.output_item.added", 0, "rs_1", type="reasoning", summary=[],
             content=[], encrypted_content=None),
        *(e for n, part in enumerate(summary) for e in (
            ev("response.reasoning_summary_part.added", 0, "rs_1", summary_index=n,
               part={"type": "summary_text", "text": ""}),
            ev("response.reasoning_summary_text.delta", 0, "rs_1", summary_index=n,
               delta=str(part["text"])),
            ev("response.reasoning_summary_text.done", 0, "rs_1", summary_index=n,
               text=part["text"]),
            ev("response.reasoning_summary_part.done", 0, "rs_1", summary_index=n, part=part),
        )),
        item("response.output_item.done", 0, "rs_1", type="reasoning", summary=summary,
             content=[], encrypted_content="gAAAAenc"),
        item("response.output_item.added", 1, "msg_1", type="message", role="assistant",
             status="in_progress", content=[], phase="final_answer"),
        ev("response.content_part.added", 1, "msg_1", content_index=0,
           part={"type": "output_text", "text": "", "annotations": []}),
        *(ev("response.output_text.delta", 1, "msg_1", content_index=0, delta=piece,
             logprobs=[]) for piece in ("There", " are", " **3**", " r's.")),
        ev("response.output_text.done", 1, "msg_1", content_index=0, text=answer),
        ev("response.content_part.done", 1, "msg_1", content_index=0,
           part={"type": "output_text", "text": answer, "annotations": []}),
        item("response.output_item.done", 1, "msg_1", type="message", role="assistant",
             status="completed", content=[{"type": "output_text", "text": answer}]),
        item("response.output_item.added", 2, "fc_1", type="function_call",
             call_id="call_1", name="get_weather", arguments="", status="in_progress"),
        ev("response.function_call_arguments.delta", 2, "fc_1", delta='{"city": '),
        ev("response.function_call_arguments.delta", 2, "fc_1", delta='"Paris"}'),
        ev("response.function_call_arguments.done", 2, "fc_1", arguments='{"city": "Paris"}'),
        item("response.output_item.done", 2, "fc_1", type="function_call", call_id="call_1",
             name="get_weather", arguments='{"city": "Paris"}', status="completed"),
        {"type": "response.completed", "copilot_usage": {"total_nano_aiu": 150325000},
         "response": rs_response()},
    )


def test_items_whose_ids_change_every_event_are_tied_by_their_output_index() -> None:
    stable, rotated = decode(copilot_stream(rotate=False)), decode(copilot_stream(rotate=True))
    assert "".join(e.text for e in stable if isinstance(e, TextDelta)) == "There are **3** r's."
    ends = [e for e in rotated if isinstance(e, ReasoningEnd)]
    # The reasoning goes back as the item the server finished (its last id).
    assert [e.signature for e in ends] == ["capture-id-10 gAAAAenc"]
    assert rotated == [ReasoningEnd(e.id, "capture-id-10 gAAAAenc", provider="openai")
                       if isinstance(e, ReasoningEnd) else e for e in stable]
    assert [type(e) for e in rotated if isinstance(e, TextStart | ReasoningStart)] == \
        [ReasoningStart, TextStart], "one block per item, not one per event"
    assert decode(copilot_stream(rotate=True), pieces=7) == rotated


def _rotating_server(seen: list[httpx.Request]) -> httpx.MockTransport:
    """Copilot's ids: the call in a rotating stream, then the answer."""
    replies = iter((copilot_stream(rotate=True), text_stream("It is sunny.")))

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=next(replies))

    return httpx.MockTransport(handle)


def _weather_agent(ran: list[str]) -> Agent:
    @tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        ran.append(city)
        return "sunny"

    return Agent.create("openai/gpt-5", tools=[get_weather])


def _check_rotated_run(result: RunResult[Any], ran: list[str], seen: list[httpx.Request]
                       ) -> None:
    assert result.status == "finished", result.error
    assert ran == ["Paris"] and result.text == "There are **3** r's.It is sunny."
    second = msgspec.json.decode(seen[1].content)["input"]
    assert second[1:] == [
        {"role": "assistant", "content": "There are **3** r's."},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
    ]


def test_an_agent_runs_over_items_whose_ids_change_every_event() -> None:
    seen: list[httpx.Request] = []
    ran: list[str] = []
    with httpx.Client(transport=_rotating_server(seen)) as client:
        resolver = Resolver(client=client, env=ENV)
        result = SyncInterpreter(resolve=resolver).run(_weather_agent(ran), "weather in Paris?")
        resolver.close()
    _check_rotated_run(result, ran, seen)


@pytest.mark.anyio
async def test_an_agent_runs_over_items_whose_ids_change_every_event_async(
    anyio_backend: str,
) -> None:
    seen: list[httpx.Request] = []
    ran: list[str] = []
    async with httpx.AsyncClient(transport=_rotating_server(seen)) as client:
        resolver = AsyncResolver(client=client, env=ENV)
        result = await AsyncInterpreter(resolve=resolver).run(
            _weather_agent(ran), "weather in Paris?")
        await resolver.aclose()
    _check_rotated_run(result, ran, seen)


def test_unknown_event_types_are_skipped() -> None:
    raw = text_stream("a", "b").replace(
        b"event: response.output_item.done",
        b'event: response.web_search_call.searching\ndata: {"type": '
        b'"response.web_search_call.searching", "item_id": "ws_1", "delta": {"odd": 1}}\n\n'
        b'data: {"type": "response.future_thing", "item": [1, 2]}\n\n'
        b"event: response.output_item.done", 1)
    assert decode(raw) == decode(text_stream("a", "b"))


# --- bad input: a typed error, nothing unapproved delivered --------------------------


def test_a_malformed_event_fails_the_call() -> None:
    raw = text_stream("a").replace(b'"delta": "a"}', b'"delta": "a"', 1)
    got, err = failure(raw)
    assert err.error_type == "invalid_response"
    assert not any(isinstance(e, ModelFinish) for e in got)


def test_a_known_event_of_the_wrong_shape_fails_the_call() -> None:
    raw = sse({"type": "response.output_text.delta", "item_id": "m", "delta": {"no": 1}})
    _, err = failure(raw)
    assert err.error_type == "invalid_response" and "Responses event" in err.message


def test_arguments_for_a_call_never_started_fail_the_call() -> None:
    raw = sse({"type": "response.function_call_arguments.delta", "item_id": "fc_x",
               "delta": "{}"})
    _, err = failure(raw)
    assert err.error_type == "invalid_response" and "fc_x" in err.message


def test_a_stream_without_its_end_is_an_incomplete_stream() -> None:
    raw = text_stream("partial")
    raw = raw[: raw.index(b"event: response.completed")]
    got, err = failure(raw)
    assert err.error_type == "incomplete_stream" and not err.retryable
    assert "response.completed" in err.message
    assert "".join(e.text for e in got if isinstance(e, TextDelta)) == "partial"
    assert not any(isinstance(e, ModelFinish) for e in got)


def test_invalid_arguments_of_a_completed_call_fail_the_call() -> None:
    raw = sse(
        {"type": "response.output_item.done", "item": {
            "type": "function_call", "id": "fc_1", "call_id": "c", "name": "f",
            "arguments": '{"a": ', "status": "completed"}},
        {"type": "response.completed", "response": rs_response()},
    )
    got, err = failure(raw)
    assert err.error_type == "invalid_tool_arguments"
    assert not any(isinstance(e, ToolCall | ModelFinish) for e in got)


@pytest.mark.parametrize(("frame", "code", "retryable"), [
    ({"type": "error", "code": "server_error", "message": "boom"}, "server_error", True),
    ({"type": "error", "error": {"type": "invalid_request_error", "code": "bad",
                                 "message": "no"}}, "bad", False),
    ({"type": "response.failed", "response": rs_response("failed", error={
        "code": "rate_limit_exceeded", "message": "slow"})}, "rate_limit_exceeded", True),
])
def test_error_events_are_typed_errors(frame: dict[str, object], code: str,
                                       retryable: bool) -> None:
    _, err = failure(sse(frame))
    assert (err.code, err.retryable) == (code, retryable)
    # After output was delivered, a retry would repeat it: never retryable then.
    _, late = failure(text_stream("x").split(b"event: response.completed")[0] + sse(frame))
    assert late.code == code and not late.retryable


# --- recorded streams, one byte per read ------------------------------------------------

STREAMS = [
    (name, i) for name in index_files(ROOT)
    if "responses" in name and not name.endswith(".json")
    for i, ex in enumerate(load(ROOT, name).exchanges)
    if ex.status == 200 and not ex.decoded_body.lstrip().startswith(b"{")
]


@pytest.mark.parametrize(("name", "index"), STREAMS)
def test_recorded_streams_decode_the_same_split_at_every_byte(name: str, index: int) -> None:
    raw = load(ROOT, name).exchanges[index].decoded_body
    try:
        whole: list[ModelEvent] | ApiError = decode(raw)
    except ProviderError as e:
        whole = e.error
    try:
        byte_by_byte: list[ModelEvent] | ApiError = decode(raw, pieces=1)
    except ProviderError as e:
        byte_by_byte = e.error
    assert byte_by_byte == whole
    if len(raw) < 20_000:  # and every cut into two reads
        for cut in range(0, len(raw), 7 if len(raw) > 6000 else 1):
            d = ByteStreamDecoder(OpenAIResponsesCodec().stream_decoder(
                Encoded(b""), status=200, request_id=None), lambda e: e, status=200,
                request_id=None)
            two: list[ModelEvent] | ApiError
            try:
                got = d.feed(raw[:cut]) + d.feed(raw[cut:])
                got += d.close()
                d.check()
                two = got
            except ProviderError as e:
                two = e.error
            assert two == whole, cut


def test_every_recorded_responses_file_is_streamed_or_a_body() -> None:
    assert len(STREAMS) >= 6


# --- choosing the format for openai/ ----------------------------------------------------


def test_openai_wire_variable_makes_openai_ids_speak_responses() -> None:
    env = {"OPENAI_API_KEY": "k"}
    assert provider_config("openai/gpt-5", env=env).wire == "openai-chat"
    cfg = provider_config("openai/gpt-5", env=env | {"OPENAI_WIRE": "openai-responses"})
    assert (cfg.wire, cfg.route, cfg.model) == ("openai-responses", "openai", "gpt-5")
    codec = cfg.codec()
    assert isinstance(codec, OpenAIResponsesCodec)
    assert codec.path("gpt-5", stream=True) == "/responses"
    assert codec.options.option_sections == ("openai",)  # its route's options section
    explicit = provider_config("openai-responses/gpt-5", env=env)
    assert (explicit.wire, explicit.endpoint.base_url) == (
        "openai-responses", "https://api.openai.com/v1")


def test_a_misspelt_wire_is_refused_when_the_resolver_is_made() -> None:
    env = {"OPENAI_API_KEY": "k", "OPENAI_WIRE": "responses"}
    with pytest.raises(ProviderConfigError, match=r"OPENAI_WIRE='responses'.*'openai-responses'"):
        Resolver(env=env)
    with pytest.raises(ProviderConfigError, match="OPENAI_WIRE"):
        AsyncResolver(env=env)
    with pytest.raises(ProviderConfigError, match="OPENAI_WIRE"):
        provider_config("openai/gpt-5", env=env)


# --- agents over HTTP -------------------------------------------------------------------


@tool
def get_capital(country: str) -> str:
    """The capital of a country."""
    return {"France": "Paris"}.get(country, "unknown")


@tool
def update_plan(plan: str) -> str:
    """Record the plan."""
    return "plan updated"


STREAMED = RS + "test_openai_responses_stream.yaml"
REASONING = RS + "test_openai_responses_thinking_with_tool_calls.yaml"


def _queue(server: ReplayServer, name: str) -> None:
    for ex in load(ROOT, name).exchanges:
        server.queue(Reply(ex.status, ex.headers, ex.body, chunks=11))


def _check_streamed(server: ReplayServer, text: str) -> None:
    assert text == "The capital of France is Paris."
    second = json.loads(server.seen[-1].body)
    assert server.seen[-1].path == "/v1/responses"
    assert second["input"][1:] == [
        {"type": "function_call", "call_id": "call_kL0PCQV7M2WMoVX8V8OtYSAL",
         "name": "get_capital", "arguments": '{"country":"France"}'},
        {"type": "function_call_output", "call_id": "call_kL0PCQV7M2WMoVX8V8OtYSAL",
         "output": "Paris"},
    ]


def _check_reasoning_went_back(server: ReplayServer) -> None:
    """The reasoning item of turn 1 reached turn 2 as the recorded client sent it."""
    recorded: Any = load(ROOT, REASONING).exchanges[1].request
    sent = json.loads(server.seen[-1].body)["input"]
    [item] = [i for i in sent if i.get("type") == "reasoning"]
    [want] = [i for i in recorded["input"] if i.get("type") == "reasoning"]
    assert (item["id"], item["encrypted_content"]) == (want["id"], want["encrypted_content"])
    assert item["summary"][0]["text"] == "\n\n".join(s["text"] for s in want["summary"])
    kinds = [i.get("type", "message") for i in sent]
    assert kinds == ["message", "reasoning", "function_call", "function_call_output"]


def _agent(model: str, tools: list[Any]) -> Agent:
    return Agent.create(model, tools=tools)


def test_sync_agent_runs_a_streamed_tool_loop(server: ReplayServer) -> None:
    _queue(server, STREAMED)
    resolver = Resolver(base_urls={"openai-responses": server.url + "/v1"},
                        api_keys={"openai-responses": KEY})
    result = SyncInterpreter(resolve=resolver).run(
        _agent("openai-responses/gpt-4o", [get_capital]), "What is the capital of France?")
    resolver.close()
    assert result.status == "finished", result.error
    assert result.usage.input_tokens == 255 + 278
    _check_streamed(server, result.text)


def test_sync_agent_sends_reasoning_back(server: ReplayServer) -> None:
    _queue(server, REASONING)
    resolver = Resolver(base_urls={"openai-responses": server.url + "/v1"},
                        api_keys={"openai-responses": KEY}, stream=False)
    result = SyncInterpreter(resolve=resolver).run(
        _agent("openai-responses/gpt-5", [update_plan]), "Compose the poem.")
    resolver.close()
    assert result.status == "finished", result.error
    assert result.text.startswith("Softly old fountains illumine alleys")
    assert result.usage.reasoning_tokens == 1792
    assert result.usage.cached_input_tokens == 2048
    _check_reasoning_went_back(server)


@pytest.mark.anyio
async def test_async_agent_runs_a_streamed_tool_loop(
    server: ReplayServer, anyio_backend: str
) -> None:
    _queue(server, STREAMED)
    resolver = AsyncResolver(base_urls={"openai-responses": server.url + "/v1"},
                             api_keys={"openai-responses": KEY})
    result = await AsyncInterpreter(resolve=resolver).run(
        _agent("openai-responses/gpt-4o", [get_capital]), "What is the capital of France?")
    await resolver.aclose()
    assert result.status == "finished", result.error
    _check_streamed(server, result.text)


@pytest.mark.anyio
async def test_async_agent_sends_reasoning_back(server: ReplayServer, anyio_backend: str) -> None:
    _queue(server, REASONING)
    resolver = AsyncResolver(base_urls={"openai-responses": server.url + "/v1"},
                             api_keys={"openai-responses": KEY}, stream=False)
    result = await AsyncInterpreter(resolve=resolver).run(
        _agent("openai-responses/gpt-5", [update_plan]), "Compose the poem.")
    await resolver.aclose()
    assert result.status == "finished", result.error
    _check_reasoning_went_back(server)


def _mock(seen: list[httpx.Request], raw: bytes) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=raw)

    return httpx.MockTransport(handle)


ENV = {"OPENAI_API_KEY": "sk-test", "OPENAI_WIRE": "openai-responses"}


def test_openai_ids_on_responses_through_a_mock_transport() -> None:
    seen: list[httpx.Request] = []
    with httpx.Client(transport=_mock(seen, text_stream("Hi", " there"))) as client:
        resolver = Resolver(client=client, env=ENV)
        result = SyncInterpreter(resolve=resolver).run(Agent.create("openai/gpt-5"), "hi")
        resolver.close()
    assert result.status == "finished", result.error
    assert result.text == "Hi there" and result.usage.cached_input_tokens == 3
    [request] = seen
    assert str(request.url) == "https://api.openai.com/v1/responses"
    assert request.headers["authorization"] == "Bearer sk-test"
    sent = msgspec.json.decode(request.content)
    assert sent["input"][-1] == {"role": "user", "content": "hi"} and sent["stream"] is True


@pytest.mark.anyio
async def test_openai_ids_on_responses_through_a_mock_transport_async(
    anyio_backend: str,
) -> None:
    seen: list[httpx.Request] = []
    async with httpx.AsyncClient(transport=_mock(seen, text_stream("Hi"))) as client:
        resolver = AsyncResolver(client=client, env=ENV)
        result = await AsyncInterpreter(resolve=resolver).run(Agent.create("openai/gpt-5"), "hi")
        await resolver.aclose()
    assert result.status == "finished", result.error
    assert result.text == "Hi"
    assert [str(r.url) for r in seen] == ["https://api.openai.com/v1/responses"]


# --- tools the server runs, and tool kinds the agent cannot run ----------------------------


def _items_stream(*items: dict[str, object], between: tuple[dict[str, object], ...] = ()
                  ) -> bytes:
    """A stream whose output is `items` (each added, then done), `between` after the
    first one's addition (its progress events), then a text answer."""
    head = rs_response("in_progress", usage=None)
    frames: list[dict[str, object]] = [{"type": "response.created", "response": head}]
    for n, it in enumerate(items):
        frames.append({"type": "response.output_item.added", "output_index": n,
                       "item": {**it, "status": "in_progress"}})
        if n == 0:
            frames += between
        frames.append({"type": "response.output_item.done", "output_index": n, "item": it})
    done = rs_response(output=list(items))
    return sse(*frames, {"type": "response.completed", "response": done})


Item = dict[str, object]
WEB_SEARCH: Item = {"type": "web_search_call", "id": "ws_1", "status": "completed",
                    "action": {"type": "search", "query": "weather Paris"}}
INTERPRETER: Item = {"type": "code_interpreter_call", "id": "ci_1", "status": "completed",
                     "code": "print(6 * 7)", "container_id": "cntr_1",
                     "outputs": [{"type": "logs", "logs": "42\n"}]}
MCP: Item = {"type": "mcp_call", "id": "mcp_1", "server_label": "deepwiki",
             "name": "ask_question", "arguments": '{"question": "what?"}', "output": None,
             "error": "server unreachable"}


def test_tools_the_server_ran_are_server_tool_parts() -> None:
    raw = _items_stream(WEB_SEARCH, INTERPRETER, MCP, between=(
        {"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws_1"},))
    events = decode(raw)
    expected = [
        ServerToolCall("ws_1", "web_search", {"action": WEB_SEARCH["action"]}),
        ServerToolResult("ws_1", "web_search", {"status": "completed"}),
        ServerToolCall("ci_1", "code_interpreter", {"code": "print(6 * 7)",
                                                    "container_id": "cntr_1"}),
        ServerToolResult("ci_1", "code_interpreter", {
            "outputs": [{"type": "logs", "logs": "42\n"}], "status": "completed"}),
        ServerToolCall("mcp_1", "ask_question", {"server_label": "deepwiki",
                                                 "arguments": {"question": "what?"}}),
        ServerToolResult("mcp_1", "ask_question", {"error": "server unreachable"},
                         is_error=True),
    ]
    assert [e for e in events if isinstance(e, ServerToolCall | ServerToolResult)] == expected
    assert not any(isinstance(e, ToolCall) for e in events)
    assert isinstance(events[-1], ModelFinish) and events[-1].finish_reason == "stop"
    whole = decode_body(json.dumps(rs_response(output=[WEB_SEARCH, INTERPRETER, MCP])).encode())
    assert [e for e in whole if not isinstance(e, ModelFinish)] == expected


CUSTOM: Item = {"type": "custom_tool_call", "id": "ctc_abc123", "call_id": "call_sql_1",
                "name": "write_sql", "input": "SELECT * FROM users WHERE age > 25"}


@pytest.mark.parametrize("item", [
    CUSTOM,
    {"type": "computer_call", "id": "cu_1", "call_id": "call_c1",
     "action": {"type": "click", "x": 1, "y": 2}},
    {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_s1",
     "action": {"type": "exec", "command": ["ls"]}},
], ids=lambda item: str(item["type"]))
def test_a_tool_call_the_agent_cannot_run_is_a_typed_error_naming_the_item(
    item: dict[str, object]
) -> None:
    got, err = failure(_items_stream(item, between=(
        {"type": "response.custom_tool_call_input.delta", "output_index": 0,
         "item_id": item["id"], "delta": "SELECT"},)))
    assert (err.error_type, err.code, err.retryable) == ("unsupported_tool_call", item["type"],
                                                         False)
    assert f"{item['type']} item {item['id']!r}" in err.message
    assert not any(isinstance(e, ModelFinish | ToolCall) for e in got)
    with pytest.raises(ProviderError) as info:
        decode_body(json.dumps(rs_response(output=[item])).encode())
    assert info.value.error == err


def test_a_custom_tool_call_never_reaches_a_tool_of_its_name() -> None:
    ran: list[str] = []

    @tool
    def write_sql(input: str) -> str:
        """Never run: the model called a custom tool, not this function."""
        ran.append(input)
        return "rows"

    seen: list[httpx.Request] = []
    with httpx.Client(transport=_mock(seen, _items_stream(CUSTOM))) as client:
        resolver = Resolver(client=client, env=ENV)
        result = SyncInterpreter(resolve=resolver).run(
            Agent.create("openai/gpt-5", tools=[write_sql]), "users over 25?")
        resolver.close()
    assert result.status == "failed" and ran == [] and len(seen) == 1
    assert result.error is not None and "custom_tool_call item 'ctc_abc123'" in str(result.error)
    assert "write_sql" in str(result.error)



def test_a_stream_cut_short_never_finishes_the_agent() -> None:
    raw = text_stream("half an ans")
    raw = raw[: raw.index(b"event: response.completed")]
    seen: list[httpx.Request] = []
    with httpx.Client(transport=_mock(seen, raw)) as client:
        resolver = Resolver(client=client, env=ENV)
        result = SyncInterpreter(resolve=resolver).run(Agent.create("openai/gpt-5"), "hi")
        resolver.close()
    assert result.status != "finished"
    assert result.error is not None and "response.completed" in str(result.error)


def test_its_route_is_traced_and_priced_as_openai() -> None:
    assert provider_of("openai-responses/gpt-4o") == ("openai", "gpt-4o")
    price = genai_prices()
    usage = Usage(1_000_000, 1_000_000, cached_input_tokens=500_000)
    ours = price(PriceQuery("openai-responses/gpt-4o", None, usage, 1_750_000_000.0))
    chat = price(PriceQuery("openai/gpt-4o", None, usage, 1_750_000_000.0))
    assert ours is not None and chat is not None and ours.total == chat.total
