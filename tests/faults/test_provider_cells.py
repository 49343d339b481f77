"""Fault cells at the provider level, for what the agent-level matrix (OpenAI format,
streaming) does not reach: the Anthropic format, and non-streamed calls."""

from __future__ import annotations

import pytest

from interpreters.core.deadline import run_stop
from interpreters.providers import Limits, Timeouts, resolve_provider
from tests.faults.harness import JSON
from tests.providers.helpers import KEY, Outcome, an_text_stream, ask, both, run_sync
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



class StopAfter:
    """A run that must stop once the provider has asked `n` times (no clock involved)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.asked = 0
        self.deadline: float | None = None

    def reason(self) -> str | None:
        self.asked += 1
        return "user left" if self.asked > self.n else None


def _stopped_call(server: ReplayServer, stop: StopAfter) -> Outcome:
    """A sync model call to the server while `stop` is the run's signal check."""
    token = run_stop.set(stop)
    try:
        p = resolve_provider("openai/m", base_url=server.url + "/v1", api_key=KEY,
                             timeouts=Timeouts(total=30.0))
        return run_sync(p, ask())
    finally:
        run_stop.reset(token)


def test_the_sync_provider_checks_the_runs_signal_at_every_read(server: ReplayServer) -> None:
    # Keep-alive comments give no events, so only the provider's own read loop can see
    # the run's abort: it must ask at every read and end the call as "cancelled" (not run
    # on to its deadline).
    server.queue(Reply(200, (("content-type", "text/event-stream"),), b": ka\n\n",
                       forever=b": ka\n\n", pause=0.01, forever_max=3000))
    stop = StopAfter(5)
    out = _stopped_call(server, stop)
    assert out.error is not None and out.error.error_type == "cancelled"
    assert out.error.message == "user left" and stop.asked == 6


def test_the_sync_provider_checks_the_runs_signal_while_reading_an_error_body(
    server: ReplayServer,
) -> None:
    # An error body that drips: the abort ends the call as "cancelled" at the next read,
    # as in a stream, rather than once the body's cap or the deadline is reached.
    server.queue(Reply(500, JSON, b'{"error": {"message": "', forever=b"y" * 10,
                       pause=0.01, forever_max=300))
    stop = StopAfter(5)
    out = _stopped_call(server, stop)
    assert out.error is not None and out.error.error_type == "cancelled", out.error
    assert out.error.message == "user left" and stop.asked == 6
