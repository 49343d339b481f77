"""The HTTP transport: one attempt of one model call over httpx, sync and async.

Both providers drive the same pure `_Exchange` (encode, classify the response head,
feed bytes to the codec, classify transport failures), so the two paths cannot drift.
Retrying is not done here: the loop's RetryPolicy reads `ApiError.retryable` and
`retry_after`. Closing the event iterator early closes the response and frees the
connection.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping

import httpx
import msgspec

from interpreters.provider import ProviderError
from interpreters.providers.codec import ByteStreamDecoder, Codec, Encoded, invalid_response
from interpreters.providers.errors import (
    broken_stream,
    classify_response,
    request_id_of,
)
from interpreters.providers.secret import Secret
from pipeline.chunks import ModelEvent
from pipeline.model import ApiError, ModelRequest

MAX_ERROR_BODY = 1 << 16
"""Bytes of an error response read for its message; the rest is not worth waiting for."""


class Timeouts(msgspec.Struct, frozen=True):
    """Seconds. `read` bounds the silence between two reads of a stream, not its length."""

    connect: float = 10.0
    read: float = 120.0
    write: float = 30.0
    pool: float = 10.0

    def httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write, pool=self.pool)


class Endpoint(msgspec.Struct, frozen=True):
    """Where one provider lives and how to authenticate to it."""

    provider: str
    """The router prefix (`openai`, `anthropic`, `ollama`...); stripped from model ids."""
    base_url: str
    api_key: Secret | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    def wire_model(self, model: str) -> str:
        prefix = self.provider + "/"
        return model[len(prefix) :] if model.startswith(prefix) else model


class _Exchange:
    """One model call's protocol state, free of I/O."""

    def __init__(
        self,
        endpoint: Endpoint,
        codec: Codec,
        request: ModelRequest,
        *,
        stream: bool,
        clock: Callable[[], float],
    ) -> None:
        self._endpoint = endpoint
        self._codec = codec
        self._clock = clock
        self.stream = stream
        self.encoded: Encoded = codec.encode(
            request, model=endpoint.wire_model(request.model), stream=stream
        )
        self.url = endpoint.url(codec.path)
        self.status = 0
        self._request_id: str | None = None
        self._decoder: ByteStreamDecoder | None = None
        self._sniff: bytearray | None = None
        self._json: bytearray | None = None
        self.failed = False
        self._reason = ""
        self._headers: Mapping[str, str] = {}

    def headers(self) -> dict[str, str]:
        key = self._endpoint.api_key
        h = {
            "content-type": "application/json",
            "accept": "text/event-stream" if self.stream else "application/json",
        }
        h.update(self._endpoint.headers)
        h.update(self._codec.headers(key.reveal() if key else None))
        return h

    @property
    def done(self) -> bool:
        return self._decoder is not None and self._decoder.done

    @property
    def started(self) -> bool:
        return self._decoder is not None and self._decoder.started

    def head(self, status: int, headers: Mapping[str, str], reason: str) -> None:
        self.status = status
        self._headers = headers
        self._reason = reason
        self._request_id = request_id_of(headers)
        self.failed = status >= 300  # redirects are not followed: a wrong base URL
        if not self.failed and "event-stream" in headers.get("content-type", ""):
            self._start_sse()
        elif not self.failed:
            self._sniff = bytearray()

    def _start_sse(self) -> None:
        self._decoder = ByteStreamDecoder(
            self._codec.stream_decoder(
                self.encoded, status=self.status, request_id=self._request_id
            ),
            self.encoded.restore,
            status=self.status,
            request_id=self._request_id,
        )

    def error(self, body: bytes) -> ProviderError:
        return self._scrubbed(
            classify_response(
                self.status, self._headers, body, now=self._clock(), reason=self._reason
            )
        )

    def feed(self, chunk: bytes) -> list[ModelEvent]:
        if self._json is not None:
            self._json += chunk
            return []
        if self._sniff is not None:
            # Content type is not enough (a recorded stream says application/json): the
            # first non-blank byte tells one JSON body from an event stream.
            self._sniff += chunk
            head = bytes(self._sniff).lstrip()
            if not head:
                return []
            buffered, self._sniff = bytes(self._sniff), None
            if head[:1] in (b"{", b"["):
                self._json = bytearray(buffered)
                return []
            self._start_sse()
            chunk = buffered
        assert self._decoder is not None
        return self._decoder.feed(chunk)

    def close(self) -> list[ModelEvent]:
        if self._json is not None:
            return [
                self.encoded.restore(e)
                for e in self._codec.decode_body(
                    self.encoded, bytes(self._json), status=self.status,
                    request_id=self._request_id,
                )
            ]
        if self._decoder is None:
            raise invalid_response(
                self.status, "the response body was empty", started=False,
                request_id=self._request_id,
            )
        return self._decoder.close()

    def check(self) -> None:
        """Raise what broke the stream after the events before it were handed over."""
        if self._decoder is not None:
            self._decoder.check()

    def transport_error(self, exc: httpx.HTTPError) -> ProviderError:
        name = type(exc).__name__
        detail = str(exc) or name
        if self.status == 0:
            # Nothing came back: the request may not even have arrived. Always retryable.
            kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection_error"
            return self._scrubbed(
                ApiError(status=None, message=f"{name}: {detail}", error_type=kind,
                         retryable=True)
            )
        if self._decoder is not None and self._decoder.failure is not None:
            return self.scrub(self._decoder.failure)  # the first cause, not its aftermath
        if self.failed:
            # The error response itself broke off: its status still says what happened.
            return self.error(b"")
        if isinstance(exc, httpx.DecodingError):
            kind, what = "invalid_response", "the response body could not be decoded"
        elif isinstance(exc, httpx.TimeoutException):
            kind, what = "read_timeout", "the stream went silent past the read timeout"
        else:
            kind, what = "connection_lost", "the connection broke mid-response"
        return self._scrubbed(
            broken_stream(self.status, f"{what} ({name}: {detail})", started=self.started,
                          error_type=kind, request_id=self._request_id)
        )

    def scrub(self, err: ProviderError) -> ProviderError:
        return self._scrubbed(err.error)

    def _scrubbed(self, e: ApiError) -> ProviderError:
        key = self._endpoint.api_key
        if key is not None:
            e = msgspec.structs.replace(
                e,
                message=key.scrub(e.message),
                body=key.scrub(e.body) if e.body is not None else None,
            )
        return ProviderError(e)


class _Base:
    def __init__(
        self,
        endpoint: Endpoint,
        codec: Codec,
        *,
        stream: bool = True,
        timeouts: Timeouts | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint = endpoint
        self.codec = codec
        self.streaming = stream
        self.timeouts = timeouts or Timeouts()
        self._clock = clock

    def __repr__(self) -> str:
        # No headers and no key: only where the calls go.
        return (
            f"{type(self).__name__}(provider={self.endpoint.provider!r}, "
            f"base_url={self.endpoint.base_url!r}, stream={self.streaming})"
        )

    def _exchange(self, request: ModelRequest) -> _Exchange:
        return _Exchange(
            self.endpoint, self.codec, request, stream=self.streaming, clock=self._clock
        )


class HttpProvider(_Base):
    """A synchronous `Provider` over `httpx.Client`."""

    def __init__(
        self,
        endpoint: Endpoint,
        codec: Codec,
        *,
        stream: bool = True,
        timeouts: Timeouts | None = None,
        client: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(endpoint, codec, stream=stream, timeouts=timeouts, clock=clock)
        self._own = client is None
        self._client = client

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeouts.httpx())
        return self._client

    def close(self) -> None:
        if self._own and self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> HttpProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        ex = self._exchange(request)
        failure: ProviderError | None = None
        try:
            with self.client.stream(
                "POST", ex.url, content=ex.encoded.body, headers=ex.headers(),
                timeout=self.timeouts.httpx(),
            ) as resp:
                ex.head(resp.status_code, resp.headers, resp.reason_phrase)
                if ex.failed:
                    failure = ex.error(_read_capped(resp.iter_bytes()))
                else:
                    for chunk in resp.iter_bytes():
                        yield from ex.feed(chunk)
                        if ex.done:
                            break
                    yield from ex.close()
                    ex.check()
        except httpx.HTTPError as e:
            failure = ex.transport_error(e)
        except ProviderError as e:
            failure = ex.scrub(e)
        if failure is not None:
            # Raised outside the except block: the httpx error (whose request holds the
            # auth header) must not ride along as __context__.
            raise failure


class AsyncHttpProvider(_Base):
    """An asynchronous `AsyncProvider` over `httpx.AsyncClient` (asyncio or trio)."""

    def __init__(
        self,
        endpoint: Endpoint,
        codec: Codec,
        *,
        stream: bool = True,
        timeouts: Timeouts | None = None,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(endpoint, codec, stream=stream, timeouts=timeouts, clock=clock)
        self._own = client is None
        self._client = client

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
        ex = self._exchange(request)
        failure: ProviderError | None = None
        try:
            async with self.client.stream(
                "POST", ex.url, content=ex.encoded.body, headers=ex.headers(),
                timeout=self.timeouts.httpx(),
            ) as resp:
                ex.head(resp.status_code, resp.headers, resp.reason_phrase)
                if ex.failed:
                    failure = ex.error(await _aread_capped(resp.aiter_bytes()))
                else:
                    async for chunk in resp.aiter_bytes():
                        for event in ex.feed(chunk):
                            yield event
                        if ex.done:
                            break
                    for event in ex.close():
                        yield event
                    ex.check()
        except httpx.HTTPError as e:
            failure = ex.transport_error(e)
        except ProviderError as e:
            failure = ex.scrub(e)
        if failure is not None:
            raise failure


def _read_capped(chunks: Iterator[bytes]) -> bytes:
    buf = bytearray()
    for chunk in chunks:
        buf += chunk
        if len(buf) >= MAX_ERROR_BODY:
            break
    return bytes(buf[:MAX_ERROR_BODY])


async def _aread_capped(chunks: AsyncIterator[bytes]) -> bytes:
    buf = bytearray()
    async for chunk in chunks:
        buf += chunk
        if len(buf) >= MAX_ERROR_BODY:
            break
    return bytes(buf[:MAX_ERROR_BODY])
