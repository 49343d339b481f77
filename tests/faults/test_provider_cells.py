"""Fault cells at the provider level, for what the agent-level matrix (OpenAI format,
streaming) does not reach: the Anthropic format, and non-streamed calls."""

from __future__ import annotations

import pytest

from interpreters.providers import Limits, Timeouts
from tests.faults.harness import JSON
from tests.providers.helpers import an_text_stream, both
from tests.providers.server import ReplayServer, Reply

pytestmark = pytest.mark.anyio

HTML = (("content-type", "text/html; charset=utf-8"),)
PAGE = b"<html><head><title>502 Bad Gateway</title></head></html>"
FAST = Timeouts(connect=2.0, read=2.0, write=2.0, pool=2.0, total=5.0)


@pytest.mark.parametrize("route", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [True, False])
async def test_html_on_a_200_says_what_came(
    server: ReplayServer, anyio_backend: str, route: str, stream: bool
) -> None:
    server.queue(Reply(200, HTML, PAGE), Reply(200, HTML, PAGE))
    for o in await both(server.url, route, timeouts=FAST, stream=stream):
        assert o.error is not None and o.error.error_type == "invalid_response"
        wanted = "an event stream" if stream else "a JSON body"
        assert f"expected {wanted}, got text/html; charset=utf-8: <html>" in o.error.message
        assert o.events == []


async def test_anthropic_stream_past_its_cap(server: ReplayServer, anyio_backend: str) -> None:
    body = an_text_stream(*(["word "] * 400))
    server.queue(Reply(200, (("content-type", "text/event-stream"),), body, chunks=256))
    server.queue(Reply(200, (("content-type", "text/event-stream"),), body, chunks=256))
    limits = Limits(max_stream=4096)
    for o in await both(server.url, "anthropic", timeouts=FAST, limits=limits):
        assert o.error is not None and o.error.error_type == "limit_exceeded"
        assert o.text.startswith("word ") and not o.finished


async def test_a_short_body_that_is_neither_json_nor_a_stream(
    server: ReplayServer, anyio_backend: str
) -> None:
    server.queue(Reply(200, JSON, b"da"), Reply(200, JSON, b"da"))
    for o in await both(server.url, timeouts=FAST):
        assert o.error is not None and o.error.error_type == "invalid_response"
        assert "expected an event stream" in o.error.message

