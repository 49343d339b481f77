"""Provider streams at the edges: thinking tokens, `n > 1`, error frames before content."""

from __future__ import annotations

import json

import pytest

from effects import Continue, Retry
from interpreters.aio import AsyncInterpreter
from interpreters.providers import (
    AnthropicCodec,
    AsyncResolver,
    OpenAIChatCodec,
    Resolver,
)
from interpreters.providers.codec import Encoded
from interpreters.providers.errors import stream_error
from interpreters.providers.provider import ProviderError
from interpreters.sync import SyncInterpreter
from pipeline.agent import Agent
from pipeline.processor import ApiErrorArgs, ApiErrorResult, Processor
from pipeline.values.chunks import ModelFinish, Usage
from pipeline.values.messages import user
from pipeline.values.model import ApiError, ModelRequest
from pipeline.values.result import ApiFailed, StreamFailed
from pipeline.values.retry import RetryPolicy
from tests.providers.helpers import KEY, oa_chunk, oa_text_stream, sse
from tests.providers.server import ReplayServer, Reply
from tests.providers.test_codecs import decode


def _an_usage(**usage: object) -> bytes:
    return sse(
        {"type": "message_start", "message": {"id": "msg", "model": "m", "usage": {
            "input_tokens": 10, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": usage},
        {"type": "message_stop"},
    )


def test_anthropic_thinking_tokens_count_as_reasoning_tokens() -> None:
    raw = _an_usage(output_tokens=70, output_tokens_details={"thinking_tokens": 50})
    fin = decode(AnthropicCodec(), Encoded(b""), raw)[-1]
    assert isinstance(fin, ModelFinish)
    assert fin.usage == Usage(input_tokens=10, output_tokens=70, reasoning_tokens=50)


def test_anthropic_thinking_tokens_in_a_whole_body() -> None:
    body = (b'{"type":"message","id":"m","model":"c","content":[{"type":"text","text":"x"}],'
            b'"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":9,'
            b'"output_tokens_details":{"thinking_tokens":4}}}')
    fin = AnthropicCodec().decode_body(Encoded(b""), body, status=200, request_id=None)[-1]
    assert isinstance(fin, ModelFinish)
    assert fin.usage.reasoning_tokens == 4


@pytest.mark.parametrize("codec", [OpenAIChatCodec(), AnthropicCodec()])
@pytest.mark.parametrize("section", ["openai", "anthropic", "openai-compatible"])
def test_n_above_one_is_a_configuration_error(
    codec: OpenAIChatCodec | AnthropicCodec, section: str
) -> None:
    req = ModelRequest(model="x/m", system=(), messages=(user("hi", id="u"),),
                       provider_options={section: {"n": 3}})
    sections = codec.options.option_sections
    if section not in sections:
        codec.encode(req, model="m", stream=True)  # not this codec's section: ignored
        return
    with pytest.raises(ProviderError) as info:
        codec.encode(req, model="m", stream=True)
    err = info.value.error
    assert (err.error_type, err.retryable, err.status) == ("configuration", False, None)
    assert "n" in err.message and "3" in err.message


def test_n_of_one_is_fine() -> None:
    req = ModelRequest(model="x/m", system=(), messages=(user("hi", id="u"),),
                       provider_options={"openai": {"n": 1}})
    OpenAIChatCodec().encode(req, model="m", stream=True)


# --- 6. an error frame inside a 200 stream ------------------------------------------------

SSE = (("content-type", "text/event-stream"),)
GROQ_FRAME = sse({"error": {
    "message": "Failed to call a function. Please adjust your prompt.",
    "type": "invalid_request_error", "code": "tool_use_failed",
    "failed_generation": '<function=get_weather{"city": "Paris"}</function>'}})
OPENROUTER_FRAME = sse({"id": "gen-1", "object": "chat.completion.chunk",
                        "error": {"code": 502, "message": "Provider returned error"},
                        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                     "finish_reason": None}]})


class FixToolCall(Processor):
    """Retries once after a tool_use_failed, with a hint appended (as pydantic-ai does)."""

    id = "fix-tool-call"

    def __init__(self) -> None:
        self.seen: list[ApiError] = []

    def process_api_error(self, args: ApiErrorArgs[None]) -> ApiErrorResult[None]:
        self.seen.append(args.error)
        if args.error.code == "tool_use_failed" and args.retry_count == 0:
            hint = user("Call the tool with valid JSON arguments.", id="hint")
            return Retry(args.message_list.add(hint))
        return Continue()


def _resolver(server: ReplayServer) -> Resolver:
    return Resolver(base_urls={"groq": server.url + "/v1", "openrouter": server.url + "/v1"},
                    api_keys={"groq": KEY, "openrouter": KEY})


def test_an_error_frame_before_content_is_an_api_error_offered_to_processors(
    server: ReplayServer,
) -> None:
    server.queue(Reply(200, SSE, GROQ_FRAME), Reply(200, SSE, oa_text_stream("Sunny.")))
    fix = FixToolCall()
    resolver = _resolver(server)
    result = SyncInterpreter(resolve=resolver).run(
        Agent.create("groq/m", error_processors=[fix]), "Weather in Paris?")
    resolver.close()
    assert result.status == "finished", result.error
    assert result.text == "Sunny." and result.api_error_retry_count == 1
    [err] = fix.seen
    assert (err.status, err.error_type, err.code) == (400, "invalid_request_error",
                                                      "tool_use_failed")
    assert not err.retryable
    second = json.loads(server.seen[1].body)
    assert second["messages"][-1]["content"] == "Call the tool with valid JSON arguments."


@pytest.mark.anyio
async def test_the_same_under_the_async_interpreter(
    server: ReplayServer, anyio_backend: str
) -> None:
    server.queue(Reply(200, SSE, GROQ_FRAME), Reply(200, SSE, oa_text_stream("Sunny.")))
    fix = FixToolCall()
    resolver = AsyncResolver(base_urls={"groq": server.url + "/v1"}, api_keys={"groq": KEY})
    result = await AsyncInterpreter(resolve=resolver).run(
        Agent.create("groq/m", error_processors=[fix]), "Weather in Paris?")
    await resolver.aclose()
    assert result.status == "finished", result.error
    assert [(e.status, e.code) for e in fix.seen] == [(400, "tool_use_failed")]


def test_a_transient_error_frame_before_content_is_retried_by_the_policy(
    server: ReplayServer,
) -> None:
    server.queue(Reply(200, SSE, OPENROUTER_FRAME), Reply(200, SSE, oa_text_stream("Hi.")))
    waits: list[float] = []
    fix = FixToolCall()
    resolver = _resolver(server)
    result = SyncInterpreter(resolve=resolver, sleep=waits.append).run(
        Agent.create("openrouter/m", error_processors=[fix],
                     retry_policy=RetryPolicy(max_retries=2)), "hi")
    resolver.close()
    assert result.status == "finished" and result.text == "Hi."
    assert len(waits) == 1 and fix.seen == []  # retried by the policy, not the processors


def test_the_frame_status_and_code_are_the_errors() -> None:
    err = stream_error(200, b'{"error":{"code":502,"message":"upstream"}}', started=False,
                       request_id=None)
    assert (err.status, err.code, err.retryable) == (502, "502", True)
    err = stream_error(200, b'{"type":"error","error":{"type":"overloaded_error",'
                            b'"message":"Overloaded"}}', started=False, request_id=None)
    assert (err.status, err.error_type, err.retryable) == (529, "overloaded_error", True)
    err = stream_error(200, b'{"error":{"message":"?"}}', started=False, request_id=None)
    assert err.status == 200  # nothing in the frame says otherwise


def test_an_error_frame_after_content_stays_a_stream_failure(server: ReplayServer) -> None:
    body = sse(oa_chunk({"content": "Sun"})) + GROQ_FRAME
    server.queue(Reply(200, SSE, body))
    fix = FixToolCall()
    resolver = _resolver(server)
    result = SyncInterpreter(resolve=resolver).run(
        Agent.create("groq/m", error_processors=[fix]), "Weather?")
    resolver.close()
    assert result.status == "failed" and isinstance(result.error, StreamFailed)
    assert fix.seen == [] and len(server.seen) == 1
    assert result.messages.messages[-1].incomplete


def test_a_run_asking_for_several_choices_fails_before_any_request(server: ReplayServer) -> None:
    resolver = Resolver(base_urls={"openai": server.url + "/v1"}, api_keys={"openai": KEY})
    agent = Agent.create("openai/m", provider_options={"openai": {"n": 2}})
    result = SyncInterpreter(resolve=resolver).run(agent, "hi")
    resolver.close()
    assert result.status == "failed" and isinstance(result.error, ApiFailed)
    assert result.error.error.error_type == "configuration"
    assert "n=2" in result.error.error.message
    assert server.seen == []
