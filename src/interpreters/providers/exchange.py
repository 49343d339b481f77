"""One model call over HTTP as protocol state, free of I/O: what both providers drive.

`Exchange` encodes the request, classifies the response head, feeds bytes to the codec
(within `Limits`), keeps the call's deadline and classifies transport failures (`ErrorBody`
keeps an error response's body to its cap); `providers/_async/http.py` does the I/O (and
`providers/_sync/http.py` is generated from it), so the two paths cannot drift. See
`providers/http.py` for the whole picture.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Literal

import httpx
import msgspec

from interpreters.core.deadline import RunStop, run_stop
from interpreters.providers.codec import (
    SSE_FRAMING,
    ByteStreamDecoder,
    Codec,
    Encoded,
    RequestSigner,
    invalid_response,
)
from interpreters.providers.errors import (
    broken_stream,
    classify_response,
    request_id_of,
)
from interpreters.providers.limits import Limits, limit_exceeded
from interpreters.providers.provider import ProviderError
from interpreters.providers.secret import Secret
from interpreters.providers.table import check_base_url
from pipeline.values.chunks import ModelEvent
from pipeline.values.model import ApiError, ModelRequest

MAX_ERROR_BODY = Limits().max_error_body
"""Bytes of an error response read for its message by default (`Limits.max_error_body`)."""

DEADLINE_EXCEEDED = "deadline_exceeded"


class Timeouts(msgspec.Struct, frozen=True):
    """Seconds. `read` bounds the silence between two reads of a stream, `total` the whole
    call (connect to the last byte), so a server that trickles bytes cannot hold it."""

    connect: float = 10.0
    read: float = 60.0
    write: float = 30.0
    pool: float = 10.0
    total: float = 600.0

    def __post_init__(self) -> None:
        for name in ("connect", "read", "write", "pool", "total"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"Timeouts.{name} must be a number of seconds > 0")

    def httpx(self, within: float | None = None) -> httpx.Timeout:
        """httpx's timeouts, none longer than `within` seconds (what is left of a deadline)."""
        if within is None:
            return httpx.Timeout(
                connect=self.connect, read=self.read, write=self.write, pool=self.pool
            )
        w = max(within, 0.001)
        return httpx.Timeout(
            connect=min(self.connect, w), read=min(self.read, w), write=min(self.write, w),
            pool=min(self.pool, w),
        )


class Endpoint(msgspec.Struct, frozen=True):
    """Where one provider lives and how to authenticate to it."""

    provider: str
    """The router prefix (`openai`, `anthropic`, `ollama`...); stripped from model ids."""
    base_url: str
    api_key: Secret | None = None
    headers: tuple[tuple[str, str], ...] = ()
    sign: RequestSigner | None = None
    """Signs each request after its headers are made (AWS SigV4: `Route.signer`)."""

    def __post_init__(self) -> None:
        check_base_url(self.base_url)

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    def wire_model(self, model: str) -> str:
        prefix = self.provider + "/"
        return model[len(prefix) :] if model.startswith(prefix) else model


class Exchange:
    """One model call's protocol state, free of I/O."""

    def __init__(
        self,
        endpoint: Endpoint,
        codec: Codec,
        request: ModelRequest,
        *,
        stream: bool,
        clock: Callable[[], float],
        timeouts: Timeouts,
        limits: Limits,
    ) -> None:
        self._endpoint = endpoint
        self._codec = codec
        self._clock = clock
        self.stream = stream
        self.limits = limits
        self.total = timeouts.total
        now = time.monotonic()
        self.deadline = now + timeouts.total
        self._run: RunStop | None = run_stop.get()
        run_end = self._run.deadline if self._run is not None else None
        if run_end is not None and run_end < self.deadline:
            self.deadline = run_end  # the run's own deadline comes first
        self.received = 0
        self._content_type = ""
        model = endpoint.wire_model(request.model)
        self.encoded: Encoded = codec.encode(request, model=model, stream=stream)
        self.url = endpoint.url(codec.path(model, stream=stream))
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
            "accept": self.encoded.framing.media_type if self.stream else "application/json",
        }
        h.update(self._endpoint.headers)
        h.update(self._codec.headers(key.reveal() if key else None))
        sign = self._endpoint.sign
        if sign is not None:
            # Last, over the exact URL, headers and body that are sent.
            h.update(sign("POST", self.url, h, self.encoded.body))
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
        self._content_type = headers.get("content-type", "")
        self.failed = status >= 300  # redirects are not followed: a wrong base URL
        if not self.failed and self.encoded.framing.marker in self._content_type:
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
            max_event=self.limits.max_event,
            max_stream=self.limits.max_stream,
            framing=self.encoded.framing,
        )

    # --- bounds ------------------------------------------------------------------------
    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def past_deadline(self) -> bool:
        # A timeout cut to the deadline fires at it, give or take the clock's grain.
        return time.monotonic() >= self.deadline - 0.005

    def check_deadline(self) -> None:
        # At every read of a sync stream: `past_deadline` inline.
        if time.monotonic() >= self.deadline - 0.005:
            raise self.deadline_error()
        if self._run is not None:
            reason = self._run.reason()
            if reason is not None:
                # The run was aborted (sync interpreter): it ends the run as cancelled.
                raise ProviderError(
                    ApiError(status=self.status or None, message=reason, error_type="cancelled")
                )

    def deadline_error(self) -> ProviderError:
        # Not retryable: the caller gave the call this long; a retry would take as long.
        err = broken_stream(
            self.status or None,
            f"the model call did not end within its deadline ({self.total:g} s total, "
            "Timeouts.total, or the run's timeout)",
            started=self.started, error_type=DEADLINE_EXCEEDED, request_id=self._request_id,
        )
        return self._scrubbed(msgspec.structs.replace(err, retryable=False))

    def _over(self, what: str, cap: int) -> ProviderError:
        return limit_exceeded(
            self.status, f"{what} is larger than its cap of {cap} bytes (Limits)",
            started=self.started, request_id=self._request_id,
        )

    # --- the response ------------------------------------------------------------------
    def error(self, body: bytes, *, cut: bool = False) -> ProviderError:
        key = self._endpoint.api_key
        if key is not None:
            # Before anything cuts the body into pieces that could split the key.
            text = key.scrub(body.decode("utf-8", "surrogateescape"), cut=cut)
            body = text.encode("utf-8", "surrogateescape")
        return self._scrubbed(
            classify_response(
                self.status, self._headers, body, now=self._clock(), reason=self._reason
            )
        )

    def feed(self, chunk: bytes) -> list[ModelEvent]:
        self.received += len(chunk)
        if self._json is not None:
            if self.received > self.limits.max_body:
                raise self._over("the response body", self.limits.max_body)
            self._json += chunk
            return []
        if self._sniff is not None:
            # Content type is not enough (a recorded stream says application/json): the
            # first bytes tell one JSON body from an event stream, or from neither.
            if not self._sniff:
                chunk = chunk.lstrip()  # blank bytes before either are not kept
                if not chunk:
                    return []
            self._sniff += chunk
            verdict = _sniff(bytes(self._sniff[:16]), final=False, sse=self._sse_framed)
            if verdict is None:
                return []
            buffered, self._sniff = bytes(self._sniff), None
            if verdict == "json":
                self._json = bytearray()
                self.received = 0
                return self.feed(buffered)
            if verdict == "other":
                raise self._not_expected(buffered)
            self._start_sse()
            chunk = buffered
        assert self._decoder is not None
        return self._decoder.feed(chunk)  # (it keeps the stream within Limits.max_stream)

    @property
    def _sse_framed(self) -> bool:
        # Only SSE is told by its first bytes; a binary framing by its content type.
        return self.encoded.framing is SSE_FRAMING

    def feeder(self) -> Callable[[bytes], list[ModelEvent]]:
        """What turns the body's bytes into events, once the head is in: `feed`, or for a
        response whose head says it is an event stream, the stream decoder's own `feed`
        (one call less per chunk)."""
        return self._decoder.feed if self._decoder is not None else self.feed

    def _not_expected(self, head: bytes) -> ProviderError:
        wanted = "an event stream" if self.stream else "a JSON body"
        snippet = " ".join(head[:200].decode("utf-8", "replace").split())
        return invalid_response(
            self.status,
            f"expected {wanted}, got {self._content_type or 'no content type'}: {snippet}",
            started=False, request_id=self._request_id,
        )

    def close(self) -> list[ModelEvent]:
        if self._sniff:
            head = bytes(self._sniff)
            if _sniff(head[:16], final=True, sse=self._sse_framed) != "other":
                self._sniff = None
                self.received -= len(head)
                self.feed(head)
                return self.close()
            raise self._not_expected(head)
        if self._json is not None:
            try:
                events = self._codec.decode_body(
                    self.encoded, bytes(self._json), status=self.status,
                    request_id=self._request_id,
                )
            except ProviderError as e:
                if self.stream and e.error.error_type == "invalid_response":
                    raise ProviderError(
                        msgspec.structs.replace(
                            e.error,
                            message=f"expected an event stream, got "
                            f"{self._content_type or 'no content type'}: {e.error.message}",
                        )
                    ) from None
                raise
            return [self.encoded.restore(e) for e in events]
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

    def failure(self, exc: httpx.HTTPError | ProviderError) -> ProviderError:
        """What the call raises for what broke it: a transport failure classified, a
        provider error with the key scrubbed from it."""
        if isinstance(exc, httpx.HTTPError):
            return self.transport_error(exc)
        return self.scrub(exc)

    def transport_error(self, exc: httpx.HTTPError) -> ProviderError:
        name = type(exc).__name__
        detail = str(exc) or name
        if self.status == 0:
            # Nothing came back: the request may not even have arrived. Always retryable.
            if isinstance(exc, httpx.TimeoutException) and self.past_deadline():
                return self.deadline_error()
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
        if isinstance(exc, httpx.TimeoutException) and self.past_deadline():
            return self.deadline_error()  # the read timeout was cut to the deadline
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
        return scrubbed(self._endpoint.api_key, e)


class ErrorBody:
    """The body of an error response as it is read, kept to its cap
    (`Limits.max_error_body`): what the error's message is read from."""

    __slots__ = ("_buf", "_cap", "cut", "open")

    def __init__(self, cap: int) -> None:
        self._buf = bytearray()
        self._cap = cap
        self.open = True
        """Whether to read on: the body has not ended, nor reached its cap."""
        self.cut = False
        """Whether it was cut short, by its cap or the deadline."""

    def add(self, chunk: bytes | None) -> None:
        """The next bytes read; None: the body ended."""
        if chunk is None:
            self.open = False
            return
        self._buf += chunk
        if len(self._buf) >= self._cap:
            self.open, self.cut = False, True

    def stop(self, e: ProviderError) -> None:
        """A read failed: at the deadline, what came so far is the message; anything else
        (the run must stop, sync: the call ends as cancelled) is raised."""
        if e.error.error_type != DEADLINE_EXCEEDED:
            raise e
        self.open, self.cut = False, True

    @property
    def data(self) -> bytes:
        return bytes(self._buf[: self._cap])


def scrubbed(key: Secret | None, e: ApiError) -> ProviderError:
    """The error as a ProviderError, with the key replaced in every text field: a server
    may echo it in any of them."""
    if key is not None:
        e = msgspec.structs.replace(
            e,
            message=key.scrub(e.message),
            error_type=_opt(key, e.error_type),
            code=_opt(key, e.code),
            request_id=_opt(key, e.request_id),
            body=_opt(key, e.body),
        )
    return ProviderError(e)


def _opt(key: Secret, text: str | None) -> str | None:
    return key.scrub(text) if text is not None else None


_SSE_START = re.compile(rb"(?::|(?:data|event|id|retry)(?::|\r|\n|$))")
_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:")


Sniffed = Literal["json", "sse", "other"]


def _sniff(head: bytes, *, final: bool, sse: bool = True) -> Sniffed | None:
    """What the first non-blank bytes of a body look like; None: too few yet to tell
    (`final`: there are no more; `sse`: whether an SSE stream may be expected)."""
    head = head.removeprefix(b"\xef\xbb\xbf")
    if head[:1] in (b"{", b"["):
        return "json"
    if not sse:
        return "other"
    if _SSE_START.match(head) and (final or len(head) > 5 or head[:1] == b":"):
        return "sse"
    if not final and any(f.startswith(head) for f in _SSE_FIELDS):
        return None
    return "other"
