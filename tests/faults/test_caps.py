"""Fault matrix, caps: an endless error body, an endless non-streamed body, one endless
SSE line, and a stream that never stops, each against a small cap (Limits) through the
sync and the async interpreter. Hitting a cap ends the call with a typed error
(`limit_exceeded`, never retried), what streamed before is kept as incomplete text, and
the memory a call holds stays near its cap (checked by the cap being hit at all: an
uncapped reader would read the endless reply until the server's own limit)."""

from __future__ import annotations

import pytest

from interpreters.providers import Limits
from tests.faults.harness import JSON, SSE, both, expect
from tests.providers.helpers import oa_chunk, sse
from tests.providers.server import ReplayServer, Reply

pytestmark = pytest.mark.anyio

SMALL = Limits(max_error_body=4096, max_body=64 << 10, max_event=16 << 10, max_stream=64 << 10)
ENDLESS = 20_000
"""Pieces of an 'endless' reply: far past every cap above, finite so a broken client
under test fails rather than hangs."""


async def test_endless_error_body_is_read_up_to_its_cap(
    server: ReplayServer, anyio_backend: str
) -> None:
    reply = Reply(500, JSON, b'{"error": {"message": "' + b"x" * 100,
                  forever=b"y" * 1000, forever_max=ENDLESS)
    runs = await both(server, reply, limits=SMALL)
    expect(runs, None)
    for ran in runs:
        err = ran.api_error
        assert err.status == 500 and err.body is not None
        assert len(err.body) <= 8192 + 3  # the kept part of what was read


async def test_endless_json_body_hits_the_body_cap(
    server: ReplayServer, anyio_backend: str
) -> None:
    reply = Reply(200, JSON, b'{"id": "', forever=b"a" * 1000, forever_max=ENDLESS)
    runs = await both(server, reply, limits=SMALL)
    expect(runs, "limit_exceeded")
    for ran in runs:
        assert not ran.api_error.retryable
        assert "response body" in ran.api_error.message and "65536" in ran.api_error.message


async def test_endless_sse_line_hits_the_event_cap(
    server: ReplayServer, anyio_backend: str
) -> None:
    reply = Reply(200, SSE, b'data: {"choices": "', forever=b"b" * 1000, forever_max=ENDLESS)
    runs = await both(server, reply, limits=SMALL)
    expect(runs, "limit_exceeded")
    for ran in runs:
        assert "line" in ran.api_error.message and not ran.api_error.retryable


async def test_endless_sse_line_after_text_keeps_the_text(
    server: ReplayServer, anyio_backend: str
) -> None:
    start = sse(oa_chunk({"content": "kept"})) + b'data: {"choices": "'
    reply = Reply(200, SSE, start, forever=b"b" * 1000, forever_max=ENDLESS)
    runs = await both(server, reply, limits=SMALL)
    expect(runs, "limit_exceeded", partial="kept")


async def test_endless_event_of_many_lines_hits_the_event_cap(
    server: ReplayServer, anyio_backend: str
) -> None:
    reply = Reply(200, SSE, b"data: {\n", forever=b"data: " + b"c" * 500 + b"\n",
                  forever_max=ENDLESS)
    runs = await both(server, reply, limits=SMALL)
    expect(runs, "limit_exceeded")
    for ran in runs:
        assert "event" in ran.api_error.message


async def test_a_stream_that_never_ends_hits_the_stream_cap(
    server: ReplayServer, anyio_backend: str
) -> None:
    frame = sse(oa_chunk({"content": "z"}))
    reply = Reply(200, SSE, frame, forever=frame, forever_max=ENDLESS)
    runs = await both(server, reply, limits=SMALL)
    expect(runs, "limit_exceeded", partial=lambda t: 0 < len(t) < 2000 and set(t) == {"z"})
    for ran in runs:
        assert "streamed response" in ran.api_error.message
