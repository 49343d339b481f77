"""Faults from the replay server, through the sync and the async provider alike.

Each test queues its replies twice (one run per path) and checks both outcomes: a broken
stream is never a complete answer (no ModelFinish), the error says what broke and
whether a retry is safe (only when nothing was delivered), and retry hints are read.
"""

from __future__ import annotations

import email.utils
import json

import httpx
import pytest

from interpreters.providers import HttpProvider, Timeouts, provider_config, resolve_provider
from interpreters.providers.provider import ProviderError
from pipeline.values.chunks import ModelFinish, TextDelta, ToolCall, ToolCallDelta
from tests.providers.helpers import (
    KEY,
    Outcome,
    an_text_stream,
    ask,
    both,
    oa_chunk,
    oa_text_stream,
    run_sync,
    sse,
)
from tests.providers.server import ReplayServer, Reply

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # slow: every fault, both interpreters

SSE = (("content-type", "text/event-stream"),)
JSON = (("content-type", "application/json"),)
FAST = Timeouts(connect=2.0, read=2.0, write=2.0, pool=2.0)


def twice(server: ReplayServer, *replies: Reply) -> None:
    server.queue(*replies, *replies)


def broken(o: Outcome) -> None:
    """What every failed call looks like: an error and no finish."""
    assert o.error is not None
    assert not o.finished


async def test_disconnect_mid_stream_keeps_partial_text_and_is_not_retryable(
    server: ReplayServer, anyio_backend: str
) -> None:
    body = oa_text_stream("Hello", " wor", "ld")
    cut = body.index(b"\n\n", body.index(b"wor")) + 10  # inside the third frame
    twice(server, Reply(200, SSE, body, chunks=40, cut_after=cut))
    for o in await both(server.url, timeouts=FAST):
        broken(o)
        assert o.error is not None
        assert o.error.status == 200 and o.error.error_type == "connection_lost"
        assert not o.error.retryable, "events were delivered: a retry would repeat them"
        assert o.text == "Hello wor"


async def test_disconnect_before_any_event_is_retryable(
    server: ReplayServer, anyio_backend: str
) -> None:
    twice(server, Reply(200, SSE, oa_text_stream("Hello"), chunks=5, cut_after=12))
    for o in await both(server.url, timeouts=FAST):
        broken(o)
        assert o.error is not None and o.error.retryable
        assert o.events == []


async def test_clean_end_without_done_marker_is_broken(
    server: ReplayServer, anyio_backend: str
) -> None:
    body = oa_text_stream("Hi")
    body = body[: body.index(b"data: [DONE]")]  # everything else, properly terminated
    twice(server, Reply(200, SSE, body, chunks=16))
    for o in await both(server.url, timeouts=FAST):
        broken(o)
        assert o.error is not None and o.error.error_type == "incomplete_stream"
        assert o.text == "Hi" and not o.error.retryable


async def test_anthropic_stream_without_message_stop_is_broken(
    server: ReplayServer, anyio_backend: str
) -> None:
    body = an_text_stream("a", "b")
    body = body[: body.index(b"event: message_stop")]
    twice(server, Reply(200, SSE, body, chunks=33))
    for o in await both(server.url, "anthropic", timeouts=FAST):
        broken(o)
        assert o.error is not None and o.error.error_type == "incomplete_stream"
        assert o.text == "ab"


async def test_slow_drip_past_read_timeout(server: ReplayServer, anyio_backend: str) -> None:
    body = an_text_stream("one", "two", "three")
    first = body.index(b"event: content_block_delta", body.index(b"\"one\""))
    twice(server, Reply(200, SSE, body, chunks=[first, 10_000], pause=0.6))
    for o in await both(server.url, "anthropic", timeouts=Timeouts(read=0.2)):
        broken(o)
        assert o.error is not None and o.error.error_type == "read_timeout"
        assert o.text == "one" and not o.error.retryable


async def test_slow_drip_within_read_timeout_completes(
    server: ReplayServer, anyio_backend: str
) -> None:
    # The read timeout bounds the silence between reads, not the length of the answer.
    twice(server, Reply(200, SSE, an_text_stream("a", "b", "c"), chunks=120, pause=0.05))
    for o in await both(server.url, "anthropic", timeouts=Timeouts(read=1.0)):
        assert o.error is None and o.finished and o.text == "abc"


async def test_429_with_retry_after_then_success(
    server: ReplayServer, anyio_backend: str
) -> None:
    err = json.dumps({"error": {"message": "Rate limit reached for gpt-4o", "type": "requests",
                                "code": "rate_limit_exceeded"}}).encode()
    for _ in range(2):
        server.queue(
            Reply(429, (*JSON, ("retry-after", "2"), ("x-request-id", "req_429")), err),
            Reply(200, SSE, oa_text_stream("ok")),
        )
    # Each attempt is one call: the first fails retryably with the server's hint, the
    # retry (the loop's job) succeeds. The calls interleave: sync, async per pair.
    sync_first, async_first = await both(server.url, timeouts=FAST)
    first, second = sync_first, async_first
    assert first.error is not None
    assert (first.error.status, first.error.retryable, first.error.retry_after) == (429, True, 2.0)
    assert first.error.code == "rate_limit_exceeded" and first.error.request_id == "req_429"
    assert second.error is None and second.text == "ok" and second.finished
    again = await both(server.url, timeouts=FAST)
    assert again[0].error is not None and again[0].error.retry_after == 2.0
    assert again[1].error is None and again[1].text == "ok"


async def test_retry_after_as_http_date_and_ms(server: ReplayServer, anyio_backend: str) -> None:
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    twice(server, Reply(503, (*JSON, ("retry-after", date)), b'{"error":{"message":"busy"}}'))
    for o in await both(server.url, timeouts=FAST, clock=lambda: now):
        assert o.error is not None and o.error.retryable
        assert o.error.retry_after == pytest.approx(30.0)
    twice(server, Reply(429, (*JSON, ("retry-after-ms", "1500"), ("retry-after", "9")), b"{}"))
    for o in await both(server.url, timeouts=FAST):
        assert o.error is not None and o.error.retry_after == 1.5


async def test_500_three_times_each_retryable(server: ReplayServer, anyio_backend: str) -> None:
    body = b'{"error":{"message":"The server had an error","type":"server_error"}}'
    for _ in range(3):
        twice(server, Reply(500, JSON, body))
        for o in await both(server.url, timeouts=FAST):
            broken(o)
            assert o.error is not None
            assert (o.error.status, o.error.error_type, o.error.retryable) == (
                500, "server_error", True)
    assert len(server.seen) == 6, "one request per call: the provider itself never retries"


async def test_529_overloaded(server: ReplayServer, anyio_backend: str) -> None:
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    twice(server, Reply(529, (*JSON, ("request-id", "req_529")), body))
    for o in await both(server.url, "anthropic", timeouts=FAST):
        assert o.error is not None
        assert (o.error.status, o.error.error_type, o.error.retryable) == (
            529, "overloaded_error", True)
        assert o.error.message == "Overloaded" and o.error.request_id == "req_529"


async def test_x_should_retry_overrides_status(server: ReplayServer, anyio_backend: str) -> None:
    twice(server, Reply(400, (*JSON, ("x-should-retry", "true")), b"{}"))
    for o in await both(server.url, timeouts=FAST):
        assert o.error is not None and o.error.retryable
    twice(server, Reply(503, (*JSON, ("x-should-retry", "false"), ("retry-after", "3")), b"{}"))
    for o in await both(server.url, timeouts=FAST):
        assert o.error is not None and not o.error.retryable and o.error.retry_after is None


async def test_garbage_sse_lines_are_ignored(server: ReplayServer, anyio_backend: str) -> None:
    clean = oa_text_stream("Hel", "lo")
    noisy = (
        b": keep-alive comment\r\n\r\n"
        b"garbage without a colon\n"
        b"foo: an unknown field\n"
        b"retry: not-a-number\n"
        b"id: 7\n\n"
        + clean.replace(b"\n\n", b"\n: mid-frame comment\nunknown: x\n\n", 1)
        + b"\n\n"
    )
    twice(server, Reply(200, SSE, noisy, chunks=[3, 1, 11]))
    for o in await both(server.url, timeouts=FAST):
        assert o.error is None and o.text == "Hello" and o.finished


async def test_invalid_json_in_data_frame(server: ReplayServer, anyio_backend: str) -> None:
    body = sse(oa_chunk({"content": "partial"}), 'data: {"choices": [{"delta": \n\n',
               "data: [DONE]\n\n")
    twice(server, Reply(200, SSE, body))
    for o in await both(server.url, timeouts=FAST):
        broken(o)
        assert o.error is not None
        assert (o.error.status, o.error.error_type, o.error.retryable) == (
            200, "invalid_response", False)
        assert o.error.body is not None and '"delta"' in o.error.body
        assert o.text == "partial"


async def test_invalid_json_before_anything_delivered_is_retryable(
    server: ReplayServer, anyio_backend: str
) -> None:
    twice(server, Reply(200, SSE, b"data: <html>oops</html>\n\n"))
    for o in await both(server.url, timeouts=FAST):
        assert o.error is not None and o.error.error_type == "invalid_response"
        assert o.error.retryable


async def test_event_error_on_a_200_stream_anthropic(
    server: ReplayServer, anyio_backend: str
) -> None:
    frames = an_text_stream("Hi")
    cut = frames.index(b"event: content_block_stop")
    err = (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
           b'"message":"Overloaded"},"request_id":"req_midstream"}\n\n')
    twice(server, Reply(200, SSE, frames[:cut] + err, chunks=64))
    for o in await both(server.url, "anthropic", timeouts=FAST):
        broken(o)
        assert o.error is not None
        assert (o.error.status, o.error.error_type, o.error.message) == (
            200, "overloaded_error", "Overloaded")
        assert o.error.request_id == "req_midstream"
        assert not o.error.retryable and o.text == "Hi"


async def test_event_error_before_content_is_retryable_when_transient(
    server: ReplayServer, anyio_backend: str
) -> None:
    body = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m"}}\n\n'
            b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
            b'"message":"Overloaded"}}\n\n')
    twice(server, Reply(200, SSE, body))
    for o in await both(server.url, "anthropic", timeouts=FAST):
        assert o.error is not None and o.error.retryable and o.events == []


async def test_event_error_on_a_200_stream_openai(
    server: ReplayServer, anyio_backend: str
) -> None:
    body = sse(oa_chunk({"content": "x"})) + (
        b'event: error\ndata: {"error":{"message":"upstream failed","type":"server_error"}}\n\n')
    twice(server, Reply(200, SSE, body))
    for o in await both(server.url, timeouts=FAST):
        broken(o)
        assert o.error is not None
        assert (o.error.error_type, o.error.message, o.error.retryable) == (
            "server_error", "upstream failed", False)


async def test_connection_refused_is_retryable(anyio_backend: str) -> None:
    srv = ReplayServer()
    url = srv.url
    srv.close()  # nothing listens there any more
    for o in await both(url, timeouts=FAST):
        assert o.error is not None
        assert (o.error.status, o.error.error_type, o.error.retryable) == (
            None, "connection_error", True)


async def test_no_response_is_retryable(server: ReplayServer, anyio_backend: str) -> None:
    twice(server, Reply(no_response=True))
    for o in await both(server.url, timeouts=FAST):
        assert o.error is not None and o.error.retryable and o.error.status is None


async def test_truncated_tool_arguments_never_become_a_tool_call(
    server: ReplayServer, anyio_backend: str
) -> None:
    def calls(finish: str) -> bytes:
        return sse(
            oa_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                      "function": {"name": "get_weather"}}]}),
            oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Par'}}]}),
            oa_chunk(finish=finish),
            "data: [DONE]\n\n",
        )
    twice(server, Reply(200, SSE, calls("tool_calls")))
    for o in await both(server.url, timeouts=FAST):
        broken(o)
        assert o.error is not None and o.error.error_type == "invalid_tool_arguments"
        assert not any(isinstance(e, ToolCall) for e in o.events)
        # The first delta (no arguments yet) announced the call; the fragment followed.
        deltas = [e for e in o.events if isinstance(e, ToolCallDelta)]
        assert [d.args_delta for d in deltas] == ["", '{"city": "Par']
    # Cut by the token limit: a complete answer that ends in "length", with no call.
    twice(server, Reply(200, SSE, calls("length")))
    for o in await both(server.url, timeouts=FAST):
        assert o.error is None
        assert isinstance(o.events[-1], ModelFinish) and o.events[-1].finish_reason == "length"
        assert not any(isinstance(e, ToolCall) for e in o.events)


async def test_anthropic_truncated_tool_input(server: ReplayServer, anyio_backend: str) -> None:
    def body(stop: str) -> bytes:
        return sse(
            {"type": "message_start", "message": {"id": "msg", "model": "m"}},
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "input_json_delta", "partial_json": '{"a": [1, 2'}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": stop},
             "usage": {"output_tokens": 9}},
            {"type": "message_stop"},
        )
    twice(server, Reply(200, SSE, body("tool_use")))
    for o in await both(server.url, "anthropic", timeouts=FAST):
        broken(o)
        assert o.error is not None and o.error.error_type == "invalid_tool_arguments"
        assert not any(isinstance(e, ToolCall) for e in o.events)
    twice(server, Reply(200, SSE, body("max_tokens")))
    for o in await both(server.url, "anthropic", timeouts=FAST):
        assert o.error is None and not any(isinstance(e, ToolCall) for e in o.events)
        assert isinstance(o.events[-1], ModelFinish) and o.events[-1].finish_reason == "length"


async def test_error_json_on_a_200_response(server: ReplayServer, anyio_backend: str) -> None:
    # Some compatible servers answer a stream request with a JSON error and status 200.
    twice(server, Reply(200, JSON, b'{"error":{"message":"model is loading","code":503}}'))
    for o in await both(server.url, timeouts=FAST):
        assert o.error is not None and o.error.message == "model is loading"
        assert o.error.retryable and o.error.code == "503"


async def test_server_ignoring_stream_true_still_decodes(
    server: ReplayServer, anyio_backend: str
) -> None:
    body = json.dumps({"id": "c1", "model": "m", "choices": [
        {"index": 0, "message": {"content": "whole"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
    twice(server, Reply(200, (("content-type", "text/plain"),), b"\n  " + body, chunks=1))
    for o in await both(server.url, timeouts=FAST):
        assert o.error is None and o.text == "whole" and o.finished


def test_closing_the_stream_early_releases_the_connection(server: ReplayServer) -> None:
    # One connection in the pool: if the abandoned stream kept it, the next call could not
    # get a connection and would fail with a pool timeout.
    body = oa_text_stream(*(f"w{i} " for i in range(200)))
    server.queue(Reply(200, SSE, body, chunks=64), Reply(200, SSE, oa_text_stream("next")))
    client = httpx.Client(limits=httpx.Limits(max_connections=1),
                          timeout=httpx.Timeout(2.0, pool=0.5))
    cfg = provider_config("openai/m", base_url=server.url + "/v1", api_key=KEY)
    p = HttpProvider(cfg.endpoint, cfg.codec(), client=client)
    it = iter(p.stream(ask()))
    first = [next(it), next(it)]
    assert isinstance(first[1], TextDelta)
    close = getattr(it, "close")  # noqa: B009 - a generator, typed as an Iterator
    close()
    again = run_sync(p, ask())
    assert again.error is None and again.text == "next"
    assert not client.is_closed, "a client passed in is the caller's to close"
    client.close()


def test_provider_does_not_retry_by_itself(server: ReplayServer) -> None:
    server.queue(Reply(503, JSON, b"{}"), Reply(200, SSE, oa_text_stream("late")))
    p = resolve_provider("openai/m", base_url=server.url + "/v1", api_key=KEY)
    with pytest.raises(ProviderError) as info:
        list(p.stream(ask()))
    assert info.value.error.status == 503 and len(server.seen) == 1
    p.close()
