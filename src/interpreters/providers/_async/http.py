"""The async HTTP provider: one attempt of one model call over `httpx.AsyncClient`.

It does the I/O; `Exchange` (providers/exchange.py) holds the protocol state, and every
wait goes through `bounded`, which keeps it within the call's deadline.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

import httpx

from interpreters.providers._async import bounded
from interpreters.providers.exchange import DEADLINE_EXCEEDED, Exchange, HttpProviderBase
from interpreters.providers.provider import ProviderError
from pipeline.chunks import ModelEvent, ModelFinish
from pipeline.model import ModelRequest


class AsyncHttpProvider(HttpProviderBase[httpx.AsyncClient]):
    """The `AsyncProvider` over an `httpx.AsyncClient`, its own unless one is given."""

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeouts.httpx())
        return self._client

    async def aclose(self) -> None:
        if self._own and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> AsyncHttpProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The call's events, one at a time (`astream_batches`, flattened)."""
        batches = self.astream_batches(request)
        try:
            async for batch in batches:
                for event in batch:
                    yield event
        finally:
            await batches.aclose()  # closing this closes the response, at once

    async def astream_batches(
        self, request: ModelRequest
    ) -> AsyncGenerator[Sequence[ModelEvent], None]:
        """The call's events in batches, those decoded from one read of the body (never
        an empty one): an interpreter that reads these hands the loop every event of one
        read without a step through this generator per event."""
        ex = self._exchange(request)
        failure: ProviderError | None = None
        try:
            ex.check_deadline()
            # No httpx timeout longer than what is left of the deadline.
            timeout = self.timeouts.httpx(ex.remaining())
            req = self.client.build_request(
                "POST", ex.url, content=ex.encoded.body, headers=ex.headers(), timeout=timeout,
            )
            resp = await bounded.send(self.client, req, ex)
            try:
                ex.head(resp.status_code, resp.headers, resp.reason_phrase)
                if ex.failed:
                    body, cut = await _read_capped(resp.aiter_bytes(), ex)
                    failure = ex.error(body, cut=cut)
                else:
                    # Raw bytes when there is no Content-Encoding: fewer generator steps
                    # per chunk than httpx's decoder layer.
                    chunks = resp.aiter_bytes() if _encoded(resp) else bounded.raw(resp)
                    patience = timeout.read if timeout.read is not None else math.inf
                    reads = bounded.body(chunks, ex, patience)
                    feed = ex.feeder()
                    try:
                        async for chunk in reads:
                            events = feed(chunk)
                            if events:
                                yield events
                                # The end marker ([DONE], message_stop) comes with the
                                # call's last event, a ModelFinish: no other read can end it.
                                if type(events[-1]) is ModelFinish and ex.done:
                                    break
                    finally:
                        await reads.aclose()
                    events = ex.close()
                    if events:
                        yield events
                    ex.check()
            finally:
                await bounded.close(resp)
        except httpx.HTTPError as e:
            failure = ex.transport_error(e)
        except ProviderError as e:
            failure = ex.scrub(e)
        if failure is not None:
            # Raised outside the except block: the httpx error (whose request holds the
            # auth header) must not ride along as __context__.
            raise failure


def _encoded(resp: httpx.Response) -> bool:
    """Whether the body has a Content-Encoding (then httpx's decoder must read it)."""
    return "content-encoding" in resp.headers


async def _read_capped(chunks: AsyncIterator[bytes], ex: Exchange) -> tuple[bytes, bool]:
    """An error body up to its cap (and the deadline); True when it was cut short."""
    cap = ex.limits.max_error_body
    buf = bytearray()
    try:
        while len(buf) < cap:
            chunk = await bounded.next_chunk(chunks, ex)
            if chunk is None:
                return bytes(buf), False
            buf += chunk
    except ProviderError as e:
        if e.error.error_type != DEADLINE_EXCEEDED:
            raise  # the run must stop (sync): the call ends as cancelled
        # At the deadline, what came so far is the message.
    return bytes(buf[:cap]), True
