"""The async provider for one router id, and the async resolver that serves them all."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

import httpx

from interpreters.providers._async.http import AsyncHttpProvider
from interpreters.providers.exchange import Timeouts
from interpreters.providers.limits import Limits
from interpreters.providers.routes import Routes, check_wire_env, provider_config


def resolve_async_provider(
    model_id: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    stream: bool = True,
    timeouts: Timeouts | None = None,
    client: httpx.AsyncClient | None = None,
    env: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.time,
    limits: Limits | None = None,
) -> AsyncHttpProvider:
    """The `AsyncHttpProvider` for a router id. Fails before any request if misconfigured."""
    cfg = provider_config(model_id, base_url=base_url, api_key=api_key, env=env)
    return AsyncHttpProvider(
        cfg.endpoint, cfg.codec(), stream=stream, timeouts=timeouts, client=client, clock=clock,
        limits=limits,
    )


class AsyncResolver:
    """The `AsyncProviderResolver` of the async interpreter: one provider per router id,
    reused, all sharing one `httpx.AsyncClient` (closed by `aclose()`).

    Keys and base URLs are per route, so a key only ever goes to its own route's base
    URL: `api_keys={"openai": "sk-..."}`, `base_urls={"ollama": "http://gpu-box:11434/v1"}`
    (route names are the router prefixes, the keys of `ROUTES`). A route without an entry
    takes its key and base URL from its environment variables (`OPENAI_API_KEY`,
    `OLLAMA_BASE_URL`, ...), then its default base URL. `api_key=` and `base_url=` are
    short for `api_keys` / `base_urls` of the `openai-compatible` route: they serve ids
    without a router prefix (`my-model`) and `openai-compatible/` ids, never any other
    route. An unknown route name or a malformed key fails here; a missing key or base URL
    fails when an id of that route is first asked for, as a `ProviderConfigError` that
    names the variable (an interpreter reports it as an `ApiError` of type
    "configuration"); `check(ids)` finds them all at start-up.

    `client=` gives the providers a client of the caller's (one over
    `httpx.MockTransport` in tests, or with proxies): it is used as it is, its own
    timeouts included (each request still gets the call's), and `aclose()` leaves it open.
    """

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
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if client is not None and not isinstance(client, httpx.AsyncClient):
            # (else every request would fail on it, one at a time)
            raise TypeError(f"client must be an httpx.AsyncClient, not {type(client).__name__}")
        self._routes = Routes(api_keys, base_urls, api_key, base_url)
        check_wire_env(env)
        self._kw = (stream, timeouts, env)
        self._limits = limits
        self._own = client is None  # only a client it made is closed by aclose()
        self._client: httpx.AsyncClient | None = client
        self._providers: dict[str, AsyncHttpProvider] = {}

    def __call__(self, model_id: str) -> AsyncHttpProvider:
        p = self._providers.get(model_id)
        if p is None:
            stream, timeouts, env = self._kw
            cfg = self._routes.config(model_id, env)
            if self._client is None:
                self._client = httpx.AsyncClient(timeout=(timeouts or Timeouts()).httpx())
            p = AsyncHttpProvider(
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

    async def aclose(self) -> None:
        if self._client is not None and self._own:
            await self._client.aclose()
            self._client = None
        self._providers.clear()
