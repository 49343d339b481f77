"""What the sync and async HTTP providers and resolvers share, written once.

`HttpProviderBase` and `ResolverBase` hold all that is not a wait: settings and their
checks, the client a provider or resolver makes, the provider for a router id, the
resolver's table of providers, the request of a call. The async classes
(`providers/_async/`) add only their awaits and `aclose()`, and the sync ones are
generated from them by `scripts/unasync.py`, so the two sides cannot drift.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, Self, TypeVar

import httpx

from interpreters.providers.codec import Codec
from interpreters.providers.exchange import Endpoint, Exchange, Timeouts
from interpreters.providers.limits import Limits
from interpreters.providers.provider import ProviderError
from interpreters.providers.routes import (
    ProviderConfigError,
    Routes,
    check_wire_env,
    provider_config,
)
from pipeline.values.model import ModelRequest, StructuredOutput

Client = TypeVar("Client", httpx.Client, httpx.AsyncClient)
_Provider = TypeVar("_Provider", bound="HttpProviderBase[Any]")
_Stream = TypeVar("_Stream", httpx.SyncByteStream, httpx.AsyncByteStream)


class HttpProviderBase(Generic[Client]):
    """What the sync and async HTTP providers share: settings, client, repr, one
    `Exchange` and one request a call."""

    _client_class: type[Client]
    """The client it makes when none is given (each provider class sets it)."""

    def __init__(
        self,
        endpoint: Endpoint,
        codec: Codec,
        *,
        stream: bool = True,
        timeouts: Timeouts | None = None,
        client: Client | None = None,
        clock: Callable[[], float] = time.time,
        limits: Limits | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.codec = codec
        self.streaming = stream
        self.timeouts = timeouts or Timeouts()
        self.limits = limits or Limits()
        self._clock = clock
        self._own = client is None  # only a client it made is closed by close()/aclose()
        self._client: Client | None = client

    @classmethod
    def for_model(
        cls,
        model_id: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        stream: bool = True,
        timeouts: Timeouts | None = None,
        client: Client | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        limits: Limits | None = None,
    ) -> Self:
        """The provider for a router id (`resolve_provider` and `resolve_async_provider`
        are this of `HttpProvider` and `AsyncHttpProvider`). Fails before any request if
        misconfigured."""
        cfg = provider_config(model_id, base_url=base_url, api_key=api_key, env=env)
        return cls(
            cfg.endpoint, cfg.codec(), stream=stream, timeouts=timeouts, client=client,
            clock=clock, limits=limits,
        )

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = _new_client(self._client_class, self.timeouts.httpx())
        return self._client

    def __repr__(self) -> str:
        # No headers and no key: only where the calls go.
        return (
            f"{type(self).__name__}(provider={self.endpoint.provider!r}, "
            f"base_url={self.endpoint.base_url!r}, stream={self.streaming})"
        )

    def check_output(self, so: StructuredOutput) -> None:
        """Raise `ProviderConfigError` when its route cannot send structured output in
        `so`'s mode (`OutputMode`): the interpreters ask before a run starts."""
        check = getattr(self.codec, "check_output", None)
        if check is None:
            return
        try:
            check(so)
        except ProviderError as e:
            raise ProviderConfigError(e.error.message) from None

    def _exchange(self, request: ModelRequest) -> Exchange:
        return Exchange(
            self.endpoint, self.codec, request, stream=self.streaming, clock=self._clock,
            timeouts=self.timeouts, limits=self.limits,
        )

    def _request(self, ex: Exchange) -> httpx.Request:
        """The call's request, none of its httpx timeouts longer than what is left of the
        deadline (and none built past it)."""
        ex.check_deadline()
        return self.client.build_request(
            "POST", ex.url, content=ex.encoded.body, headers=ex.headers(),
            timeout=self.timeouts.httpx(ex.remaining()),
        )


class ResolverBase(Generic[Client, _Provider]):
    """What the sync and async resolvers share: the routes' keys and base URLs, one
    provider per router id, one client for them all."""

    _provider_class: type[_Provider]
    """The provider it makes for each router id (each resolver class sets it)."""

    def __init__(
        self,
        *,
        api_keys: Mapping[str, str] | None = None,
        base_urls: Mapping[str, str] | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        stream: bool = True,
        timeouts: Timeouts | None = None,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        client: Client | None = None,
    ) -> None:
        """Keys and base URLs are per route, so a key only ever goes to its own route's
        base URL: `api_keys={"openai": "sk-..."}`, `base_urls={"ollama":
        "http://gpu-box:11434/v1"}` (route names are the router prefixes, the keys of
        `ROUTES`). A route without an entry takes its key and base URL from its
        environment variables (`OPENAI_API_KEY`, `OLLAMA_BASE_URL`, ...), then its default
        base URL. `api_key=` and `base_url=` are short for `api_keys` / `base_urls` of the
        `openai-compatible` route: they serve ids without a router prefix (`my-model`) and
        `openai-compatible/` ids, never any other route. An unknown route name or a
        malformed key fails here; a missing key or base URL fails when an id of that route
        is first asked for, as a `ProviderConfigError` that names the variable (an
        interpreter reports it as an `ApiError` of type "configuration"); `check(ids)`
        finds them all at start-up.

        `client=` gives the providers a client of the caller's (one over
        `httpx.MockTransport` in tests, or with proxies): it is used as it is, its own
        timeouts included (each request still gets the call's), and `close()` /
        `aclose()` leaves it open.
        """
        wanted = self._provider_class._client_class
        if client is not None and not isinstance(client, wanted):
            # (else every request would fail on it, one at a time)
            raise TypeError(
                f"client must be an httpx.{wanted.__name__}, not {type(client).__name__}"
            )
        self._routes = Routes(api_keys, base_urls, api_key, base_url)
        check_wire_env(env)
        self._kw = (stream, timeouts, env)
        self._limits = limits
        self._own = client is None  # only a client it made is closed by close()/aclose()
        self._client: Client | None = client
        self._providers: dict[str, _Provider] = {}

    def __call__(self, model_id: str) -> _Provider:
        p = self._providers.get(model_id)
        if p is None:
            stream, timeouts, env = self._kw
            cfg = self._routes.config(model_id, env)
            if self._client is None:
                self._client = _new_client(
                    self._provider_class._client_class, (timeouts or Timeouts()).httpx()
                )
            p = self._provider_class(
                cfg.endpoint, cfg.codec(), stream=stream, timeouts=timeouts,
                client=self._client, limits=self._limits,
            )
            self._providers[model_id] = p
        return p

    def check(self, model_ids: str | Iterable[str]) -> None:
        """Check at start-up that every id can be served (`resolver.check(["openai/gpt-4o",
        "anthropic/claude-sonnet-4-5"])`): raises one `ProviderConfigError` that names every
        missing key or base URL variable and every unknown id, instead of a configuration
        error on each request. Builds no provider and sends nothing."""
        self._routes.check(model_ids, self._kw[2])


def _new_client(kind: type[Client], timeout: httpx.Timeout) -> Client:
    """The client a provider or resolver makes for itself: an async one reads over
    asyncio's own transports under asyncio (`asyncio_net.py`)."""
    if kind is httpx.AsyncClient:
        from interpreters.providers import asyncio_net

        return asyncio_net.client(timeout)  # type: ignore[return-value]
    return kind(timeout=timeout)


def raw_stream(response: httpx.Response, kind: type[_Stream]) -> _Stream | None:
    """The response's own byte stream, marked consumed, to read the body from as the
    connection delivers it (fewer generator steps per chunk than httpx's
    `iter_raw`/`aiter_raw`, which count bytes nobody here reads, and its decoder layer);
    None where httpx must serve the body: it has a Content-Encoding to undo, it was read
    before the client saw it (a test double's `httpx.Response(content=b"...")`:
    MockTransport, respx's handlers), or it is not a stream of this `kind` (then httpx
    raises its own error)."""
    if response.is_stream_consumed or "content-encoding" in response.headers:
        return None
    stream = response.stream
    if not isinstance(stream, kind):
        return None
    response.is_stream_consumed = True
    return stream
