"""Router ids (`openai/gpt-4o-mini`, `anthropic/claude-sonnet-4-5`, `ollama/qwen3`...) to
provider configurations, with keys from the usual environment variables; no I/O.

`provider_config` is pure (the environment is a parameter); the providers and resolvers
(`providers/_async/router.py`, and `_sync/router.py` generated from it) build on it. A
missing key fails here, before any request, with a message that names the variable.
`Routes` holds a resolver's per-route keys and base URLs: a route's key is only ever sent
to that route's base URL, never to another provider's host.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Literal

import msgspec

from interpreters.providers.anthropic import AnthropicCodec, AnthropicOptions
from interpreters.providers.codec import Codec
from interpreters.providers.exchange import Endpoint, check_base_url
from interpreters.providers.openai_chat import OpenAIChatCodec, OpenAIChatOptions
from interpreters.providers.provider import ProviderError
from interpreters.providers.secret import Secret
from pipeline.model import ApiError
from pipeline.sanitize import ANTHROPIC, MISTRAL, OPENAI, SanitizeProfile

WireFormat = Literal["openai-chat", "anthropic"]


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


class Route(msgspec.Struct, frozen=True):
    """What a router prefix means."""

    wire: WireFormat
    base_url: str | None
    """None: the caller must give one (`base_url=` or `base_url_env`)."""
    key_env: str | None = None
    key_required: bool = False
    base_url_env: str | None = None
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    stream_usage: bool = True
    profile: SanitizeProfile = OPENAI
    """What the server accepts as tool-call ids and tool names."""


ROUTES: Mapping[str, Route] = {
    "openai": Route(
        "openai-chat", "https://api.openai.com/v1", "OPENAI_API_KEY", True, "OPENAI_BASE_URL",
        max_tokens_field="max_completion_tokens",
    ),
    "anthropic": Route(
        "anthropic", "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY", True,
        "ANTHROPIC_BASE_URL", profile=ANTHROPIC,
    ),
    "openrouter": Route(
        "openai-chat", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", True,
        "OPENROUTER_BASE_URL", max_tokens_field="max_completion_tokens",
    ),
    "groq": Route(
        "openai-chat", "https://api.groq.com/openai/v1", "GROQ_API_KEY", True, "GROQ_BASE_URL"
    ),
    # Mistral rejects fields it does not know, stream_options among them.
    "mistral": Route(
        "openai-chat", "https://api.mistral.ai/v1", "MISTRAL_API_KEY", True,
        "MISTRAL_BASE_URL", stream_usage=False, profile=MISTRAL,
    ),
    "ollama": Route("openai-chat", "http://localhost:11434/v1", None, False, "OLLAMA_BASE_URL"),
    "vllm": Route("openai-chat", "http://localhost:8000/v1", "VLLM_API_KEY", False,
                  "VLLM_BASE_URL"),
    "openai-compatible": Route(
        "openai-chat", None, "OPENAI_COMPATIBLE_API_KEY", False, "OPENAI_COMPATIBLE_BASE_URL"
    ),
}
"""Router prefixes. `openai-compatible` (or a bare model id with a base URL) serves any
server that speaks Chat Completions: llama.cpp, LM Studio, a proxy..."""


class ProviderConfig(msgspec.Struct, frozen=True):
    """Everything needed to build a provider for one router id (no connection yet)."""

    model_id: str
    model: str
    """The model name sent on the wire (the id without its router prefix)."""
    route: str
    endpoint: Endpoint
    wire: WireFormat
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    stream_usage: bool = True
    profile: SanitizeProfile = OPENAI

    def codec(self) -> Codec:
        if self.wire == "anthropic":
            return AnthropicCodec(
                AnthropicOptions(option_sections=(self.route,), profile=self.profile)
            )
        return OpenAIChatCodec(
            OpenAIChatOptions(
                max_tokens_field=self.max_tokens_field,
                stream_usage=self.stream_usage,
                option_sections=(self.route,),
                profile=self.profile,
            )
        )


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
    prefix, sep, name = model_id.partition("/")
    if sep and name and prefix in ROUTES:
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
    _check_url(url)
    key = api_key if api_key is not None else (env.get(route.key_env) if route.key_env else None)
    if not key:
        if route.key_required:
            raise ProviderConfigError(
                f"no API key for {route_name}/ models: set the {route.key_env} "
                "environment variable or pass the key in code"
            )
        key = None
    try:
        secret = Secret(key) if key else None
    except ValueError:
        where = "api_key=" if api_key is not None else route.key_env
        raise ProviderConfigError(f"the API key from {where} is malformed") from None
    return ProviderConfig(
        model_id=model_id,
        model=name,
        route=route_name,
        endpoint=Endpoint(provider=route_name, base_url=url, api_key=secret),
        wire=route.wire,
        max_tokens_field=route.max_tokens_field,
        stream_usage=route.stream_usage,
        profile=route.profile,
    )


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
    prefix, sep, name = model_id.partition("/")
    return prefix if sep and name and prefix in ROUTES else COMPATIBLE


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
