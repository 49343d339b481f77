"""Router ids (`openai/gpt-4o-mini`, `anthropic/claude-sonnet-4-5`, `ollama/qwen3`...) to
provider configurations, with keys from the usual environment variables; no I/O.
What each route is lives in the table of routes (providers/table.py).

`provider_config` is pure (the environment is a parameter); the providers and resolvers
(`HttpProviderBase.for_model` and `ResolverBase`, providers/common.py) build on it. A
missing key fails here, before any request, with a message that names the variable.
`Routes` holds a resolver's per-route keys and base URLs: a route's key is only ever sent
to that route's base URL, never to another provider's host.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

import msgspec

from interpreters.providers.codec import Codec, WireRoute
from interpreters.providers.exchange import Endpoint
from interpreters.providers.provider import ProviderError
from interpreters.providers.secret import Secret
from interpreters.providers.table import ROUTES, check_base_url, split_model, wire_format
from pipeline.values.model import ApiError


class ProviderConfigError(ProviderError, ValueError):
    """A model id that cannot be served as configured (unknown prefix, missing key).

    Also a `ProviderError`, so an interpreter whose resolver raises it reports it as
    `ApiError(status=None, error_type="configuration", retryable=False)` with this
    message, rather than as a generic provider failure."""

    def __init__(self, message: str) -> None:
        super().__init__(
            ApiError(status=None, message=message, error_type="configuration", retryable=False)
        )
        self.args = (message,)

    def __str__(self) -> str:
        return str(self.args[0])


class ProviderConfig(msgspec.Struct, frozen=True):
    """Everything needed to build a provider for one router id (no connection yet)."""

    model_id: str
    model: str
    """The model name sent on the wire (the id without its router prefix)."""
    route: str
    endpoint: Endpoint
    wire: str
    """The name of its route's wire format."""
    options: msgspec.Struct | None = None
    """Its route's options for that wire format."""

    def codec(self) -> Codec:
        return wire_format(self.wire).codec(WireRoute(self.route, self.options))


def provider_config(
    model_id: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ProviderConfig:
    """Parse a router id and settle its endpoint and key. Raises ProviderConfigError.

    `base_url` and `api_key` are for this one id: they override its route's environment
    variables (and a bare id with a `base_url` is an `openai-compatible` one). To serve
    many ids, use a `Resolver`, whose keys are per route."""
    env = os.environ if env is None else env
    prefix, name = split_model(model_id)
    if prefix is not None:
        route_name = prefix
    elif base_url is not None and model_id:
        route_name, name = "openai-compatible", model_id
    else:
        known = ", ".join(f"{p}/" for p in ROUTES)
        raise ProviderConfigError(
            f"unknown model id {model_id!r}: use a router prefix ({known}) "
            "or give a base URL for an OpenAI-compatible server"
        )
    route = ROUTES[route_name]
    url = base_url or (env.get(route.base_url_env) if route.base_url_env else None)
    url = url or route.base_url
    if not url:
        raise ProviderConfigError(
            f"{route_name}/ needs a base URL: pass base_url= (the CLI's --base-url)"
            + (f" or set {route.base_url_env}" if route.base_url_env else "")
        )
    url = _with_region(url, route_name, route.region_env, route.base_url_env, env)
    _check_url(url)
    where = "api_key="
    key = api_key
    if key is None:
        for where in route.key_envs:
            key = env.get(where)
            if key:
                break
    if not key:
        if route.key_required:
            raise ProviderConfigError(
                f"no API key for {route_name}/ models: set the "
                f"{' or '.join(route.key_envs)} environment variable or pass it in code: "
                f"Resolver(api_keys={{{route_name!r}: ...}})"
            )
        key = None
    try:
        secret = Secret(key) if key else None
    except ValueError:
        raise ProviderConfigError(f"the API key from {where} is malformed") from None
    wire, options = route.wire, route.options
    chosen = _chosen_wire(route_name, env)
    if chosen is not None and chosen != wire:
        wire, options = chosen, None  # that format's defaults
    # A key, where the route takes one, stands in for signing (a Bedrock API key).
    sign = None
    if route.signer is not None and secret is None:
        try:
            sign = route.signer(url, env)
        except ValueError as e:
            raise ProviderConfigError(f"{route_name}/: {e}") from None
    return ProviderConfig(
        model_id=model_id,
        model=name,
        route=route_name,
        endpoint=Endpoint(provider=route_name, base_url=url, api_key=secret, sign=sign),
        wire=wire,
        options=options,
    )


def _chosen_wire(route_name: str, env: Mapping[str, str]) -> str | None:
    """The wire format the route's `wire_env` variable names, if set; raises for a value
    that is not one of its `wire_choices`."""
    route = ROUTES[route_name]
    chosen = env.get(route.wire_env) if route.wire_env else None
    if chosen and chosen not in route.wire_choices:
        raise ProviderConfigError(
            f"{route.wire_env}={chosen!r} is not a wire format {route_name}/ speaks: "
            f"use one of {', '.join(repr(w) for w in route.wire_choices)}"
        )
    return chosen or None


def check_wire_env(env: Mapping[str, str] | None) -> None:
    """Refuse, when a resolver is made, a route's wire-format variable (`OPENAI_WIRE`)
    set to a format that route does not speak."""
    env = os.environ if env is None else env
    for name in ROUTES:
        _chosen_wire(name, env)


_REGION = re.compile(r"^[a-z0-9-]{1,40}$")


def _with_region(
    url: str, route: str, region_env: tuple[str, ...], url_env: str | None,
    env: Mapping[str, str],
) -> str:
    """The base URL with `{region}` filled from the first of `region_env` that is set."""
    if "{region}" not in url:
        return url
    region = next((env[v] for v in region_env if env.get(v)), None)
    if region is None:
        raise ProviderConfigError(
            f"{route}/ needs a region: set {' or '.join(region_env)}"
            + (f", or {url_env} to a base URL" if url_env else "")
        )
    if not _REGION.match(region):
        raise ProviderConfigError(f"the region {region!r} is not a region name (us-east-1)")
    return url.replace("{region}", region)


def _check_url(url: str) -> None:
    try:
        check_base_url(url)
    except ValueError as e:
        raise ProviderConfigError(str(e)) from None


def _hold(api_key: str, where: str) -> Secret:
    # Kept as a Secret so the resolver's attributes never show the key.
    try:
        return Secret(api_key)
    except ValueError:
        raise ProviderConfigError(f"the API key from {where} is malformed") from None


COMPATIBLE = "openai-compatible"


def route_of(model_id: str) -> str:
    """The route a router id belongs to: its prefix, or `openai-compatible` for an id
    without a known prefix (served only when that route has a base URL)."""
    return split_model(model_id)[0] or COMPATIBLE


class Routes:
    """Per-route keys and base URLs, checked when the resolver is made."""

    def __init__(
        self,
        api_keys: Mapping[str, str] | None,
        base_urls: Mapping[str, str] | None,
        api_key: str | None,
        base_url: str | None,
    ) -> None:
        keys, urls = dict(api_keys or {}), dict(base_urls or {})
        where = {r: f"api_keys[{r!r}]" for r in keys} | {COMPATIBLE: "api_key="}
        for given, value, table in (("api_key", api_key, keys), ("base_url", base_url, urls)):
            if value is None:
                continue
            if COMPATIBLE in table:
                raise ProviderConfigError(
                    f"{given}= and {given}s={{{COMPATIBLE!r}: ...}} both configure "
                    f"{COMPATIBLE}/ ids: give one"
                )
            table[COMPATIBLE] = value
        for name in (*keys, *urls):
            if name not in ROUTES:
                known = ", ".join(repr(p) for p in ROUTES)
                raise ProviderConfigError(f"unknown route {name!r}: the routes are {known}")
        self.keys = {r: _hold(k, where[r]) for r, k in keys.items()}
        for url in urls.values():
            _check_url(url)
        self.urls = urls

    def config(self, model_id: str, env: Mapping[str, str] | None) -> ProviderConfig:
        route = route_of(model_id)
        key = self.keys.get(route)
        return provider_config(
            model_id,
            base_url=self.urls.get(route),
            api_key=key.reveal() if key is not None else None,
            env=env,
        )

    def check(self, model_ids: str | Iterable[str], env: Mapping[str, str] | None) -> None:
        """Raise one ProviderConfigError naming every id that cannot be served and why
        (each missing variable once, with the ids that need it); builds nothing."""
        ids = (model_ids,) if isinstance(model_ids, str) else tuple(model_ids)
        problems: dict[str, list[str]] = {}
        for model_id in dict.fromkeys(ids):
            try:
                self.config(model_id, env)
            except ProviderConfigError as e:
                problems.setdefault(str(e), []).append(model_id)
        if problems:
            lines = [f"- {why} (for {', '.join(who)})" for why, who in problems.items()]
            raise ProviderConfigError(
                f"{sum(map(len, problems.values()))} of {len(dict.fromkeys(ids))} model ids "
                "cannot be served:\n" + "\n".join(lines)
            )
