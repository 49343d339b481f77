"""Fault matrix, transport and stream cells: connection refused, reset or closed before
the headers, reset mid-stream, no answer, a slow drip (keep-alive comments, or bytes
that never end a frame), truncated and corrupt streams, a body that is not the event
stream asked for, through the sync and the async interpreter (asyncio and trio).

Each cell checks the typed error, that the messages so far are intact and paired (the
fault hits the second model call, after a tool step), and that nothing of the run keeps
running: no thread, no task, no open connection (see `harness`). Deadlines are small
(fractions of a second) so the suite stays quick; no assertion is on elapsed time."""

from __future__ import annotations

import json
import threading

import anyio
import anyio.to_thread
import pytest

from interpreters.core.cancel import CancelSignal
from interpreters.providers import Timeouts
from pipeline.values.result import ApiFailed, Cancelled
from tests.faults.harness import (
    FAST,
    JSON,
    SSE,
    TextSeen,
    agent,
    both,
    expect,
    intact,
    run_async,
    run_sync,
)
from tests.providers.helpers import oa_chunk, oa_text_stream, sse
from tests.providers.server import ReplayServer, Reply

pytestmark = pytest.mark.anyio

SHORT = Timeouts(connect=2.0, read=2.0, write=2.0, pool=2.0, total=0.4)
"""A total deadline well under the read timeout: only the deadline can end the call."""


def text_frames(*pieces: str) -> bytes:
    return sse(*(oa_chunk({"content": p}) for p in pieces))


async def test_connection_refused(anyio_backend: str) -> None:
    dead = ReplayServer()
    url = dead.url
    dead.close()  # nothing listens there any more
    runs = await both(dead, first=False, url=url, ag=agent(retries=1))
    expect(runs, "connection_error", first=False)
    for ran in runs:
        assert ran.api_error.retryable and ran.api_error.status is None
        failed = ran.result.error
        assert isinstance(failed, ApiFailed) and failed.attempts == 2


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "closed"])
async def test_connection_lost_before_headers(
    server: ReplayServer, anyio_backend: str, reset: bool
) -> None:
    runs = await both(server, Reply(no_response=True, reset=reset))
    expect(runs, "connection_error")
    for ran in runs:
        assert ran.api_error.retryable and ran.api_error.status is None


@pytest.mark.parametrize("reset", [True, False], ids=["reset", "closed"])
async def test_connection_lost_mid_stream(
    server: ReplayServer, anyio_backend: str, reset: bool
) -> None:
    body = oa_text_stream("Hello", " wor", "ld")
    cut = body.index(b"\n\n", body.index(b"wor")) + 10  # inside the third frame
    runs = await both(server, Reply(200, SSE, body, chunks=40, cut_after=cut, reset=reset))
    expect(runs, "connection_lost", partial="Hello wor")
    for ran in runs:
        assert not ran.api_error.retryable


async def test_no_answer_ends_at_the_read_timeout(
    server: ReplayServer, anyio_backend: str
) -> None:
    quick_read = Timeouts(connect=2.0, read=0.3, write=2.0, pool=2.0, total=10.0)
    runs = await both(server, Reply(hang=30), timeouts=quick_read)
    expect(runs, "timeout")
    for ran in runs:
        assert ran.api_error.retryable


async def test_no_answer_ends_at_the_total_deadline(
    server: ReplayServer, anyio_backend: str
) -> None:
    runs = await both(server, Reply(hang=30), timeouts=SHORT)
    expect(runs, "deadline_exceeded")
    for ran in runs:
        assert not ran.api_error.retryable


async def test_keep_alive_comments_forever_end_at_the_deadline(
    server: ReplayServer, anyio_backend: str
) -> None:
    # A comment every 50 ms keeps every read well inside the read timeout: only the
    # total deadline ends the call (today's sync path never gave up).
    drip = Reply(200, SSE, b": keep-alive\n\n", forever=b": keep-alive\n\n", pause=0.05)
    runs = await both(server, drip, timeouts=SHORT)
    expect(runs, "deadline_exceeded")


async def test_a_drip_ends_at_the_deadline_also_when_reads_run_without_a_scope(
    server: ReplayServer, anyio_backend: str
) -> None:
    # The read timeout is shorter than the deadline: the async provider reads without a
    # cancel scope until less than one read timeout is left (bounded_read.py), then in a
    # scope of what is left. Either way the call ends at the deadline, not never.
    drip = Reply(200, SSE, text_frames("Hel"), forever=b": keep-alive\n\n", pause=0.05)
    timeouts = Timeouts(connect=2.0, read=0.3, write=2.0, pool=2.0, total=0.8)
    runs = await both(server, drip, timeouts=timeouts)
    expect(runs, "deadline_exceeded", partial="Hel")


async def test_a_byte_at_a_time_after_text_ends_at_the_deadline(
    server: ReplayServer, anyio_backend: str
) -> None:
    drip = Reply(200, SSE, text_frames("Hel"), forever=b"\n", pause=0.05)
    runs = await both(server, drip, timeouts=SHORT)
    expect(runs, "deadline_exceeded", partial="Hel")


async def test_truncated_stream_without_done(server: ReplayServer, anyio_backend: str) -> None:
    body = oa_text_stream("Hi")
    runs = await both(server, Reply(200, SSE, body[: body.index(b"data: [DONE]")], chunks=16))
    expect(runs, "incomplete_stream", partial="Hi")


async def test_done_before_any_finish_reason_is_incomplete(
    server: ReplayServer, anyio_backend: str
) -> None:
    body = text_frames("Hal", "f") + b"data: [DONE]\n\n"
    runs = await both(server, Reply(200, SSE, body))
    expect(runs, "incomplete_stream", partial="Half")


async def test_corrupt_frame_mid_stream(server: ReplayServer, anyio_backend: str) -> None:
    body = text_frames("partial") + b'data: {"choices": [{"delta": \n\ndata: [DONE]\n\n'
    runs = await both(server, Reply(200, SSE, body))
    expect(runs, "invalid_response", partial="partial")


async def test_corrupt_frame_before_any_event(server: ReplayServer, anyio_backend: str) -> None:
    runs = await both(server, Reply(200, SSE, b"data: {{{not json\n\n"))
    expect(runs, "invalid_response")


async def test_html_where_an_event_stream_was_expected(
    server: ReplayServer, anyio_backend: str
) -> None:
    page = b"<!DOCTYPE html>\n<html><body><h1>Welcome to nginx!</h1></body></html>\n"
    runs = await both(server, Reply(200, (("content-type", "text/html"),), page))
    expect(runs, "invalid_response")
    for ran in runs:
        assert "expected an event stream, got text/html" in ran.api_error.message
        assert "Welcome to nginx" in ran.api_error.message


async def test_plain_json_where_an_event_stream_was_expected(
    server: ReplayServer, anyio_backend: str
) -> None:
    runs = await both(server, Reply(200, JSON, json.dumps({"status": "ok"}).encode()))
    expect(runs, "invalid_response")
    for ran in runs:
        assert "expected an event stream, got application/json" in ran.api_error.message


async def test_run_timeout_during_a_drip_cancels_the_run(
    server: ReplayServer, anyio_backend: str
) -> None:
    # The run's own timeout, not the call's: status "cancelled", sync and async alike,
    # the text so far kept as incomplete, the history paired.
    drip = Reply(200, SSE, text_frames("Hel"), forever=b": ka\n\n", pause=0.05)
    # (a timeout with room for "Hel" to arrive first on a loaded machine)
    runs = await both(server, drip, timeout=1.5, timeouts=FAST)
    for ran in runs:
        intact(ran.result, partial="Hel", status="cancelled")
        assert isinstance(ran.result.error, Cancelled)
        assert "timed out" in ran.result.error.reason


async def test_signal_from_another_thread_during_a_drip_cancels_the_run(
    server: ReplayServer, anyio_backend: str
) -> None:
    # The sync interpreter's thread is inside the provider's read loop: the abort reaches
    # it there (checked at every read), not only between model events.
    drip = Reply(200, SSE, text_frames("Hel"), forever=b": ka\n\n", pause=0.05)
    signal = CancelSignal()
    seen = threading.Event()

    def abort_when_seen() -> None:  # another thread, while the run reads keep-alives
        if seen.wait(10):  # (a cap only: the run hands out "Hel" first)
            signal.cancel("user left")

    aborter = threading.Thread(target=abort_when_seen)
    aborter.start()
    try:
        ran = await anyio.to_thread.run_sync(
            lambda: run_sync(server, drip, signal=signal, timeouts=FAST,
                             observers=[TextSeen("Hel", seen.set)]))
    finally:
        seen.set()
        aborter.join()
    intact(ran.result, partial="Hel", status="cancelled")
    assert ran.result.error == Cancelled("user left")

    signal = CancelSignal()
    shown = anyio.Event()

    async def abort_when_shown() -> None:
        await shown.wait()
        signal.cancel("user left")

    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_when_shown)
        ran = await run_async(server, drip, signal=signal, timeouts=FAST,
                              observers=[TextSeen("Hel", shown.set)])
    intact(ran.result, partial="Hel", status="cancelled")
    assert ran.result.error == Cancelled("user left")
