"""The waits of one sync model call, each bounded by what is left of its deadline.

The hand-written twin of `_async/bounded.py` (see there): the sync provider generated
from `_async/http.py` calls these. The thread cannot be interrupted while httpx reads,
so the request's httpx timeouts are cut to what is left of the deadline (a silent server
is cut off at it), and the deadline and the run's stop (`interpreters.core.deadline`: the
sync interpreter's `timeout=` and abort signal) are checked after every read (a server
that trickles bytes is cut off at the next one).
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator

import httpx

from interpreters.providers.common import raw_stream
from interpreters.providers.exchange import Exchange


def send(client: httpx.Client, request: httpx.Request, ex: Exchange) -> httpx.Response:
    """Send the request and read the response head (its body is read by `next_chunk`).
    Bounded by the request's timeouts, cut to what was left of `ex`'s deadline when the
    request was built."""
    return client.send(request, stream=True)


def next_chunk(
    chunks: Iterator[bytes], ex: Exchange, patience: float = math.inf
) -> bytes | None:
    """The next bytes of the body, None at its end; raises `ex.deadline_error()` past the
    deadline, or the cancelled error once the run must stop. (`patience` serves the async
    twin; here every read is checked once it returns.)"""
    chunk = next(chunks, None)
    if chunk is not None:
        ex.check_deadline()
    return chunk


def raw(response: httpx.Response) -> Iterator[bytes]:
    """The body's bytes: as the connection delivers them (`raw_stream`) unless httpx must
    serve them. Closed by `close`."""
    stream = raw_stream(response, httpx.SyncByteStream)
    return stream.__iter__() if stream is not None else response.iter_bytes()


def body(chunks: Iterator[bytes], ex: Exchange, patience: float) -> Generator[bytes, None, None]:
    """The bytes of the body, each checked as `next_chunk` checks it, as one generator."""
    for chunk in chunks:
        ex.check_deadline()
        yield chunk


def close(response: httpx.Response) -> None:
    """Close the response (frees the connection)."""
    response.close()
