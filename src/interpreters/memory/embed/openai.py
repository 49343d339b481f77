"""Embedders: texts to vectors for semantic recall.

- `OpenAIEmbedder` / `AsyncOpenAIEmbedder`: the OpenAI-compatible `POST /embeddings`,
  which OpenAI, Ollama (`ollama/...`, http://localhost:11434/v1) and vLLM (`vllm/...`,
  http://localhost:8000/v1) serve, over httpx. Named like a model (`openai/text-embedding-
  3-small`): the route, base URL and key come from the providers' table of routes and the
  same environment variables. Batched (`batch_size` texts per request at most), with the
  model calls' rules: a total deadline over the whole `embed` call (`Timeouts.total`,
  retries and all) and httpx's per-phase timeouts cut to what is left of it, a cap on the
  bytes read (`Limits.max_body`, `Limits.max_error_body`), transient failures (429, 5xx,
  connection failures) retried by a `RetryPolicy` honouring Retry-After, the key kept in
  a `Secret` and scrubbed from every error.
- `ScriptedEmbedder`: for tests and the simulator, vectors scripted per text, else a
  `HashEmbedder`'s.

Whatever fails is an `EmbeddingError` (a `ProviderError`): its `error` says how, like a
model call's (`invalid_response` for a response that does not fit the request: another
number of vectors, another dimension count, values that are not numbers).
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel
import httpx
import msgspec

from interpreters.memory.embed.exchange import (
    Bounds,
    Reply,
    aread,
    invalid,
    read,
)
from interpreters.memory.embed.exchange import EmbeddingError as EmbeddingError
from interpreters.memory.embed.scripted import ScriptedEmbedder as ScriptedEmbedder
from interpreters.memory.store import AsyncEmbedder as AsyncEmbedder
from interpreters.memory.store import Vector
from interpreters.providers.errors import request_id_of
from interpreters.providers.exchange import Endpoint, Timeouts
from interpreters.providers.limits import Limits
from interpreters.providers.owned_client import OwnedClient
from interpreters.providers.routes import ProviderConfigError, provider_config
from interpreters.providers.table import ROUTES
from pipeline.values.retry import RetryPolicy

MAX_BATCH = 2048
"""The most texts one request may carry (OpenAI's own bound)."""


TIMEOUTS = Timeouts()
LIMITS = Limits()
RETRY = RetryPolicy()


class _Item(msgspec.Struct, frozen=True):
    index: int
    embedding: list[float]


class _Body(msgspec.Struct, frozen=True):
    data: list[_Item]


_body = msgspec.json.Decoder(_Body)

_C = TypeVar("_C", httpx.Client, httpx.AsyncClient)
_R = TypeVar("_R", None, Awaitable[None])
"""What an embedder's `sleep` returns: nothing (sync) or what is awaited (async)."""


class _Calls(msgspec.Struct, frozen=True):
    """What both embedders share, free of I/O: their checked options, the requests,
    reading the answers, the errors and when to retry."""

    endpoint: Endpoint
    url: str
    model: str
    dimensions: int | None
    batch_size: int
    timeouts: Timeouts
    limits: Limits
    retry: RetryPolicy
    clock: Callable[[], float]

    def batches(self, texts: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"embed takes strs, not {type(t).__name__}")
        for i in range(0, len(texts), self.batch_size):
            yield texts[i : i + self.batch_size]

    def request(self, batch: tuple[str, ...], remaining: float) -> httpx.Request:
        body: dict[str, object] = {"model": self.model, "input": list(batch),
                                   "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers.update(self.endpoint.headers)
        if self.endpoint.api_key is not None:
            headers["authorization"] = f"Bearer {self.endpoint.api_key.reveal()}"
        return httpx.Request(
            "POST", self.url, content=msgspec.json.encode(body), headers=headers,
            extensions={"timeout": self.timeouts.httpx(remaining).as_dict()},
        )

    # --- answers (embed/exchange.py: the same rules for every embedder) -------------
    @property
    def bounds(self) -> Bounds:
        return Bounds(self.endpoint.api_key, self.timeouts, self.limits, self.clock)

    def decode(
        self, batch: tuple[str, ...], body: bytes, status: int, headers: Mapping[str, str],
        dim: int | None,
    ) -> tuple[Vector, ...]:
        """The batch's vectors, in the batch's order; EmbeddingError when the answer does
        not fit (`dim`: the dimension count earlier batches had)."""
        rid = request_id_of(headers)
        try:
            items = _body.decode(body).data
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise self.invalid(
                status, f"the response is not an embeddings list: {e}", rid
            ) from None
        if len(items) != len(batch):
            raise self.invalid(
                status, f"{len(items)} embeddings for {len(batch)} texts", rid
            )
        if sorted(i.index for i in items) != list(range(len(batch))):
            raise self.invalid(status, "the embeddings' indexes are not 0 to n-1", rid)
        want = self.dimensions if self.dimensions is not None else dim
        out: list[Vector] = [()] * len(batch)
        for item in items:
            v = tuple(item.embedding)
            if want is None:
                want = len(v)
            if len(v) != want or not v:
                raise self.invalid(
                    status, f"an embedding of {len(v)} dimensions where {want} were due", rid
                )
            if not all(math.isfinite(x) for x in v):
                raise self.invalid(status, "an embedding holds a value that is not finite", rid)
            out[item.index] = v
        return tuple(out)

    def invalid(self, status: int, message: str, request_id: str | None) -> EmbeddingError:
        return invalid(status, message, request_id)

    def wait(self, failure: EmbeddingError, attempt: int, deadline: float) -> float:
        """Seconds to wait before trying again; raises `failure` when it is not retried."""
        e = failure.error
        if not e.retryable or attempt >= self.retry.max_retries or not self.retry.waits(
            e.retry_after
        ):
            raise failure
        delay = self.retry.delay(attempt, f"embed:{self.model}", e.retry_after)
        if time.monotonic() + delay >= deadline:
            raise failure
        return delay


class _Run:
    """One `embed` call, free of I/O: the requests to make, batch by batch, each made
    again as the retry policy says, and the vectors gathered from the replies."""

    def __init__(self, calls: _Calls, texts: tuple[str, ...]) -> None:
        self.calls = calls
        self.texts = tuple(texts)
        self.deadline = time.monotonic() + calls.timeouts.total
        self._dim: int | None = None
        self._out: list[Vector] = []
        self._reply: Reply | EmbeddingError | None = None

    def requests(self) -> Iterator[tuple[tuple[str, ...], float | None]]:
        """Each request's batch and the seconds to wait before it (None: its first try);
        each to be answered with `reply` before the next. Raises the failure that is
        not tried again."""
        for batch in self.calls.batches(self.texts):
            attempt, delay = 0, None
            vectors: tuple[Vector, ...] | None = None
            while vectors is None:
                yield batch, delay
                try:
                    vectors = self._vectors(batch)
                except EmbeddingError as failure:
                    delay = self.calls.wait(failure, attempt, self.deadline)
                    attempt += 1
            self._dim = len(vectors[0])
            self._out += vectors

    def reply(self, reply: Reply | EmbeddingError) -> None:
        self._reply = reply

    def vectors(self) -> tuple[Vector, ...]:
        return tuple(self._out)

    def remaining(self) -> float:
        """Seconds left for the next request; past the deadline, its error."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.calls.bounds.past_deadline()
        return left

    def failed(self, exc: httpx.HTTPError, status: int) -> EmbeddingError:
        # A timeout cut to the deadline fires at it, give or take the clock's grain.
        past = time.monotonic() >= self.deadline - 0.005
        bounds = self.calls.bounds
        return bounds.past_deadline() if past else bounds.transport(exc, status)

    def _vectors(self, batch: tuple[str, ...]) -> tuple[Vector, ...]:
        reply, self._reply = self._reply, None
        assert reply is not None, "each request is answered before the next"
        if isinstance(reply, EmbeddingError):
            # Raised here, not where the httpx error was caught: that error (whose
            # request holds the key) must not ride along as __context__.
            raise reply
        body = self.calls.bounds.body(reply)
        return self.calls.decode(batch, body, reply.status, reply.headers, self._dim)


class _Embedding(ABC, Generic[_C, _R]):
    """The OpenAI-compatible embedders' constructor, once: its options checked, the
    client made when none is given. The subclasses send and read, sync or async; `sleep`
    (None: `time.sleep` for the sync class, `anyio.sleep` for the async one) waits
    before a request is made again."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        env: Mapping[str, str] | None = None,
        dimensions: int | None = None,
        batch_size: int = 128,
        timeouts: Timeouts = TIMEOUTS,
        limits: Limits = LIMITS,
        retry: RetryPolicy = RETRY,
        client: _C | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], _R] | None = None,
    ) -> None:
        config = provider_config(model, base_url=base_url, api_key=api_key, env=env)
        if ROUTES[config.route].wire != ROUTES["openai"].wire:
            raise ProviderConfigError(
                f"{config.route}/ does not serve OpenAI-compatible /embeddings"
            )
        if dimensions is not None and (type(dimensions) is not int or dimensions < 1):
            raise ValueError(f"dimensions must be an int of at least 1, got {dimensions!r}")
        if type(batch_size) is not int or not 1 <= batch_size <= MAX_BATCH:
            raise ValueError(f"batch_size must be an int from 1 to {MAX_BATCH}, "
                             f"got {batch_size!r}")
        for name, value, kind in (("timeouts", timeouts, Timeouts), ("limits", limits, Limits),
                                  ("retry", retry, RetryPolicy)):
            if not isinstance(value, kind):
                raise TypeError(f"{name} must be a {kind.__name__}")
        self._calls = _Calls(
            config.endpoint, config.endpoint.url("/embeddings"), config.model, dimensions,
            batch_size, timeouts, limits, retry, clock,
        )
        self._own = client is None
        self._client: _C = client if client is not None else self._new_client()
        self._sleep: Callable[[float], _R] = sleep if sleep is not None else self._wait

    @abstractmethod
    def _new_client(self) -> _C: ...

    @abstractmethod
    def _wait(self, seconds: float) -> _R: ...

    def __repr__(self) -> str:
        c = self._calls
        return f"{type(self).__name__}({c.model!r}, base_url={c.endpoint.base_url!r})"


class OpenAIEmbedder(_Embedding[httpx.Client, None], OwnedClient):
    """An `Embedder` over OpenAI-compatible `/embeddings` (sync, httpx.Client).

    `model`: a router id (`openai/text-embedding-3-small`, `ollama/nomic-embed-text`,
    `vllm/BAAI/bge-m3`) or, with `base_url`, a bare model name. `dimensions`: asked of
    the server (OpenAI's v3 models shorten their vectors) and checked on every answer.
    """

    def _new_client(self) -> httpx.Client:
        return httpx.Client()

    def _wait(self, seconds: float) -> None:
        time.sleep(seconds)

    def embed(self, texts: tuple[str, ...]) -> tuple[Vector, ...]:
        run = _Run(self._calls, texts)
        for batch, delay in run.requests():
            if delay is not None:
                self._sleep(delay)
            run.reply(self._send(batch, run))
        return run.vectors()

    def _send(self, batch: tuple[str, ...], run: _Run) -> Reply | EmbeddingError:
        calls, remaining, status = self._calls, run.remaining(), 0
        try:
            resp = self._client.send(calls.request(batch, remaining), stream=True)
            try:
                status = resp.status_code
                body, cut = read(resp.iter_bytes(), calls.bounds.cap(status), run.deadline)
            finally:
                resp.close()
        except httpx.HTTPError as e:
            return run.failed(e, status)
        return Reply(status, resp.headers, resp.reason_phrase, body, cut)


class AsyncOpenAIEmbedder(_Embedding[httpx.AsyncClient, Awaitable[None]]):
    """The async `OpenAIEmbedder` (httpx.AsyncClient); the same options."""

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient()

    async def _wait(self, seconds: float) -> None:
        await anyio.sleep(seconds)

    async def embed(self, texts: tuple[str, ...]) -> tuple[Vector, ...]:
        run = _Run(self._calls, texts)
        for batch, delay in run.requests():
            if delay is not None:
                await self._sleep(delay)
            run.reply(await self._send(batch, run))
        return run.vectors()

    async def _send(self, batch: tuple[str, ...], run: _Run) -> Reply | EmbeddingError:
        calls, remaining, status = self._calls, run.remaining(), 0
        try:
            with anyio.fail_after(remaining):
                resp = await self._client.send(calls.request(batch, remaining), stream=True)
                try:
                    status = resp.status_code
                    body, cut = await aread(resp.aiter_bytes(), calls.bounds.cap(status))
                finally:
                    await resp.aclose()
        except TimeoutError:
            return calls.bounds.past_deadline()
        except httpx.HTTPError as e:
            return run.failed(e, status)
        return Reply(status, resp.headers, resp.reason_phrase, body, cut)

    async def aclose(self) -> None:
        if self._own:
            await self._client.aclose()

    async def __aenter__(self) -> AsyncOpenAIEmbedder:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
