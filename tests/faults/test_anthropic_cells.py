"""Fault matrix, the Anthropic Messages format: the stream cells whose decoding differs
from the OpenAI format (no `[DONE]`, typed events), through both interpreters, after a
tool step. The transport cells do not depend on the format (see test_transport)."""

from __future__ import annotations

import json

import pytest

from interpreters.providers import Limits, Timeouts
from tests.faults.harness import JSON, SSE, agent, both, expect
from tests.providers.helpers import an_text_stream, sse
from tests.providers.server import ReplayServer, Reply

pytestmark = pytest.mark.anyio

AN = agent(route="anthropic")
SHORT = Timeouts(connect=2.0, read=2.0, write=2.0, pool=2.0, total=0.4)


def start(*pieces: str) -> bytes:
    """An Anthropic stream up to and including the text deltas (no stop events)."""
    body = an_text_stream(*pieces)
    return body[: body.index(b"event: content_block_stop")]


async def test_anthropic_status_with_retry_after(server: ReplayServer, anyio_backend: str) -> None:
    body = json.dumps({"type": "error", "error": {"type": "overloaded_error",
                                                  "message": "Overloaded"}}).encode()
    reply = Reply(529, (*JSON, ("retry-after", "2"), ("request-id", "req_1")), body)
    runs = await both(server, reply, reply, ag=agent(retries=1, route="anthropic"))
    expect(runs, "overloaded_error")
    for ran in runs:
        assert ran.waits == [2.0] and ran.api_error.request_id == "req_1"


async def test_anthropic_stream_without_message_stop(
    server: ReplayServer, anyio_backend: str
) -> None:
    body = an_text_stream("a", "b")
    runs = await both(server, Reply(200, SSE, body[: body.index(b"event: message_stop")]),
                      ag=AN)
    expect(runs, "incomplete_stream", partial="ab")


async def test_anthropic_connection_lost_mid_stream(
    server: ReplayServer, anyio_backend: str
) -> None:
    body = start("Hello", " wor") + b"event: content_block_delta\ndata: {\"ty"
    runs = await both(server, Reply(200, SSE, body, chunks=64, cut_after=len(body), reset=True),
                      ag=AN)
    expect(runs, "connection_lost", partial="Hello wor")


async def test_anthropic_corrupt_frame_mid_stream(
    server: ReplayServer, anyio_backend: str
) -> None:
    body = start("partial") + b"event: content_block_delta\ndata: {not json\n\n"
    runs = await both(server, Reply(200, SSE, body), ag=AN)
    expect(runs, "invalid_response", partial="partial")


async def test_anthropic_pings_forever_end_at_the_deadline(
    server: ReplayServer, anyio_backend: str
) -> None:
    ping = sse({"type": "ping"})
    runs = await both(server, Reply(200, SSE, start("Hel"), forever=ping, pause=0.05),
                      ag=AN, timeouts=SHORT)
    expect(runs, "deadline_exceeded", partial="Hel")


async def test_anthropic_stream_past_the_cap(server: ReplayServer, anyio_backend: str) -> None:
    delta = sse({"type": "content_block_delta", "index": 0,
                 "delta": {"type": "text_delta", "text": "z"}})
    runs = await both(server, Reply(200, SSE, start("z"), forever=delta, forever_max=20_000),
                      ag=AN, limits=Limits(max_stream=32 << 10))
    expect(runs, "limit_exceeded", partial=lambda t: set(t) == {"z"})
