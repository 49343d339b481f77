"""The one place the providers lean on httpx beyond its documented calls: `raw_stream`
reads a response's `stream` and sets `is_stream_consumed` (both public attributes of
`httpx.Response`, not documented as settable). These tests pin what it relies on, so an
httpx release that changes them fails here and not in a user's stream."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import httpx
import pytest

from interpreters.providers.common import raw_stream

BODY = b"data: one\n\ndata: two\n\n"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        if self.path == "/gzip":
            self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    host, port = srv.server_address[:2]
    assert isinstance(host, str) and isinstance(port, int)
    try:
        yield f"http://{host}:{port}"
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_sync_response_hands_its_stream_over_once(server: str) -> None:
    with httpx.Client() as client, client.stream("GET", server + "/") as response:
        stream = raw_stream(response, httpx.SyncByteStream)
        assert stream is not None
        assert response.is_stream_consumed
        # httpx itself now refuses to read the body a second time.
        with pytest.raises(httpx.StreamConsumed):
            response.read()
        assert b"".join(stream) == BODY
        # and a second hand-over gives nothing
        assert raw_stream(response, httpx.SyncByteStream) is None


def test_an_async_response_hands_its_stream_over_once(server: str) -> None:
    async def go() -> bytes:
        async with httpx.AsyncClient() as client, client.stream(
                "GET", server + "/") as response:
            stream = raw_stream(response, httpx.AsyncByteStream)
            assert stream is not None and response.is_stream_consumed
            with pytest.raises(httpx.StreamConsumed):
                await response.aread()
            return b"".join([piece async for piece in stream])

    assert anyio.run(go) == BODY


def test_httpx_serves_what_it_must_decode_or_already_read(server: str) -> None:
    with httpx.Client() as client, client.stream("GET", server + "/gzip") as response:
        assert raw_stream(response, httpx.SyncByteStream) is None
        assert not response.is_stream_consumed
    # a test double's body, read before the client saw it
    done = httpx.Response(200, content=BODY)
    assert raw_stream(done, httpx.SyncByteStream) is None
    # a stream of the other kind: httpx raises its own error when read
    with httpx.Client() as client, client.stream("GET", server + "/") as response:
        assert raw_stream(response, httpx.AsyncByteStream) is None

