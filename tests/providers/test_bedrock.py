"""The Bedrock Converse wire format beyond its recorded traffic (test_conformance.py
replays that): the event-stream framing split at every byte, exception frames and HTTP
errors as typed errors, throttling retried by the run's retry policy, SigV4 signatures
checked by botocore over the bytes that arrived, the route's region and credentials
(never shown), and the request encoding. Sync, asyncio and trio."""

from __future__ import annotations

import json
import re
import sys
import zlib
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest

pytest.importorskip("botocore", reason="the Bedrock route needs botocore (the bedrock extra)")

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.eventstream import EventStreamBuffer

from bench.wire_server import aws_event, aws_frame
from interpreters.aio import AsyncInterpreter
from interpreters.observers.otel import provider_of
from interpreters.providers import (
    AsyncHttpProvider,
    AsyncResolver,
    HttpProvider,
    Resolver,
    provider_config,
)
from interpreters.providers.bedrock import (
    EVENT_STREAM,
    BedrockCodec,
    BedrockOptions,
    ConverseStreamDecoder,
    encode_request,
)
from interpreters.providers.codec import ByteStreamDecoder, Encoded
from interpreters.providers.prices import genai_prices
from interpreters.providers.provider import ProviderError
from interpreters.providers.routes import ProviderConfigError
from interpreters.providers.sse import FrameError, SseEvent, SseLimitError
from interpreters.sync import SyncInterpreter
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import RunResult
from pipeline.agent import Agent
from pipeline.tools import tool
from pipeline.values.chunks import (
    ModelEvent,
    ModelFinish,
    ServerToolCall,
    ServerToolResult,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from pipeline.values.cost import PriceQuery
from pipeline.values.messages import (
    FilePart,
    Message,
    ServerToolCallPart,
    ServerToolResultPart,
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
    ToolSpec,
)
from pipeline.values.retry import RetryPolicy
from tests.providers.cassettes import index_files, load, traffic_dir
from tests.providers.helpers import aws_exception, br_text_stream, run_async, run_sync
from tests.providers.server import ReplayServer, Reply
from tests.providers.test_prompt_cache import RetryOnce, lookup

ROOT = traffic_dir()
STREAM = (("content-type", "application/vnd.amazon.eventstream"),)
MODEL = "bedrock/us.amazon.nova-micro-v1:0"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
ENV = {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
       "AWS_SECRET_ACCESS_KEY": SECRET}


def _recorded_streams() -> list[bytes]:
    out = []
    for name in index_files(ROOT):
        for ex in load(ROOT, name).exchanges:
            if EVENT_STREAM.marker in dict(ex.headers).get("content-type", ""):
                out.append(ex.body)
    return out


RECORDED = _recorded_streams()


def _decoder(json_tool: str | None = None, max_event: int = 1 << 20) -> ByteStreamDecoder:
    return ByteStreamDecoder(ConverseStreamDecoder(json_tool=json_tool), lambda e: e,
                             status=200, request_id=None, framing=EVENT_STREAM,
                             max_event=max_event)


def _decode(body: bytes, size: int | None = None, json_tool: str | None = None
            ) -> list[ModelEvent]:
    d = _decoder(json_tool)
    pieces = [body] if size is None else [body[i:i + size] for i in range(0, len(body), size)]
    out = [e for p in pieces for e in d.feed(p)]
    return out + d.close()


def _failure(body: bytes, max_event: int = 1 << 20) -> tuple[list[ModelEvent], ApiError]:
    d = _decoder(max_event=max_event)
    out: list[ModelEvent] = []
    with pytest.raises(ProviderError) as info:
        for i in range(len(body)):
            out += d.feed(body[i:i + 1])
        out += d.close()
        d.check()
    return out, info.value.error


# --- the framing ------------------------------------------------------------------------


def test_the_frame_encoder_writes_recorded_frames_byte_for_byte() -> None:
    """The encoder the tests and bench's server use (bench/wire_server.py)."""
    assert len(RECORDED) >= 4
    frames = 0
    for body in RECORDED:
        buf = EventStreamBuffer()
        buf.add_data(body)
        at = 0
        for message in buf:
            parts = message.to_response_dict()
            mine = aws_frame(dict(parts["headers"]), parts["body"])
            assert body[at:at + len(mine)] == mine
            at += len(mine)
            frames += 1
        assert at == len(body)
    assert frames > 50


@pytest.mark.parametrize("body", RECORDED, ids=range(len(RECORDED)))
def test_recorded_streams_decode_the_same_split_at_every_byte(body: bytes) -> None:
    whole = _decode(body)
    assert isinstance(whole[-1], ModelFinish)
    assert _decode(body, 1) == whole
    assert _decode(body, 7) == whole


def test_a_corrupt_frame_is_an_invalid_response_and_a_huge_one_over_its_cap() -> None:
    body = br_text_stream("Hello", " world")
    bad = bytearray(body)
    bad[60] ^= 0xFF  # inside the first frame: its CRC no longer matches
    events, err = _failure(bytes(bad))
    assert (err.error_type, err.retryable, events) == ("invalid_response", True, [])
    big = aws_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x" * 5000}})
    events, err = _failure(big, max_event=4096)
    assert err.error_type == "limit_exceeded" and events == []


def _typed_frame(headers: list[tuple[str, int, bytes]], payload: bytes) -> bytes:
    """A frame whose headers carry their own type byte and encoded value (aws_frame
    writes strings only)."""
    head = b"".join(bytes([len(k)]) + k.encode() + bytes([t]) + v for k, t, v in headers)
    prelude = (16 + len(head) + len(payload)).to_bytes(4, "big") + len(head).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    body = prelude + head + payload
    return body + zlib.crc32(body).to_bytes(4, "big")


def _string(v: str) -> bytes:
    return len(v.encode()).to_bytes(2, "big") + v.encode()


_EVENT = [(":event-type", 7, _string("contentBlockDelta")),
          (":content-type", 7, _string("application/json")), (":message-type", 7, _string("event"))]
_PAYLOAD = b'{"contentBlockIndex":0,"delta":{"text":"h\xc3\xa9"}}'


def _framed(frame: bytes, pieces: int) -> list[SseEvent] | str:
    """The framer's events for `frame` fed whole (pieces=1) or a byte at a time, or the
    name of the error it raised."""
    framer = EVENT_STREAM.parser(1 << 20)
    out: list[SseEvent] = []
    try:
        if pieces == 1:
            out += framer.feed(frame)
        else:
            for i in range(len(frame)):
                out += framer.feed(frame[i : i + 1])
        out += framer.close()
    except (FrameError, SseLimitError) as e:
        return type(e).__name__ + ": " + str(e).split(":")[0]
    return out


@pytest.mark.parametrize("frame", [
    _typed_frame(_EVENT, _PAYLOAD),
    _typed_frame(_EVENT, b""),
    _typed_frame([], _PAYLOAD),
    _typed_frame([*_EVENT, ("flag", 0, b""), ("n", 4, (7).to_bytes(4, "big"))], _PAYLOAD),
    _typed_frame([(":message-type", 7, _string("exception")),
                  (":exception-type", 7, _string("throttlingException"))], b'{"message":"x"}'),
    _typed_frame([(":message-type", 7, _string("error")), (":error-code", 7, _string("E")),
                  (":error-message", 7, _string("bad"))], b""),
    _typed_frame([*_EVENT, (":event-type", 7, _string("metadata"))], _PAYLOAD),  # twice
    _typed_frame([(":event-type", 7, b"\x00\x09\xff")], _PAYLOAD),  # not UTF-8
    _typed_frame([(":event-type", 7, b"\x01\x00x")], _PAYLOAD),  # longer than its headers
], ids=["event", "empty", "no-headers", "typed-headers", "exception", "error", "twice",
        "not-utf8", "overlong"])
@pytest.mark.parametrize("corrupt", [None, 2, 9, -2])
def test_a_frame_read_whole_is_read_as_botocore_reads_it(frame: bytes, corrupt: int | None) -> None:
    """A read holding one whole frame takes a faster path than botocore's parser; a frame
    split over reads takes botocore's: the two agree on every frame, sound or not."""
    if corrupt is not None:
        bad = bytearray(frame)
        bad[corrupt] ^= 0x40
        frame = bytes(bad)
    whole, split = _framed(frame, 1), _framed(frame, len(frame))
    assert whole == split
    if frame[:4] == len(frame).to_bytes(4, "big") and isinstance(whole, list):
        buf = EventStreamBuffer()
        buf.add_data(frame)
        assert len(list(buf)) == len(whole) == 1


def test_a_stream_cut_short_is_incomplete() -> None:
    body = br_text_stream("Hello")
    events, err = _failure(body[:-10])
    assert err.error_type == "incomplete_stream"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello"


# --- errors in the stream and over HTTP --------------------------------------------------


@pytest.mark.parametrize(("kind", "status", "retryable"), [
    ("throttlingException", 429, True),
    ("modelStreamErrorException", 424, True),
    ("serviceUnavailableException", 503, True),
    ("validationException", 400, False),
])
def test_an_exception_frame_before_any_event_is_the_calls_typed_error(
    kind: str, status: int, retryable: bool
) -> None:
    body = aws_event("messageStart", {"role": "assistant"}) + aws_exception(kind, "Slow down")
    events, err = _failure(body)
    assert events == []
    assert (err.status, err.error_type, err.message, err.retryable) == (
        status, kind[0].upper() + kind[1:], "Slow down", retryable)


def test_an_exception_frame_after_text_breaks_the_stream_without_a_retry() -> None:
    body = br_text_stream("Hel", "lo")
    cut = body.index(aws_event("contentBlockStop", {"contentBlockIndex": 0}))
    events, err = _failure(body[:cut] + aws_exception("throttlingException", "Too many"))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello"
    assert (err.status, err.error_type, err.retryable) == (200, "ThrottlingException", False)


def throttled() -> httpx.Response:
    return httpx.Response(
        429, headers={"x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/coral/",
                      "x-amzn-requestid": "3d5c-req", "content-type": "application/json"},
        json={"message": "Too many requests, please wait before trying again."})


def _transport(replies: list[httpx.Response], seen: list[httpx.Request]) -> httpx.MockTransport:
    queue = list(replies)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    return httpx.MockTransport(handle)


def _ok_stream(*pieces: str) -> httpx.Response:
    return httpx.Response(200, headers=dict(STREAM), content=br_text_stream(*pieces))


def test_an_http_throttling_error_is_typed_from_amzns_headers() -> None:
    seen: list[httpx.Request] = []
    cfg = provider_config(MODEL, env=ENV)
    with httpx.Client(transport=_transport([throttled()], seen)) as client:
        out = run_sync(HttpProvider(cfg.endpoint, cfg.codec(), client=client), _ask())
    assert out.error is not None and not out.events
    assert (out.error.status, out.error.error_type, out.error.request_id, out.error.retryable) == (
        429, "ThrottlingException", "3d5c-req", True)
    assert out.error.message == "Too many requests, please wait before trying again."
    assert str(seen[0].url) == (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.amazon.nova-micro-v1%3A0"
        "/converse-stream")


RETRY = RetryPolicy(max_retries=2, base_delay=0.001, jitter=0.0)
def throttled_in_stream() -> httpx.Response:
    return httpx.Response(
        200, headers=dict(STREAM), content=aws_exception("throttlingException", "Rate exceeded"))


@pytest.mark.parametrize("throttle", [throttled, throttled_in_stream], ids=["http", "stream"])
def test_an_agent_retries_through_throttling(throttle: Callable[[], httpx.Response]) -> None:
    seen: list[httpx.Request] = []
    replies = [throttle(), _ok_stream("Hi", "!")]
    with httpx.Client(transport=_transport(replies, seen)) as client:
        resolver = Resolver(client=client, env=ENV)
        agent = Agent.create(MODEL, retry_policy=RETRY)
        result = SyncInterpreter(resolve=resolver).run(agent, "hello")
        resolver.close()
    assert result.status == "finished", result.error
    assert result.text == "Hi!"
    assert len(seen) == 2
    # Each attempt is signed afresh, over its own bytes.
    assert all(r.headers["authorization"].startswith("AWS4-HMAC-SHA256 ") for r in seen)


@pytest.mark.anyio
async def test_an_agent_retries_through_throttling_async(anyio_backend: str) -> None:
    seen: list[httpx.Request] = []
    replies = [throttled_in_stream(), throttled(), _ok_stream("Hi")]
    async with httpx.AsyncClient(transport=_transport(replies, seen)) as client:
        resolver = AsyncResolver(client=client, env=ENV)
        agent = Agent.create(MODEL, retry_policy=RETRY)
        result = await AsyncInterpreter(resolve=resolver).run(agent, "hello")
        await resolver.aclose()
    assert result.status == "finished", result.error
    assert result.text == "Hi" and len(seen) == 3
    assert result.usage.input_tokens == 5 and result.usage.output_tokens == 2


# --- a recorded conversation, replayed under an agent --------------------------------------

ITER_STREAM = "pydantic+pydantic-ai/tests/models/cassettes/test_bedrock/" \
    "test_bedrock_model_iter_stream.yaml"


@tool
def get_capital(country: str) -> str:
    """Get the capital of a country."""
    return "Paris"


@tool
def get_temperature(city: str) -> str:
    """Get the temperature in a city."""
    return "30°C"


def _recorded_agent() -> tuple[Agent, list[httpx.Response], dict[str, object]]:
    first, second = load(ROOT, ITER_STREAM).exchanges
    replies = [httpx.Response(ex.status, headers=dict(ex.headers), content=ex.body)
               for ex in (first, second)]
    agent = Agent.create(MODEL, instructions="You are a helpful chatbot.",
                         tools=[get_capital, get_temperature])
    assert second.request is not None
    return agent, replies, second.request


def _check_recorded_run(text: str, seen: list[httpx.Request], recorded: dict[str, object]
                        ) -> None:
    assert text.endswith(
        "</thinking>\nThe current temperature in Paris, the capital of France, is 30°C.")
    path = b"/model/us.amazon.nova-micro-v1%3A0/converse-stream"
    assert [r.url.raw_path for r in seen] == [path, path]
    # The tool call and its result went back as the recorded client sent them.
    sent = json.loads(seen[1].content)
    assert sent["messages"] == recorded["messages"]
    assert sent["system"] == recorded["system"]


def test_a_recorded_tool_conversation_replays_under_an_agent() -> None:
    agent, replies, recorded = _recorded_agent()
    seen: list[httpx.Request] = []
    with httpx.Client(transport=_transport(replies, seen)) as client:
        resolver = Resolver(client=client, env=ENV)
        result = SyncInterpreter(resolve=resolver).run(
            agent, "What is the temperature of the capital of France?")
        resolver.close()
    assert result.status == "finished", result.error
    _check_recorded_run(result.text, seen, recorded)


@pytest.mark.anyio
async def test_a_recorded_tool_conversation_replays_under_an_agent_async(
    anyio_backend: str
) -> None:
    agent, replies, recorded = _recorded_agent()
    seen: list[httpx.Request] = []
    async with httpx.AsyncClient(transport=_transport(replies, seen)) as client:
        resolver = AsyncResolver(client=client, env=ENV)
        result = await AsyncInterpreter(resolve=resolver).run(
            agent, "What is the temperature of the capital of France?")
        await resolver.aclose()
    assert result.status == "finished", result.error
    _check_recorded_run(result.text, seen, recorded)


# --- SigV4 over a real socket ------------------------------------------------------------


def _ask(text: str = "hi") -> ModelRequest:
    return ModelRequest(model=MODEL, system=(), messages=(user(text, id="u1"),))


def _verify(server: ReplayServer, env: dict[str, str], region: str = "us-east-1") -> None:
    """botocore recomputes the signature from what arrived: method, path, the headers the
    signature names, and the body."""
    seen = server.seen[-1]
    headers = {k.lower(): v for k, v in seen.headers.items()}
    auth = headers["authorization"]
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert f"/{region}/bedrock/aws4_request" in auth
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "content-type"} <= set(signed)
    url = f"http://{headers['host']}{seen.path}"
    req = AWSRequest(method=seen.method, url=url, data=seen.body,
                     headers={h: headers[h] for h in signed})
    req.context["timestamp"] = headers["x-amz-date"]
    creds = Credentials(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"],
                        env.get("AWS_SESSION_TOKEN"))
    signer = SigV4Auth(creds, "bedrock", region)
    string_to_sign = signer.string_to_sign(req, signer.canonical_request(req))
    assert auth.endswith("Signature=" + signer.signature(string_to_sign, req))
    req.data = seen.body + b" "  # one byte more: another signature
    string_to_sign = signer.string_to_sign(req, signer.canonical_request(req))
    assert not auth.endswith("Signature=" + signer.signature(string_to_sign, req))
    if "AWS_SESSION_TOKEN" in env:
        assert headers["x-amz-security-token"] == env["AWS_SESSION_TOKEN"]
        assert "x-amz-security-token" in signed


def test_requests_are_signed_over_the_bytes_that_arrive(server: ReplayServer) -> None:
    env = {**ENV, "AWS_SESSION_TOKEN": "FQoGZXIvYXdzEXAMPLETOKEN"}
    for stream in (True, False):
        body = br_text_stream("Hé", "llo") if stream else json.dumps({
            "output": {"message": {"role": "assistant", "content": [{"text": "Héllo"}]}},
            "stopReason": "end_turn", "usage": {"inputTokens": 3, "outputTokens": 1}}).encode()
        ct = STREAM if stream else (("content-type", "application/json"),)
        server.queue(Reply(200, ct, body, chunks=1 if stream else None))
        cfg = provider_config(MODEL, base_url=server.url, env=env)
        out = run_sync(HttpProvider(cfg.endpoint, cfg.codec(), stream=stream), _ask("ça va?"))
        assert out.error is None and out.text == "Héllo"
        assert server.seen[-1].path == (
            f"/model/us.amazon.nova-micro-v1%3A0/{'converse-stream' if stream else 'converse'}")
        _verify(server, env)


@pytest.mark.anyio
async def test_requests_are_signed_over_the_bytes_that_arrive_async(
    server: ReplayServer, anyio_backend: str
) -> None:
    env = {**ENV, "AWS_DEFAULT_REGION": "eu-west-3"}
    del env["AWS_REGION"]
    server.queue(Reply(200, STREAM, br_text_stream("a", "b", "c"), chunks=3))
    cfg = provider_config(MODEL, base_url=server.url + "/", env=env)
    out = await run_async(AsyncHttpProvider(cfg.endpoint, cfg.codec()), _ask())
    assert out.error is None and out.text == "abc"
    _verify(server, env, "eu-west-3")


def test_a_bedrock_api_key_is_a_bearer_token_instead_of_a_signature(server: ReplayServer) -> None:
    server.queue(Reply(200, STREAM, br_text_stream("ok")))
    env = {"AWS_REGION": "us-west-2", "AWS_BEARER_TOKEN_BEDROCK": "ABSKQmVkcm9ja0FQSUtleS1"}
    cfg = provider_config(MODEL, base_url=server.url, env=env)
    assert cfg.endpoint.sign is None
    out = run_sync(HttpProvider(cfg.endpoint, cfg.codec()), _ask())
    assert out.error is None and out.text == "ok"
    headers = {k.lower(): v for k, v in server.seen[-1].headers.items()}
    assert headers["authorization"] == "Bearer ABSKQmVkcm9ja0FQSUtleS1"
    assert "x-amz-date" not in headers


# --- the route ---------------------------------------------------------------------------


def test_the_route_takes_its_region_from_the_environment_or_the_base_url() -> None:
    cfg = provider_config(MODEL, env=ENV)
    assert cfg.endpoint.base_url == "https://bedrock-runtime.us-east-1.amazonaws.com"
    assert (cfg.route, cfg.model, cfg.wire) == ("bedrock", "us.amazon.nova-micro-v1:0",
                                                "bedrock-converse")
    env = {**ENV, "AWS_REGION": "", "AWS_DEFAULT_REGION": "ap-south-1"}
    assert provider_config(MODEL, env=env).endpoint.base_url == (
        "https://bedrock-runtime.ap-south-1.amazonaws.com")
    vpc = "https://bedrock-runtime.eu-central-1.amazonaws.com"
    cfg = provider_config(MODEL, env={"BEDROCK_BASE_URL": vpc, "AWS_ACCESS_KEY_ID": "A",
                                      "AWS_SECRET_ACCESS_KEY": "B"})
    assert cfg.endpoint.base_url == vpc
    assert "eu-central-1" in repr(cfg.endpoint.sign)  # the host's region signs
    assert provider_of(MODEL) == ("aws.bedrock", "us.amazon.nova-micro-v1:0")


def test_calls_are_priced_from_the_aws_table() -> None:
    pytest.importorskip("genai_prices", reason="the prices extra")
    price = genai_prices()
    cost = price(PriceQuery(MODEL, None, Usage(1_000_000, 1_000), 1_760_000_000.0))
    assert cost is not None and cost.total > 0


def test_a_missing_or_malformed_region_fails_before_any_request() -> None:
    with pytest.raises(ProviderConfigError, match="AWS_REGION or AWS_DEFAULT_REGION"):
        provider_config(MODEL, env={})
    with pytest.raises(ProviderConfigError, match="not a region name"):
        provider_config(MODEL, env={"AWS_REGION": "evil.com/x"})
    with pytest.raises(ProviderConfigError, match="needs a region"):
        provider_config(MODEL, base_url="http://127.0.0.1:9", env={})


def test_without_botocore_the_route_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "botocore.auth", None)
    with pytest.raises(ProviderConfigError, match=r"pipeline-agents\[bedrock\]"):
        provider_config(MODEL, env=ENV)


class _NoCredentials:
    def get_credentials(self) -> None:
        return None


def test_credentials_are_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = provider_config(MODEL, env=ENV)
    provider = HttpProvider(cfg.endpoint, cfg.codec())
    for text in (repr(cfg), repr(cfg.endpoint), repr(provider), repr(cfg.endpoint.sign)):
        assert SECRET not in text and "AKIDEXAMPLE" not in text
    # No credentials anywhere in the chain: a configuration error, before sending.
    import botocore.session

    monkeypatch.setattr(botocore.session, "get_session", _NoCredentials)
    cfg = provider_config(MODEL, env={"AWS_REGION": "us-east-1"})
    seen: list[httpx.Request] = []
    with httpx.Client(transport=_transport([], seen)) as client:
        out = run_sync(HttpProvider(cfg.endpoint, cfg.codec(), client=client), _ask())
    assert out.error is not None and out.error.error_type == "configuration"
    assert "AWS_ACCESS_KEY_ID" in out.error.message and not seen


# --- encoding ----------------------------------------------------------------------------

WEATHER = ToolSpec("get_weather", "The weather in a city.",
                   {"type": "object", "properties": {"city": {"$ref": "#/$defs/City"}},
                    "$defs": {"City": {"type": "string"}}})


def _conversation() -> ModelRequest:
    return ModelRequest(
        model=MODEL, system=(),
        messages=(
            Message(id="s", role="system", parts=(TextPart("Be brief."),)),
            user("Weather in Paris?", id="u1"),
            Message(id="a1", role="assistant", parts=(
                TextPart("Let me look."), ToolCallPart("call:1/x", "get weather!", {"city": "P"}))),
            Message(id="t1", role="tool", parts=(
                ToolResultPart("call:1/x", "get weather!", {"temp": 21}, is_error=False),)),
            Message(id="u2", role="user", parts=(
                TextPart("And this?"), FilePart("image/png", "iVBORw0KGgo="),
                FilePart("application/pdf", "JVBERi0=", filename="report_2024.pdf"))),
        ),
        tools=(WEATHER,),
        model_settings=ModelSettings(max_tokens=100, temperature=0.2, stop=("END",)),
        provider_options={"bedrock": {"guardrailConfig": {"guardrailIdentifier": "g1"}}},
    )


def test_a_conversation_is_encoded_as_converse_blocks() -> None:
    enc = BedrockCodec().encode(_conversation(), model="m", stream=False)
    body = msgspec.json.decode(enc.body)
    ids = {b["toolUse"]["toolUseId"] for m in body["messages"] for b in m["content"]
           if "toolUse" in b}
    [call_id] = ids
    assert body == {
        "messages": [
            {"role": "user", "content": [{"text": "Weather in Paris?"}]},
            {"role": "assistant", "content": [
                {"text": "Let me look."},
                {"toolUse": {"toolUseId": call_id, "name": "get_weather_", "input": {"city": "P"}}},
            ]},
            {"role": "user", "content": [
                {"toolResult": {"toolUseId": call_id, "content": [{"text": '{"temp":21}'}],
                                "status": "success"}},
                {"text": "And this?"},
                {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}},
                {"document": {"format": "pdf", "name": "report 2024 pdf",
                              "source": {"bytes": "JVBERi0="}}},
            ]},
        ],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 100, "temperature": 0.2, "stopSequences": ["END"]},
        "toolConfig": {
            "tools": [{"toolSpec": {
                "name": "get_weather", "description": "The weather in a city.",
                "inputSchema": {"json": {"type": "object",
                                         "properties": {"city": {"type": "string"}}}}}}],
            "toolChoice": {"auto": {}},
        },
        "guardrailConfig": {"guardrailIdentifier": "g1"},
    }
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", call_id)


def test_tool_choice_none_sends_tools_only_where_the_conversation_needs_them() -> None:
    plain = ModelRequest(model=MODEL, system=(), messages=(user("hi", id="u"),),
                         tools=(WEATHER,), tool_choice="none")
    body, _ = encode_request(plain, options=BedrockOptions())
    assert "toolConfig" not in body
    history = msgspec.structs.replace(_conversation(), tool_choice="none")
    body, _ = encode_request(history, options=BedrockOptions())
    assert "toolChoice" not in body["toolConfig"]  # type: ignore[operator]


def _with_file(part: FilePart) -> ModelRequest:
    return ModelRequest(model=MODEL, system=(), messages=(Message(id="u", role="user", parts=(
        TextPart("Look."), part)),))


@pytest.mark.parametrize(("part", "message"), [
    (FilePart("image/png", "https://example.com/a.png", is_url=True), "a image/png file by URL"),
    (FilePart("audio/wav", "UklGRg=="), "a audio/wav file"),
])
def test_a_part_converse_cannot_carry_is_refused_naming_the_format(
    part: FilePart, message: str
) -> None:
    with pytest.raises(ProviderError, match=f"the Bedrock Converse format cannot send {message}"):
        BedrockCodec().encode(_with_file(part), model="m", stream=True)


def test_files_by_s3_location_and_video_are_sent() -> None:
    for part, block in (
        (FilePart("video/mp4", "s3://bucket/clip.mp4", is_url=True),
         {"video": {"format": "mp4", "source": {"s3Location": {"uri": "s3://bucket/clip.mp4"}}}}),
        (FilePart("application/pdf", "JVBERi0="),
         {"document": {"format": "pdf", "name": "document 1", "source": {"bytes": "JVBERi0="}}}),
    ):
        body = msgspec.json.decode(BedrockCodec().encode(_with_file(part), model="m",
                                                         stream=False).body)
        assert body["messages"] == [{"role": "user", "content": [{"text": "Look."}, block]}]


def test_typed_output_rides_on_a_forced_tool_and_comes_back_as_text() -> None:
    request = msgspec.structs.replace(
        _ask(), structured_output=StructuredOutput({"type": "object"}, name="answer"))
    enc = BedrockCodec().encode(request, model="m", stream=True)
    body = msgspec.json.decode(enc.body)
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "answer"}}
    stream = b"".join((
        aws_event("messageStart", {"role": "assistant"}),
        aws_event("contentBlockStart", {"contentBlockIndex": 0, "start": {
            "toolUse": {"toolUseId": "tooluse_1", "name": "answer"}}}),
        aws_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {
            "toolUse": {"input": '{"city": '}}}),
        aws_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {
            "toolUse": {"input": '"Paris"}'}}}),
        aws_event("contentBlockStop", {"contentBlockIndex": 0}),
        aws_event("messageStop", {"stopReason": "tool_use"}),
        aws_event("metadata", {"usage": {"inputTokens": 9, "outputTokens": 4,
                                         "cacheReadInputTokens": 3}}),
    ))
    events = _decode(stream, 5, json_tool=enc.json_tool)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert json.loads(text) == {"city": "Paris"}
    assert not any(isinstance(e, ToolCall | ToolCallDelta) for e in events)
    finish = events[-1]
    assert isinstance(finish, ModelFinish) and finish.finish_reason == "stop"
    assert finish.usage == Usage(input_tokens=12, output_tokens=4, cached_input_tokens=3)


@pytest.mark.parametrize(("reason", "finish"), [
    ("guardrail_intervened", "content-filter"), ("content_filtered", "content-filter"),
    ("max_tokens", "length"), ("stop_sequence", "stop"), ("something_new", "other"),
])
def test_stop_reasons(reason: str, finish: str) -> None:
    events = _decode(br_text_stream("x", stop=reason))
    assert isinstance(events[-1], ModelFinish) and events[-1].finish_reason == finish


# --- tools the server runs (Nova's code interpreter) --------------------------------------
# The shapes are AWS's: the Nova user guide's "Using built-in tools" example (a toolUse
# block of type `server_tool_use`, then a toolResult block of type
# `nova_code_interpreter_result` whose text is the run's JSON), streamed as botocore's
# bedrock-runtime model says (a contentBlockStart of each, the toolUse input in string
# deltas, the toolResult's blocks as a list in its delta).

USE_ID = "tooluse_WytfF0g1S5qUeEPm0ptOdQ"
CODE = ('"""Calculate the average of the given numbers."""\nnumbers = [10, 24, 2, 3, 43, '
        "52, 13, 68, 6, 7, 902, 82]\nsum_numbers = sum(numbers)\ncount = len(numbers)\n"
        "average = sum_numbers / count\n(sum_numbers, count, average)")
RAN = '{"stdOut":"(1212, 12, 101.0)","stdErr":"","exitCode":0,"isError":false}'
ANSWER = "The average is 101."


def _server_tool_stream(status: str = "success") -> bytes:
    args = json.dumps({"code": CODE})
    return b"".join((
        aws_event("messageStart", {"role": "assistant"}),
        aws_event("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": {
            "toolUseId": USE_ID, "name": "nova_code_interpreter", "type": "server_tool_use"}}}),
        aws_event("contentBlockDelta", {"contentBlockIndex": 0,
                                        "delta": {"toolUse": {"input": args[:50]}}}),
        aws_event("contentBlockDelta", {"contentBlockIndex": 0,
                                        "delta": {"toolUse": {"input": args[50:]}}}),
        aws_event("contentBlockStop", {"contentBlockIndex": 0}),
        aws_event("contentBlockStart", {"contentBlockIndex": 1, "start": {"toolResult": {
            "toolUseId": USE_ID, "type": "nova_code_interpreter_result", "status": status}}}),
        aws_event("contentBlockDelta", {"contentBlockIndex": 1,
                                        "delta": {"toolResult": [{"text": RAN}]}}),
        aws_event("contentBlockStop", {"contentBlockIndex": 1}),
        aws_event("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"text": ANSWER}}),
        aws_event("contentBlockStop", {"contentBlockIndex": 2}),
        aws_event("messageStop", {"stopReason": "end_turn"}),
        aws_event("metadata", {"usage": {"inputTokens": 30, "outputTokens": 60},
                               "metrics": {"latencyMs": 1}}),
    ))


SERVER_BODY = {
    "output": {"message": {"role": "assistant", "content": [
        {"toolUse": {"input": {"code": CODE}, "name": "nova_code_interpreter",
                     "toolUseId": USE_ID, "type": "server_tool_use"}},
        {"toolResult": {"content": [{"text": RAN}], "status": "success", "toolUseId": USE_ID,
                        "type": "nova_code_interpreter_result"}},
        {"text": ANSWER},
    ]}},
    "stopReason": "end_turn", "usage": {"inputTokens": 30, "outputTokens": 60},
}


def test_a_server_tool_and_its_result_are_typed_never_a_call_to_run() -> None:
    events = _decode(_server_tool_stream(), 7)
    assert not any(isinstance(e, ToolCall | ToolCallDelta) for e in events)
    assert [e for e in events if isinstance(e, ServerToolCall | ServerToolResult)] == [
        ServerToolCall(USE_ID, "nova_code_interpreter", {"code": CODE}),
        ServerToolResult(USE_ID, "nova_code_interpreter", RAN),
    ]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ANSWER
    assert isinstance(events[-1], ModelFinish) and events[-1].finish_reason == "stop"
    # The whole body says the same.
    whole = BedrockCodec().decode_body(Encoded(b""), json.dumps(SERVER_BODY).encode(),
                                       status=200, request_id=None)
    assert whole == events


def test_a_failed_server_tool_is_an_error_result() -> None:
    events = _decode(_server_tool_stream(status="error"))
    [result] = [e for e in events if isinstance(e, ServerToolResult)]
    assert result.is_error and result.result == RAN


@pytest.mark.parametrize(("blocks", "value"), [
    ([{"text": "a"}, {"text": "b"}], "ab"),
    ([{"json": {"stdOut": "1"}}], {"stdOut": "1"}),
    ([{"text": "a"}, {"json": [1]}], [{"text": "a"}, {"json": [1]}]),
    ([], ""),
])
def test_a_server_tool_result_is_its_text_its_json_or_its_blocks(
    blocks: list[dict[str, object]], value: object
) -> None:
    body = json.loads(json.dumps(SERVER_BODY))
    body["output"]["message"]["content"][1]["toolResult"]["content"] = blocks
    events = BedrockCodec().decode_body(Encoded(b""), json.dumps(body).encode(),
                                        status=200, request_id=None)
    [result] = [e for e in events if isinstance(e, ServerToolResult)]
    assert result.result == value


def _interpreter_agent(ran: list[str]) -> tuple[Agent, list[httpx.Response]]:
    @tool
    def nova_code_interpreter(code: str) -> str:
        """Never run: the server runs its own."""
        ran.append(code)
        return "local"

    replies = [httpx.Response(200, headers=dict(STREAM), content=_server_tool_stream()),
               _ok_stream("You're welcome.")]
    return Agent.create(MODEL, tools=[nova_code_interpreter]), replies


QUESTION = "What is the average of 10, 24, 2, 3, 43, 52, 13, 68, 6, 7, 902 and 82?"


def test_an_agent_keeps_the_servers_tool_and_runs_nothing() -> None:
    ran: list[str] = []
    seen: list[httpx.Request] = []
    agent, replies = _interpreter_agent(ran)
    with httpx.Client(transport=_transport(replies, seen)) as client:
        resolver = Resolver(client=client, env=ENV)
        interp = SyncInterpreter(resolve=resolver)
        first = interp.run(agent, QUESTION)
        assert first.status == "finished", first.error
        again = interp.run(agent, [*first.messages.messages, user("Thanks!", id="u2")])
        resolver.close()
    _check_server_tool_run(ran, seen, first, again)


@pytest.mark.anyio
async def test_an_agent_keeps_the_servers_tool_and_runs_nothing_async(
    anyio_backend: str,
) -> None:
    ran: list[str] = []
    seen: list[httpx.Request] = []
    agent, replies = _interpreter_agent(ran)
    async with httpx.AsyncClient(transport=_transport(replies, seen)) as client:
        resolver = AsyncResolver(client=client, env=ENV)
        interp = AsyncInterpreter(resolve=resolver)
        first = await interp.run(agent, QUESTION)
        assert first.status == "finished", first.error
        again = await interp.run(agent, [*first.messages.messages, user("Thanks!", id="u2")])
        await resolver.aclose()
    _check_server_tool_run(ran, seen, first, again)


def _check_server_tool_run(ran: list[str], seen: list[httpx.Request], first: RunResult[Any],
                           again: RunResult[Any]) -> None:
    assert ran == [] and len(seen) == 2, "one call per turn: nothing ran locally"
    assert first.text == ANSWER
    answer = first.messages.messages[-1]
    assert answer.parts == (
        ServerToolCallPart(USE_ID, "nova_code_interpreter", {"code": CODE}),
        ServerToolResultPart(USE_ID, "nova_code_interpreter", RAN), TextPart(ANSWER))
    assert again.status == "finished" and again.text == "You're welcome."
    # The next turn sends the answer's text; the server's own record stays with us.
    sent = json.loads(seen[1].content)["messages"]
    assert sent[1] == {"role": "assistant", "content": [{"text": ANSWER}]}
    assert USE_ID not in seen[1].content.decode()


# --- prompt caching ----------------------------------------------------------------------

POINT = {"cachePoint": {"type": "default"}}


def _cached(cache: PromptCache) -> dict[str, Any]:
    request = msgspec.structs.replace(
        _conversation(), model_settings=ModelSettings(prompt_cache=cache), provider_options=None)
    out = msgspec.json.decode(BedrockCodec().encode(request, model="m", stream=True).body)
    assert isinstance(out, dict)
    return out


def test_cache_points_follow_the_tools_the_system_prompt_and_the_last_message() -> None:
    b = _cached(PromptCache())
    assert b["toolConfig"]["tools"][-1] == POINT and len(b["toolConfig"]["tools"]) == 2
    assert b["system"] == [{"text": "Be brief."}, POINT]
    assert [m["content"][-1] == POINT for m in b["messages"]] == [False, False, True]
    b = _cached(PromptCache(tools=False, system=False, messages=2, ttl="1h"))
    hour = {"cachePoint": {"type": "default", "ttl": "1h"}}
    assert POINT not in b["toolConfig"]["tools"] and POINT not in b["system"]
    assert [m["content"][-1] == hour for m in b["messages"]] == [False, True, True]
    assert "cachePoint" not in json.dumps(_cached_none())


def _cached_none() -> object:
    return msgspec.json.decode(BedrockCodec().encode(_conversation(), model="m",
                                                     stream=True).body)


def test_a_retry_keeps_the_cached_prefix_byte_for_byte() -> None:
    """As on Anthropic (tests/providers/test_prompt_cache.py): the retry's request is the
    first one's with the feedback after it, so every block before it, the tools and the
    system prompt encode the same (cache points aside: one moves to the new last turn)."""
    model = ScriptedModel([Say(calls=[call("lookup", q="x")]), Say("a long answer"),
                           Say("short")])
    agent = Agent.create("bedrock/m", instructions="be brief", tools=[lookup],
                         output_processors=[RetryOnce()],
                         model_settings=ModelSettings(prompt_cache=PromptCache()))
    result = Simulator(model).run(agent, "tell me").result
    assert result.status == "finished" and result.text == "short"
    _, first, retry = model.requests
    a, b = (msgspec.json.decode(BedrockCodec().encode(r, model="m", stream=True).body)
            for r in (first, retry))
    assert a["system"] == b["system"] and a["toolConfig"] == b["toolConfig"]

    def blocks(body: dict[str, Any]) -> list[str]:
        return [json.dumps([m["role"], c], sort_keys=True)
                for m in body["messages"] for c in m["content"] if c != POINT]

    assert len(blocks(b)) > len(blocks(a)) and blocks(b)[: len(blocks(a))] == blocks(a)
    assert "say it again, shorter" in blocks(b)[-1]
