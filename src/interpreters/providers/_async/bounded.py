"""The waits of one async model call, each bounded by what is left of its deadline.

Where the two providers really differ, and only here: `_async/http.py` is written
against these functions and the sync provider generated from it calls their twins in
`_sync/bounded.py` (hand-written). Here a cancel scope bounds every wait, so a server
that is silent or trickles bytes is cut off at the deadline, and a caller's cancel ends
any wait. The sync side cannot be interrupted while it reads: it cuts httpx's timeouts
to the deadline and checks the deadline and the run's stop after every read.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator

import anyio
import httpx

from interpreters.providers.bounded_read import next_within, within
from interpreters.providers.common import raw_stream
from interpreters.providers.exchange import Exchange


async def send(client: httpx.AsyncClient, request: httpx.Request, ex: Exchange) -> httpx.Response:
    """Send the request and read the response head (its body is read by `next_chunk`)."""
    response: httpx.Response | None = None
    with anyio.move_on_after(ex.remaining()):
        response = await client.send(request, stream=True)
    if response is None:
        raise ex.deadline_error()
    return response


async def next_chunk(
    chunks: AsyncIterator[bytes], ex: Exchange, patience: float = math.inf
) -> bytes | None:
    """The next bytes of the body, None at its end; raises `ex.deadline_error()` at the
    deadline. No cancel scope is left open across the caller's yields. `patience`, the
    longest one wait of a read can last (the read timeout), lets a read with more than
    that left before the deadline run without a cancel scope (`bounded_read.py`)."""
    return await next_within(chunks, ex.remaining, ex.deadline_error, patience)


def raw(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body's bytes: as the connection delivers them (`raw_stream`: one async
    generator layer less per chunk than `aiter_raw`) unless httpx must serve them. The
    response is closed by `close`."""
    stream = raw_stream(response, httpx.AsyncByteStream)
    return stream.__aiter__() if stream is not None else response.aiter_bytes()


def body(
    chunks: AsyncIterator[bytes], ex: Exchange, patience: float
) -> AsyncGenerator[bytes, None]:
    """The bytes of the body, each read as `next_chunk` reads it, as one generator (no
    coroutine per chunk): raises `ex.deadline_error()` at the deadline."""
    return within(chunks, ex.deadline, ex.deadline_error, patience)  # (time.monotonic)


async def close(response: httpx.Response) -> None:
    """Close the response (frees the connection), even while being cancelled."""
    with anyio.CancelScope(shield=True):
        await response.aclose()
