"""The async HTTP provider: one attempt of one model call over `httpx.AsyncClient`, its
I/O alone (`HttpProviderBase`, providers/common.py, and `Exchange` hold the rest), every
wait through `bounded`, which keeps it within the call's deadline.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence

import httpx

from interpreters.providers._async import bounded
from interpreters.providers.common import HttpProviderBase
from interpreters.providers.exchange import ErrorBody, Exchange
from interpreters.providers.provider import ProviderError
from pipeline.values.chunks import ModelEvent, ModelFinish
from pipeline.values.model import ModelRequest


class AsyncHttpProvider(HttpProviderBase[httpx.AsyncClient]):
    """The `AsyncProvider` over an `httpx.AsyncClient`, its own unless one is given."""

    _client_class = httpx.AsyncClient

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
        try:
            resp = await bounded.send(self.client, self._request(ex), ex)
            try:
                ex.head(resp.status_code, resp.headers, resp.reason_phrase)
                if ex.failed:
                    raise await _error(resp.aiter_bytes(), ex)
                # httpx's read timeout ends any one wait of a read (never a longer one).
                reads = bounded.body(bounded.raw(resp), ex, self.timeouts.read)
                feed = ex.feeder()
                try:
                    async for chunk in reads:
                        if events := feed(chunk):
                            yield events
                            # The end marker ([DONE], message_stop) comes with the call's
                            # last event, a ModelFinish: no other read can end it.
                            if type(events[-1]) is ModelFinish and ex.done:
                                break
                finally:
                    await reads.aclose()
                if events := ex.close():
                    yield events
                ex.check()
            finally:
                await bounded.close(resp)
        except (httpx.HTTPError, ProviderError) as e:
            failure = ex.failure(e)
        else:
            return
        # Raised outside the except block: the httpx error (whose request holds the auth
        # header) must not ride along as __context__.
        raise failure


async def _error(chunks: AsyncIterator[bytes], ex: Exchange) -> ProviderError:
    """The error an error response tells, its body read up to its cap (and the deadline)."""
    body = ErrorBody(ex.limits.max_error_body)
    try:
        while body.open:
            body.add(await bounded.next_chunk(chunks, ex))
    except ProviderError as e:
        body.stop(e)
    return ex.error(body.data, cut=body.cut)
