"""The Gemini wire format: what it sends, what it makes of what comes back, and a run
over it end to end.

Encoding is checked on the body (turns, parts, signatures, declarations in Gemini's schema
subset, generationConfig, the key in a header); decoding on made and recorded frames,
bad input among them (malformed JSON, a candidate with no content, a stream cut before its
finishReason, a blocked prompt or answer), each a typed error. Then an agent with a tool
over the recorded Gemini 3 exchange (its signed call goes back with the call), on sync,
asyncio and trio; httpx's MockTransport against the real base URL; and the retry policy
on Gemini's 503 and 429.
"""

from __future__ import annotations

import base64
import json

import httpx
import msgspec
import pytest

from effects import Continue
from interpreters.aio import AsyncInterpreter
from interpreters.memory.embed import GeminiEmbedder
from interpreters.providers import (
    AsyncResolver,
    Limits,
    Resolver,
    Timeouts,
    provider_config,
    resolve_provider,
)
from interpreters.providers.codec import ByteStreamDecoder, Encoded
from interpreters.providers.errors import classify_response
from interpreters.providers.gemini import (
    GeminiCodec,
    decode_response_body,
    encode_request,
    gemini_schema,
)
from interpreters.providers.prices import genai_prices
from interpreters.providers.provider import ProviderError
from interpreters.providers.routes import ProviderConfigError
from interpreters.providers.table import ROUTES
from interpreters.sync import SyncInterpreter
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.processor import ApiErrorArgs, ApiErrorResult, Processor
from pipeline.tools import tool
from pipeline.values.chunks import (
    ModelEvent,
    ModelFinish,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
    ToolCall,
    Usage,
)
from pipeline.values.cost import PriceQuery
from pipeline.values.messages import (
    FilePart,
    Message,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    user,
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
from pipeline.values.retry import RetryPolicy
from tests.providers.cassettes import load, traffic_dir
from tests.providers.helpers import KEY, run_sync, sse
from tests.providers.server import ReplayServer, Reply
from tests.providers.test_prompt_cache import RetryOnce, lookup

ROOT = traffic_dir()
SIGNED = "pydantic+pydantic-ai/tests/models/cassettes/test_google/" \
    "test_google_streaming_tool_call_thought_signature.yaml"
SSE = (("content-type", "text/event-stream"),)
JSON = (("content-type", "application/json"),)
OPTIONS = GeminiCodec().options


def _body(request: ModelRequest) -> dict[str, object]:
    enc = GeminiCodec().encode(request, model="gemini-x", stream=True)
    out: dict[str, object] = json.loads(enc.body)
    return out


def _request(*messages: Message) -> ModelRequest:
    return ModelRequest(model="google/gemini-x", system=(), messages=messages)


def _frame(parts: list[dict[str, object]] | None = None, finish: str | None = None,
           **top: object) -> dict[str, object]:
    cand: dict[str, object] = {"index": 0}
    if parts is not None:
        cand["content"] = {"role": "model", "parts": parts}
    if finish is not None:
        cand["finishReason"] = finish
    return {"candidates": [cand], "responseId": "r1", "modelVersion": "gemini-x", **top}


def _decode(raw: bytes) -> tuple[list[ModelEvent], ApiError | None]:
    codec = GeminiCodec()
    d = ByteStreamDecoder(codec.stream_decoder(Encoded(b""), status=200, request_id=None),
                          lambda e: e, status=200, request_id=None)
    out: list[ModelEvent] = []
    try:
        out += d.feed(raw)
        out += d.close()
        d.check()
    except ProviderError as e:
        return out, e.error
    return out, None


# --- encoding ---------------------------------------------------------------------------


def test_turns_parts_and_system_instruction() -> None:
    req = ModelRequest(
        model="google/gemini-x",
        system=(SystemMessage("Be brief."),),
        messages=(
            user("look", id="u1"),
            Message(id="u2", role="user", parts=(
                FilePart("image/png", "iVBORw0KGgo="), FilePart("application/pdf",
                                                                "gs://b/doc.pdf", is_url=True),
            )),
            Message(id="s1", role="system", parts=(TextPart("Later rule."),)),
            Message(id="a1", role="assistant", parts=(
                TextPart("Let me check."), ToolCallPart("c1", "lookup", {"q": "x"}),
                ToolCallPart("c2", "lookup", {"q": "y"}),
            )),
            Message(id="t1", role="tool", parts=(
                ToolResultPart("c1", "lookup", {"hits": 2}),
                ToolResultPart("c2", "lookup", "no such thing", is_error=True),
            )),
            user("and?", id="u3"),
        ),
    )
    body = _body(req)
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}, {"text": "Later rule."}]}
    assert body["contents"] == [
        {"role": "user", "parts": [
            {"text": "look"},
            {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
            {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/doc.pdf"}},
        ]},
        {"role": "model", "parts": [
            {"text": "Let me check."},
            {"functionCall": {"id": "c1", "name": "lookup", "args": {"q": "x"}}},
            {"functionCall": {"id": "c2", "name": "lookup", "args": {"q": "y"}}},
        ]},
        # The tool results and the next user text are one user turn, responses first.
        {"role": "user", "parts": [
            {"functionResponse": {"id": "c1", "name": "lookup",
                                  "response": {"output": {"hits": 2}}}},
            {"functionResponse": {"id": "c2", "name": "lookup",
                                  "response": {"error": "no such thing"}}},
            {"text": "and?"},
        ]},
    ]
    assert "model" not in body and "stream" not in body


def test_thought_signatures_go_back_on_the_part_they_came_with() -> None:
    a = Message(id="a1", role="assistant", parts=(
        ReasoningPart("I think.", signature="S0"),   # a signed thought summary
        ReasoningPart("", signature="S1"), ToolCallPart("c1", "f", {}),
        ReasoningPart("", signature="S2"), TextPart("answer"),
        ReasoningPart("unsigned summary"),             # nothing to send back
        ReasoningPart("", signature="S3"),             # nothing follows: alone
    ))
    parts = _body(_request(user("q", id="u1"), a))["contents"][1]["parts"]  # type: ignore[index]
    assert parts == [
        {"text": "I think.", "thought": True, "thoughtSignature": "S0"},
        {"functionCall": {"id": "c1", "name": "f", "args": {}}, "thoughtSignature": "S1"},
        {"text": "answer", "thoughtSignature": "S2"},
        {"text": "", "thoughtSignature": "S3"},
    ]


def test_declarations_tool_config_and_generation_config() -> None:
    schema = {
        "type": "object", "additionalProperties": False, "$schema": "x",
        "properties": {
            "kind": {"const": "a"},
            "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
            "tags": {"type": ["array", "null"], "items": {"$ref": "#/$defs/Tag"}},
        },
        "required": ["kind"],
        "$defs": {"Tag": {"type": "object", "properties": {"name": {"type": "string"}},
                          "additionalProperties": False}},
    }
    req = msgspec.structs.replace(
        _request(user("q", id="u1")),
        tools=(ToolSpec("find", "Finds.", schema), ToolSpec("ping", "", {"type": "object"})),
        tool_choice=ToolChoiceTool("find"),
        model_settings=ModelSettings(max_tokens=50, temperature=0.2, top_p=0.9,
                                     stop=("END",), seed=7),
        provider_options={"google": {"generationConfig": {"thinkingConfig": {"thinkingBudget": 0}},
                                     "safetySettings": []}, "openai": {"n": 3}},
    )
    body = _body(req)
    assert body["tools"] == [{"functionDeclarations": [
        {"name": "find", "description": "Finds.", "parameters": {
            "type": "object", "required": ["kind"],
            "properties": {
                "kind": {"enum": ["a"], "type": "string"},
                "when": {"nullable": True, "type": "string", "format": "date-time"},
                "tags": {"nullable": True, "type": "array", "items": {
                    "type": "object", "properties": {"name": {"type": "string"}}}},
            },
        }},
        {"name": "ping", "description": ""},  # no parameters: left out
    ]}]
    assert body["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["find"]}}
    assert body["generationConfig"] == {
        "maxOutputTokens": 50, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"],
        "seed": 7, "thinkingConfig": {"thinkingBudget": 0}}
    assert body["safetySettings"] == []
    for choice, mode in (("auto", "AUTO"), ("required", "ANY"), ("none", "NONE")):
        b = _body(msgspec.structs.replace(req, tool_choice=choice))
        assert b["toolConfig"] == {"functionCallingConfig": {"mode": mode}}


def test_a_recursive_schema_becomes_an_open_object() -> None:
    node = {"$ref": "#/$defs/Node", "$defs": {"Node": {
        "type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}}
    assert gemini_schema(node) == {"type": "object", "properties": {"next": {"type": "object"}}}


def test_typed_output_is_a_response_schema() -> None:
    so = StructuredOutput({"type": "object", "properties": {"city": {"type": "string"}},
                           "additionalProperties": False, "title": "City"})
    body = _body(msgspec.structs.replace(_request(user("q", id="u1")), structured_output=so))
    assert body["generationConfig"] == {
        "responseMimeType": "application/json",
        "responseSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                           "title": "City"}}


def test_several_candidates_are_refused_before_sending() -> None:
    req = msgspec.structs.replace(
        _request(user("q", id="u1")),
        provider_options={"google": {"generationConfig": {"candidateCount": 2}}})
    with pytest.raises(ProviderError) as e:
        encode_request(req, model="m", stream=False, options=OPTIONS)
    assert e.value.error.error_type == "configuration"


def test_names_and_ids_are_fitted_to_gemini_and_restored() -> None:
    req = msgspec.structs.replace(_request(
        user("q", id="u1"),
        Message(id="a1", role="assistant", parts=(ToolCallPart("call/1", "9lives", {}),)),
        Message(id="t1", role="tool", parts=(ToolResultPart("call/1", "9lives", "ok"),)),
    ), tools=(ToolSpec("9lives", "", {"type": "object"}),))
    codec = GeminiCodec()
    enc = codec.encode(req, model="m", stream=True)
    body = json.loads(enc.body)
    call = body["contents"][1]["parts"][0]["functionCall"]
    assert call["name"] == "_9lives" == body["tools"][0]["functionDeclarations"][0]["name"]
    assert call["id"] != "call/1" and "/" not in call["id"]
    assert body["contents"][2]["parts"][0]["functionResponse"]["id"] == call["id"]
    back = enc.restore(ToolCall(call["id"], call["name"], {}))
    assert back == ToolCall("call/1", "9lives", {})


def test_the_path_names_the_model_and_the_key_is_a_header() -> None:
    codec = GeminiCodec()
    assert codec.path("gemini-2.5-flash", stream=True) == \
        "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert codec.path("models/gemini-2.5-flash", stream=False) == \
        "/models/gemini-2.5-flash:generateContent"
    assert codec.headers("k1") == {"x-goog-api-key": "k1"}
    assert codec.headers(None) == {}


# --- the route ----------------------------------------------------------------------------


def test_the_route_reads_google_then_gemini_key() -> None:
    row = ROUTES["google"]
    assert (row.wire, row.base_url, row.otel_name, row.price_id) == (
        "gemini", "https://generativelanguage.googleapis.com/v1beta", "gcp.gemini", "google")
    both = provider_config("google/gemini-2.5-flash",
                           env={"GOOGLE_API_KEY": "g-key", "GEMINI_API_KEY": "x-key"})
    assert both.endpoint.api_key is not None and both.endpoint.api_key.reveal() == "g-key"
    alt = provider_config("google/gemini-2.5-flash", env={"GEMINI_API_KEY": "x-key"})
    assert alt.endpoint.api_key is not None and alt.endpoint.api_key.reveal() == "x-key"
    assert alt.model == "gemini-2.5-flash" and alt.wire == "gemini"
    moved = provider_config("google/m", env={"GEMINI_API_KEY": "k",
                                             "GOOGLE_BASE_URL": "http://proxy:1/v1beta"})
    assert moved.endpoint.base_url == "http://proxy:1/v1beta"
    with pytest.raises(ProviderConfigError, match="GOOGLE_API_KEY or GEMINI_API_KEY"):
        provider_config("google/m", env={})


# --- decoding ---------------------------------------------------------------------------


def test_thoughts_text_calls_and_usage_from_a_stream() -> None:
    raw = sse(
        _frame([{"text": "Let me", "thought": True}]),
        _frame([{"text": " think.", "thought": True, "thoughtSignature": "SIG"}]),
        _frame([{"text": "Calling."}]),
        _frame([{"functionCall": {"name": "f", "args": {"a": 1}, "id": "g1"}},
                {"functionCall": {"name": "f", "args": {"a": 2}, "id": "g1"}},
                {"functionCall": {"name": "g"}}]),
        _frame([{"text": ""}], "STOP", usageMetadata={
            "promptTokenCount": 100, "candidatesTokenCount": 20, "thoughtsTokenCount": 30,
            "cachedContentTokenCount": 64, "toolUsePromptTokenCount": 5}),
    ).replace(b"\n\n", b"\r\n\r\n")
    events, err = _decode(raw)
    assert err is None
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Let me think."
    assert [e.signature for e in events if isinstance(e, ReasoningEnd)] == ["SIG"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Calling."
    calls = [(c.tool_call_id, c.tool_name, c.args) for c in events if isinstance(c, ToolCall)]
    assert calls == [("g1", "f", {"a": 1}), ("g1_2", "f", {"a": 2}), ("call_r1_2", "g", {})]
    assert events[-1] == ModelFinish("tool-calls", Usage(105, 50, 30, 64), "r1", "gemini-x")


def test_every_split_of_a_recorded_stream_gives_the_same_events() -> None:
    raw = load(ROOT, SIGNED).exchanges[0].decoded_body
    whole = _decode(raw)
    assert whole[1] is None and isinstance(whole[0][-1], ModelFinish)
    for i in range(1, len(raw)):
        codec = GeminiCodec()
        d = ByteStreamDecoder(codec.stream_decoder(Encoded(b""), status=200, request_id=None),
                              lambda e: e, status=200, request_id=None)
        assert d.feed(raw[:i]) + d.feed(raw[i:]) + d.close() == whole[0], i


@pytest.mark.parametrize(("frames", "error_type", "code"), [
    # A blocked prompt: no candidate, the reason in promptFeedback.
    ([{"promptFeedback": {"blockReason": "SAFETY", "safetyRatings": [
        {"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH", "blocked": True}]}}],
     "content_blocked", "SAFETY"),
    ([_frame([{"text": "It was the best of"}]), _frame(None, "RECITATION")],
     "content_blocked", "RECITATION"),
    ([_frame(None, "PROHIBITED_CONTENT")], "content_blocked", "PROHIBITED_CONTENT"),
    # Vertex's Model Armor, and a block-like reason this decoder has never seen.
    ([_frame(None, "MODEL_ARMOR")], "content_blocked", "MODEL_ARMOR"),
    ([_frame([{"text": "Sure"}]), _frame(None, "VIDEO_SAFETY")], "content_blocked",
     "VIDEO_SAFETY"),
    # A reason that ends the answer without one: known, or new to this decoder.
    ([_frame(None, "LANGUAGE")], "no_answer", "LANGUAGE"),
    ([_frame(None, "SOME_FUTURE_REASON")], "no_answer", "SOME_FUTURE_REASON"),
    ([_frame(None, "MALFORMED_FUNCTION_CALL")], "invalid_tool_arguments",
     "MALFORMED_FUNCTION_CALL"),
    # A candidate with no content that says it is done.
    ([_frame(None, "STOP")], "invalid_response", None),
    ([_frame([], "STOP")], "invalid_response", None),
    # Malformed JSON.
    (["data: {\"candidates\": [\n\n"], "invalid_response", None),
    (["data: {\"candidates\": {\"x\": 1}}\n\n"], "invalid_response", None),
    # Cut before the finishReason.
    ([_frame([{"text": "Hel"}]), _frame([{"text": "lo"}])], "incomplete_stream", None),
    # An error frame (a google.rpc status) inside the stream.
    ([{"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}],
     "UNAVAILABLE", "503"),
])
def test_bad_and_blocked_streams_are_typed_errors(
    frames: list[dict[str, object] | str], error_type: str, code: str | None
) -> None:
    events, err = _decode(sse(*frames))
    assert err is not None, events
    assert (err.error_type, err.code) == (error_type, code)
    assert not any(isinstance(e, ModelFinish) for e in events), "a failed call never finishes"


@pytest.mark.parametrize("reason", ["MODEL_ARMOR", "SOME_FUTURE_REASON", "LANGUAGE"])
def test_a_candidate_withheld_for_a_reason_is_never_retried(reason: str) -> None:
    events, err = _decode(sse(_frame(None, reason)))
    assert err is not None and not err.retryable, err
    assert events == []
    with pytest.raises(ProviderError) as info:
        decode_response_body(json.dumps(_frame(None, reason)).encode())
    assert info.value.error == msgspec.structs.replace(err, message=info.value.error.message)
    assert reason in err.message


def test_an_empty_stop_stays_a_retryable_glitch() -> None:
    # An empty candidate that says STOP is Gemini's known transient empty answer.
    _, err = _decode(sse(_frame(None, "STOP")))
    assert err is not None and (err.error_type, err.retryable) == ("invalid_response", True)


@pytest.mark.parametrize(("raw", "reason"), [
    ("STOP", "stop"), ("MAX_TOKENS", "length"), ("OTHER", "other"), ("LANGUAGE", "other"),
    ("SOME_FUTURE_REASON", "other"), ("FINISH_REASON_UNSPECIFIED", "other"),
])
def test_finish_reasons_after_an_answer(raw: str, reason: str) -> None:
    events, err = _decode(sse(_frame([{"text": "Hi"}]), _frame(None, raw)))
    assert err is None and isinstance(events[-1], ModelFinish)
    assert events[-1].finish_reason == reason


def test_blocked_messages_name_reason_and_categories() -> None:
    _, err = _decode(sse({"promptFeedback": {"blockReason": "OTHER", "blockReasonMessage": "no",
                                             "safetyRatings": [{"category": "C1", "blocked": True},
                                                               {"category": "C2"}]}}))
    assert err is not None and err.message == "Gemini blocked the prompt: OTHER (C1): no"
    assert not err.retryable


def test_an_error_frame_before_content_is_retryable_after_content_not() -> None:
    boom: dict[str, object] = {
        "error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    _, before = _decode(sse(boom))
    assert before is not None and before.retryable and before.status == 503
    events, after = _decode(sse(_frame([{"text": "Hi"}]), boom))
    assert after is not None and not after.retryable
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hi"


def test_a_whole_body_and_its_failures() -> None:
    ok = json.dumps(_frame([{"text": "Hi"}], "MAX_TOKENS")).encode()
    events = decode_response_body(ok)
    assert isinstance(events[-1], ModelFinish) and events[-1].finish_reason == "length"
    # MAX_TOKENS before any output (all of it spent thinking) is a finish, not an error.
    spent = decode_response_body(json.dumps(_frame(None, "MAX_TOKENS")).encode())
    assert [type(e) for e in spent] == [ModelFinish]
    for body, kind in ((b"{oops", "invalid_response"),
                       (json.dumps(_frame([{"text": "Hi"}])).encode(), "invalid_response"),
                       (json.dumps({"candidates": []}).encode(), "invalid_response"),
                       (b'{"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}',
                        "INVALID_ARGUMENT")):
        with pytest.raises(ProviderError) as e:
            decode_response_body(body)
        assert e.value.error.error_type == kind


def test_google_rpc_errors_are_classified_with_their_retry_info() -> None:
    raw = load(ROOT, "vercel+ai/packages/google/src/__fixtures__/google-429-retry-info.json")
    ex = raw.exchanges[0]
    err = classify_response(429, {}, ex.decoded_body, now=0.0)
    assert (err.error_type, err.code, err.retryable, err.retry_after) == (
        "RESOURCE_EXHAUSTED", "429", True, 34.4)
    assert "exceeded your current quota" in err.message
    # A Retry-After header wins over the body.
    assert classify_response(429, {"retry-after": "2"}, ex.decoded_body, now=0.0).retry_after == 2
    bad = classify_response(400, {}, b'{"error": {"code": 400, "message": "API key not valid",'
                                     b' "status": "INVALID_ARGUMENT"}}', now=0.0)
    assert (bad.error_type, bad.retryable, bad.retry_after) == ("INVALID_ARGUMENT", False, None)


# --- end to end -------------------------------------------------------------------------


@tool
def get_country() -> str:
    """The user's country."""
    return "Mexico"


PROMPT = "What is the capital of the user country? Call the tool"


def _agent() -> Agent:
    return Agent.create("google/gemini-3-pro-preview", tools=[get_country],
                        retry_policy=RetryPolicy(max_retries=2))


def _queue(server: ReplayServer) -> str:
    """Queue the recorded exchange; the signature Gemini gave turn 1."""
    first, second = load(ROOT, SIGNED).exchanges
    for ex in (first, second):
        server.queue(Reply(ex.status, ex.headers, ex.body, chunks=[1, 3, 50]))
    line = next(ln for ln in first.decoded_body.decode().splitlines() if ln.startswith("data:"))
    sig: str = json.loads(line[5:])["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    return sig


def _check_run(server: ReplayServer, signature: str, text: str) -> None:
    assert text == "The capital of Mexico is Mexico City."
    first, second = (json.loads(s.body) for s in server.seen[-2:])
    assert server.seen[-1].path == \
        "/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse"
    assert server.seen[-1].headers["x-goog-api-key"] == KEY
    model_turn, answer = second["contents"][1], second["contents"][2]
    call = model_turn["parts"][0]
    assert call["thoughtSignature"] == signature  # byte for byte what Gemini signed
    assert call["functionCall"]["name"] == "get_country"
    assert answer["parts"] == [{"functionResponse": {
        "id": call["functionCall"]["id"], "name": "get_country",
        "response": {"output": "Mexico"}}}]
    # The SDK that recorded turn 2 sent the same signature in URL-safe base64.
    recorded = load(ROOT, SIGNED).exchanges[1].request
    assert recorded is not None
    sent_then = recorded["contents"][1]["parts"][0]["thoughtSignature"]  # type: ignore[index]
    assert base64.urlsafe_b64decode(sent_then) == base64.b64decode(signature)
    assert first["tools"][0]["functionDeclarations"][0]["name"] == "get_country"


def test_sync_run_sends_the_signed_call_back(server: ReplayServer) -> None:
    sig = _queue(server)
    resolver = Resolver(base_urls={"google": server.url + "/v1beta"}, api_keys={"google": KEY})
    result = SyncInterpreter(resolve=resolver).run(_agent(), PROMPT)
    resolver.close()
    assert result.status == "finished", result.error
    assert result.usage.input_tokens == 29 + 257
    _check_run(server, sig, result.text)


@pytest.mark.anyio
async def test_async_run_sends_the_signed_call_back(
    server: ReplayServer, anyio_backend: str
) -> None:
    sig = _queue(server)
    resolver = AsyncResolver(base_urls={"google": server.url + "/v1beta"},
                             api_keys={"google": KEY})
    result = await AsyncInterpreter(resolve=resolver).run(_agent(), PROMPT)
    await resolver.aclose()
    assert result.status == "finished", result.error
    _check_run(server, sig, result.text)


def test_mock_transport_sees_the_real_url_and_no_key_in_it() -> None:
    ex = load(ROOT, "pydantic+pydantic-ai/tests/models/cassettes/test_google/"
                    "test_google_model.yaml").exchanges[0]
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers=dict(ex.headers), content=ex.decoded_body)

    client = httpx.Client(transport=httpx.MockTransport(handler))
    p = resolve_provider("google/gemini-2.5-flash", api_key=KEY, stream=False, client=client)
    out = run_sync(p, ModelRequest(model="google/gemini-2.5-flash", system=(),
                                   messages=(user("Hello!", id="u1"),)))
    client.close()
    assert out.error is None and out.text == "Hello! How can I help you today?"
    [req] = seen
    assert str(req.url) == \
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    assert KEY not in str(req.url) and req.headers["x-goog-api-key"] == KEY


def test_503_and_429_are_retried_by_the_policy(server: ReplayServer) -> None:
    rpc = b'{"error": {"code": %d, "message": "later", "status": "%s"}}'
    server.queue(
        Reply(503, JSON, rpc % (503, b"UNAVAILABLE")),
        Reply(429, JSON, load(ROOT, "vercel+ai/packages/google/src/__fixtures__/"
                                    "google-429-retry-info.json").exchanges[0].body),
        Reply(200, SSE, sse(_frame([{"text": "fine"}], "STOP"))),
    )
    waits: list[float] = []
    resolver = Resolver(base_urls={"google": server.url + "/v1beta"}, api_keys={"google": KEY})
    result = SyncInterpreter(resolve=resolver, sleep=waits.append).run(
        Agent.create("google/m", retry_policy=RetryPolicy(max_retries=3)), "hi")
    resolver.close()
    assert result.status == "finished" and result.text == "fine"
    assert len(server.seen) == 3 and waits[1] == 34.4


class Watch(Processor):
    id = "watch"

    def __init__(self) -> None:
        self.seen: list[ApiError] = []

    def process_api_error(self, args: ApiErrorArgs[None]) -> ApiErrorResult[None]:
        self.seen.append(args.error)
        return Continue()


def test_a_blocked_answer_is_offered_to_process_api_error(server: ReplayServer) -> None:
    ex = load(ROOT, "pydantic+pydantic-ai/tests/models/cassettes/test_google/"
                    "test_google_model_safety_settings.yaml").exchanges[0]
    server.queue(Reply(ex.status, ex.headers, ex.body))
    watch = Watch()
    resolver = Resolver(base_urls={"google": server.url + "/v1beta"}, api_keys={"google": KEY})
    result = SyncInterpreter(resolve=resolver).run(
        Agent.create("google/m", error_processors=[watch]), "a joke")
    resolver.close()
    assert result.status != "finished" and result.text == ""
    assert [(e.error_type, e.code) for e in watch.seen] == [("content_blocked", "SAFETY")]


@pytest.mark.parametrize(("reason", "error_type"), [
    ("MODEL_ARMOR", "content_blocked"), ("SOME_FUTURE_REASON", "no_answer")])
def test_a_withheld_answer_is_sent_once_and_offered_to_process_api_error(
    server: ReplayServer, reason: str, error_type: str
) -> None:
    withheld = _frame(None, reason, usageMetadata={"promptTokenCount": 9})
    server.queue(*(Reply(200, SSE, sse(withheld)) for _ in range(3)))
    watch = Watch()
    resolver = Resolver(base_urls={"google": server.url + "/v1beta"}, api_keys={"google": KEY})
    result = SyncInterpreter(resolve=resolver, sleep=lambda s: None).run(
        Agent.create("google/m", error_processors=[watch],
                     retry_policy=RetryPolicy(max_retries=2)), "hi")
    resolver.close()
    assert result.status != "finished" and result.text == ""
    assert len(server.seen) == 1, "the same request would be withheld again"
    assert [(e.error_type, e.code, e.retryable) for e in watch.seen] == [
        (error_type, reason, False)]


@pytest.mark.anyio
async def test_a_withheld_answer_is_sent_once_async(
    server: ReplayServer, anyio_backend: str
) -> None:
    server.queue(*(Reply(200, SSE, sse(_frame(None, "MODEL_ARMOR"))) for _ in range(3)))
    watch = Watch()
    resolver = AsyncResolver(base_urls={"google": server.url + "/v1beta"},
                             api_keys={"google": KEY})
    result = await AsyncInterpreter(resolve=resolver).run(
        Agent.create("google/m", error_processors=[watch],
                     retry_policy=RetryPolicy(max_retries=2, base_delay=0.001)), "hi")
    await resolver.aclose()
    assert result.status != "finished" and len(server.seen) == 1
    assert [(e.error_type, e.code) for e in watch.seen] == [("content_blocked", "MODEL_ARMOR")]


def test_calls_are_priced_from_googles_list_cached_input_cheaper() -> None:
    price = genai_prices()
    at = 1.76e9
    plain = price(PriceQuery("google/gemini-2.5-flash", "gemini-2.5-flash",
                             Usage(1000, 500, 200, 0), at))
    cached = price(PriceQuery("google/gemini-2.5-flash", "gemini-2.5-flash",
                              Usage(1000, 500, 200, 800), at))
    assert plain is not None and cached is not None
    assert cached.output == plain.output and cached.input < plain.input


# --- embeddings -------------------------------------------------------------------------


def _vectors(n: int, dim: int = 3) -> bytes:
    return json.dumps({"embeddings": [{"values": [i + 0.5] * dim} for i in range(n)]}).encode()


def test_embeddings_in_batches_of_a_hundred_with_the_key_in_a_header() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        n = len(json.loads(request.content)["requests"])
        return httpx.Response(200, headers=dict(JSON), content=_vectors(n))

    client = httpx.Client(transport=httpx.MockTransport(handler))
    with GeminiEmbedder(dimensions=3, task_type="RETRIEVAL_DOCUMENT", env={"GEMINI_API_KEY": KEY},
                        client=client) as embedder:
        texts = tuple(f"text {i}" for i in range(150))
        vectors = embedder.embed(texts)
        assert embedder.embed(()) == ()
    assert not client.is_closed  # a client given is its owner's
    client.close()
    assert len(vectors) == 150 and vectors[0] == (0.5, 0.5, 0.5) and vectors[100] == (0.5,) * 3
    assert [len(json.loads(r.content)["requests"]) for r in seen] == [100, 50]
    first = json.loads(seen[0].content)["requests"][0]
    assert first == {"model": "models/gemini-embedding-001", "outputDimensionality": 3,
                     "taskType": "RETRIEVAL_DOCUMENT", "content": {"parts": [{"text": "text 0"}]}}
    assert str(seen[0].url) == "https://generativelanguage.googleapis.com/v1beta/models/" \
        "gemini-embedding-001:batchEmbedContents"
    assert seen[0].headers["x-goog-api-key"] == KEY and KEY not in str(seen[0].url)


def test_embedder_settings_are_checked_when_made() -> None:
    env = {"GOOGLE_API_KEY": KEY}
    with pytest.raises(ValueError, match="dimensions"):
        GeminiEmbedder(dimensions=0, env=env)
    with pytest.raises(ValueError, match="task_type"):
        GeminiEmbedder(task_type="retrieval", env=env)  # type: ignore[arg-type]
    with pytest.raises(ProviderConfigError, match="GOOGLE_API_KEY or GEMINI_API_KEY"):
        GeminiEmbedder(env={})
    with GeminiEmbedder(env=env) as e, pytest.raises(TypeError):
        e.embed(["a list"])  # type: ignore[arg-type]


@pytest.mark.parametrize(("status", "body", "error_type", "retryable"), [
    # A garbled answer is not the embeddings asked for: not retried, as from every embedder.
    (200, _vectors(1), "invalid_response", False),           # one vector for two texts
    (200, json.dumps({"embeddings": [{"values": [1.0]}, {"values": [1.0, 2.0]}]}).encode(),
     "invalid_response", False),
    (200, b"{not json", "invalid_response", False),
    (429, b'{"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}',
     "RESOURCE_EXHAUSTED", True),
    (400, b'{"error": {"code": 400, "message": "bad key ' + KEY.encode() + b'",'
          b' "status": "INVALID_ARGUMENT"}}', "INVALID_ARGUMENT", False),
])
def test_embedding_failures_are_typed_and_scrubbed(
    status: int, body: bytes, error_type: str, retryable: bool
) -> None:
    client = httpx.Client(transport=httpx.MockTransport(
        lambda _: httpx.Response(status, headers=dict(JSON), content=body)))
    embedder = GeminiEmbedder(env={"GOOGLE_API_KEY": KEY}, client=client)
    with pytest.raises(ProviderError) as e:
        embedder.embed(("a", "b"))
    client.close()
    err = e.value.error
    assert (err.error_type, err.retryable) == (error_type, retryable)
    assert KEY not in repr(err)


def test_an_embeddings_answer_past_its_cap_is_refused(server: ReplayServer) -> None:
    server.queue(Reply(200, JSON, _vectors(2, dim=400), chunks=512))
    embedder = GeminiEmbedder(env={"GOOGLE_API_KEY": KEY}, base_url=server.url + "/v1beta",
                              limits=Limits(max_body=1000))
    with pytest.raises(ProviderError) as e:
        embedder.embed(("a", "b"))
    embedder.close()
    assert e.value.error.error_type == "limit_exceeded"
    assert server.seen[-1].path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"


def test_a_dead_embeddings_server_is_a_retryable_connection_error() -> None:
    embedder = GeminiEmbedder(env={"GOOGLE_API_KEY": KEY}, base_url="http://127.0.0.1:9/v1beta",
                              timeouts=Timeouts(connect=1, total=2))
    with pytest.raises(ProviderError) as e:
        embedder.embed(("a",))
    embedder.close()
    assert e.value.error.error_type in ("connection_error", "timeout")
    assert e.value.error.retryable and e.value.__context__ is None


def test_two_signed_thoughts_are_two_reasoning_parts() -> None:
    events, err = _decode(sse(
        _frame([{"text": "one", "thought": True, "thoughtSignature": "A"}]),
        _frame([{"text": "two", "thought": True, "thoughtSignature": "B"}]),
        _frame([{"text": "done"}], "STOP"),
    ))
    assert err is None
    assert [e.signature for e in events if isinstance(e, ReasoningEnd)] == ["A", "B"]


# --- prompt caching: Gemini caches long prefixes by itself ------------------------------


def test_a_prompt_cache_hint_changes_nothing_on_the_wire() -> None:
    plain = _request(user("hi", id="u1"))
    hinted = msgspec.structs.replace(
        plain, model_settings=ModelSettings(prompt_cache=PromptCache()))
    assert _body(hinted) == _body(plain)


def test_a_retry_keeps_the_cached_prefix_byte_for_byte() -> None:
    """Gemini's implicit cache reads a repeated prefix: the retry's request encodes the
    system instruction, the tools and every earlier part to the same bytes, the feedback
    after them."""
    model = ScriptedModel([Say(calls=[call("lookup", q="x")]), Say("a long answer"),
                           Say("short")])
    agent = Agent.create("m", instructions="be brief", tools=[lookup],
                         output_processors=[RetryOnce()])
    result = Simulator(model).run(agent, "tell me").result
    assert result.status == "finished" and result.text == "short"
    _, first, retry = model.requests
    a, b = _body(first), _body(retry)
    assert a["systemInstruction"] == b["systemInstruction"] and a["tools"] == b["tools"]

    def parts(body: dict[str, object]) -> list[str]:
        contents = body["contents"]
        assert isinstance(contents, list)
        return [json.dumps([c["role"], p], sort_keys=True) for c in contents for p in c["parts"]]

    pa, pb = parts(a), parts(b)
    assert len(pb) > len(pa) and pb[: len(pa)] == pa
    assert "say it again, shorter" in pb[-1]
