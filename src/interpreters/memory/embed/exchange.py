"""One embedding request's HTTP exchange, the same for every embedder (OpenAI-compatible,
Gemini, Bedrock): each file keeps its wire format (URL, headers, body, decoding) and hands
the rest here. The rules are the model calls' (providers/exchange.py): a redirect is a
failure (nothing follows it: a wrong base URL); an error body is read up to
`Limits.max_error_body` and classified, a success body over `Limits.max_body` is
`limit_exceeded`; a body still coming at `Timeouts.total` is `deadline_exceeded`; an answer
that is not the embeddings asked for is `invalid_response`; every failure an
`EmbeddingError` with the key scrubbed from it, never a partial answer."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import NamedTuple, TypeVar

import httpx
import msgspec

from interpreters.memory.store import EmbeddingError as EmbeddingError
from interpreters.providers.errors import classify_response, request_id_of
from interpreters.providers.exchange import DEADLINE_EXCEEDED, Timeouts, scrubbed
from interpreters.providers.limits import LIMIT_EXCEEDED, Limits
from interpreters.providers.secret import Secret
from pipeline.values.model import ApiError

INVALID_RESPONSE = "invalid_response"
_T = TypeVar("_T")


class Reply(NamedTuple):
    """A response read (closed): its head, its body up to the cap, and whether there
    was more."""

    status: int
    headers: Mapping[str, str]
    reason: str
    body: bytes
    cut: bool


class Bounds(msgspec.Struct, frozen=True):
    """One embedder's bounds and key: what its replies are read and judged by."""

    key: Secret | None
    timeouts: Timeouts
    limits: Limits
    clock: Callable[[], float] = time.time
    """The wall clock, for a Retry-After given as a date."""

    def cap(self, status: int) -> int:
        return self.limits.max_body if status < 300 else self.limits.max_error_body

    def body(self, reply: Reply) -> bytes:
        """A success's body; the failure the reply says, raised."""
        if reply.status >= 300:  # redirects are not followed: a wrong base URL
            raise self.rejected(reply)
        if reply.cut:
            raise EmbeddingError(ApiError(
                status=reply.status, error_type=LIMIT_EXCEEDED,
                request_id=request_id_of(reply.headers),
                message=f"the response body is larger than its cap of "
                f"{self.cap(reply.status)} bytes (Limits)"))
        return reply.body

    def rejected(self, reply: Reply) -> EmbeddingError:
        body = reply.body
        if self.key is not None:
            # Before anything cuts the body into pieces that could split the key.
            body = self.key.scrub(body.decode("utf-8", "surrogateescape"), cut=reply.cut
                                  ).encode("utf-8", "surrogateescape")
        return self.scrubbed(classify_response(reply.status, reply.headers, body,
                                               now=self.clock(), reason=reply.reason))

    def transport(self, exc: httpx.HTTPError, status: int) -> EmbeddingError:
        name = type(exc).__name__
        kind = "timeout" if isinstance(exc, httpx.TimeoutException) else "connection_error"
        # Nothing usable came back: the call may be made again.
        return self.scrubbed(ApiError(status=status or None, message=f"{name}: {exc or name}",
                                      error_type=kind, retryable=True))

    def past_deadline(self) -> EmbeddingError:
        # Not retryable: the caller gave the call this long; a retry would take as long.
        return EmbeddingError(ApiError(
            status=None, error_type=DEADLINE_EXCEEDED,
            message=f"the embedding call did not end within its deadline "
            f"({self.timeouts.total:g} s total, Timeouts.total)"))

    def scrubbed(self, error: ApiError) -> EmbeddingError:
        return EmbeddingError(scrubbed(self.key, error).error)


def invalid(status: int, message: str, request_id: str | None = None) -> EmbeddingError:
    return EmbeddingError(ApiError(status=status, message=message,
                                   error_type=INVALID_RESPONSE, request_id=request_id))


def decoded(decoder: msgspec.json.Decoder[_T], body: bytes, status: int = 200,
            request_id: str | None = None) -> _T:
    """`body` decoded; `invalid_response` when it is not what was asked for."""
    try:
        return decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise invalid(status, f"the response is not an embeddings answer: {e}",
                      request_id) from None


def read(chunks: Iterator[bytes], cap: int, deadline: float,
         now: Callable[[], float] = time.monotonic) -> tuple[bytes, bool]:
    """The body up to `cap` bytes, and True when there was more; httpx.ReadTimeout when
    the deadline passes while it is read."""
    buf = bytearray()
    for chunk in chunks:
        buf += chunk
        if len(buf) > cap:
            return bytes(buf[:cap]), True
        if now() >= deadline:
            raise httpx.ReadTimeout("the deadline passed while reading the body")
    return bytes(buf), False


async def aread(chunks: AsyncIterator[bytes], cap: int) -> tuple[bytes, bool]:
    """`read` for an async body (its deadline is the caller's cancel scope)."""
    buf = bytearray()
    async for chunk in chunks:
        buf += chunk
        if len(buf) > cap:
            return bytes(buf[:cap]), True
    return bytes(buf), False


def post(client: httpx.Client, bounds: Bounds, url: str, content: bytes,
         headers: Mapping[str, str], *, now: Callable[[], float] = time.monotonic
         ) -> tuple[bytes, Reply]:
    """One POST, made once (the caller decides whether to try again): the success's body
    and the reply, or the `EmbeddingError` it ended with."""
    t = bounds.timeouts
    deadline = now() + t.total
    status, failure, reply = 0, None, None
    try:
        with client.stream("POST", url, content=content, headers=headers,
                           timeout=t.httpx(t.total)) as r:
            status = r.status_code
            body, cut = read(r.iter_bytes(), bounds.cap(status), deadline, now)
            reply = Reply(status, r.headers, r.reason_phrase, body, cut)
    except httpx.HTTPError as e:
        # A timeout cut to the deadline fires at it, give or take the clock's grain.
        past = now() >= deadline - 0.005
        failure = bounds.past_deadline() if past else bounds.transport(e, status)
    if failure is not None or reply is None:
        # Raised outside the except block: the httpx error's request holds the key.
        raise failure or bounds.past_deadline()
    return bounds.body(reply), reply
