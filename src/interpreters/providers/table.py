"""The table of wire formats and the table of routes: what a router id means, as data.

A wire format (`WireFormat`, providers/codec.py) says how to make its codec for a route.
A route says what a router prefix (`openai/`, `groq/`...) speaks and where: its wire
format and that format's options, its default base URL, the variables that hold its key
and base URL, its OpenTelemetry `gen_ai.provider.name` and its genai-prices provider id.
The router (providers/routes.py), the OTel observer and the pricer read these tables and
nothing else, so a new wire format is one module (its codec and `WireFormat`) and one
row:

    register_wire_format(MY_FORMAT)
    register_route("mine", Route("my-format", "https://api.example.com/v1", "MINE_API_KEY",
                                 True, "MINE_BASE_URL", otel_name="mine"))

Registration checks a row when it is made (its wire format known, its options of that
format's type, a base URL without credentials) and refuses a name already taken. No I/O
and no httpx: the observers import this.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from urllib.parse import urlsplit

import msgspec

from interpreters.providers.anthropic import MESSAGES
from interpreters.providers.bedrock import CONVERSE, sigv4_signer
from interpreters.providers.codec import SignerFactory, WireFormat
from interpreters.providers.gemini import GENERATE_CONTENT
from interpreters.providers.openai_chat import CHAT_COMPLETIONS, OpenAIChatOptions
from interpreters.providers.openai_responses import RESPONSES
from pipeline.values.sanitize import MISTRAL


class Route(msgspec.Struct, frozen=True):
    """What a router prefix means."""

    wire: str
    """The name of its wire format (a key of `WIRE_FORMATS`)."""
    base_url: str | None
    """None: the caller must give one (`base_url=` or `base_url_env`)."""
    key_env: str | None = None
    key_required: bool = False
    base_url_env: str | None = None
    options: msgspec.Struct | None = None
    """Its wire format's options for this route (of that format's `WireFormat.options`
    type): for `openai-chat` an `OpenAIChatOptions`, whose `option_sections` is the
    route's name whatever is given."""
    otel_name: str | None = None
    """Its `gen_ai.provider.name` in traces (the conventions' well-known value where
    there is one); None: left out."""
    price_id: str | None = None
    """Its provider id in genai-prices' table; None: its calls are not priced (a
    self-hosted server)."""
    wire_env: str | None = None
    """A variable that may name another of `wire_choices` for this route's ids
    (`OPENAI_WIRE=openai-responses`); read when a provider is configured, and an error
    when it names none of them. The other format runs with its default options."""
    wire_choices: tuple[str, ...] = ()
    """The wire formats `wire_env` may name (the route's own `wire` among them)."""
    region_env: tuple[str, ...] = ()
    """The variables, in order, that fill `{region}` in its base URL (AWS_REGION...)."""
    signer: SignerFactory | None = None
    """Signs its requests when no key is given (AWS SigV4 from the credential chain);
    called with the base URL and the environment when a provider is configured."""
    key_env_fallbacks: tuple[str, ...] = ()
    """More variables that may hold the key, read in order when `key_env` is unset
    (Gemini's SDKs read `GOOGLE_API_KEY`, then `GEMINI_API_KEY`)."""

    @property
    def key_envs(self) -> tuple[str, ...]:
        """Every variable that may hold the key, in the order they are read."""
        return ((self.key_env,) if self.key_env else ()) + self.key_env_fallbacks


_WIRES: dict[str, WireFormat] = {}
_ROUTES: dict[str, Route] = {}

WIRE_FORMATS: Mapping[str, WireFormat] = MappingProxyType(_WIRES)
"""The wire formats by name (a read-only view: `register_wire_format` adds to it)."""

ROUTES: Mapping[str, Route] = MappingProxyType(_ROUTES)
"""The routes by router prefix (a read-only view: `register_route` adds to it).
`openai-compatible` (or a bare model id with a base URL) serves any server that speaks
Chat Completions: llama.cpp, LM Studio, a proxy..."""


def check_base_url(url: str) -> None:
    """Refuse a base URL that carries credentials (`user:pass@host`): httpx would send
    them as Basic auth instead of the key, and log them. The message never echoes them."""
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ValueError("the base URL is not a valid URL") from None
    if "@" in parts.netloc:
        host = parts.netloc.rpartition("@")[2]
        raise ValueError(
            f"the base URL for host {host!r} carries credentials (user:password@); "
            "give the key as api_key= (or its environment variable) and a base URL "
            "without them"
        )


def _check_name(what: str, name: object) -> None:
    if not isinstance(name, str) or not name or "/" in name or name != name.strip():
        raise ValueError(f"a {what} name is a non-empty string without '/' or spaces "
                         f"around it, not {name!r}")


def register_wire_format(fmt: WireFormat) -> None:
    """Make a wire format known by its name. Raises ValueError for a name already taken."""
    if not isinstance(fmt, WireFormat):
        raise TypeError(f"register_wire_format takes a WireFormat, not {type(fmt).__name__}")
    _check_name("wire format", fmt.name)
    if not callable(fmt.codec):
        raise TypeError(f"wire format {fmt.name!r}: its codec must be a function of the route")
    if fmt.name in _WIRES:
        raise ValueError(f"a wire format {fmt.name!r} is already registered")
    _WIRES[fmt.name] = fmt


def register_route(name: str, route: Route) -> None:
    """Add a route (`name/` ids): its wire format must be registered, its options of
    that format's type. Raises ValueError (TypeError for options of the wrong type)."""
    if not isinstance(route, Route):
        raise TypeError(f"register_route takes a Route, not {type(route).__name__}")
    _check_name("route", name)
    if name in _ROUTES:
        raise ValueError(f"a route {name!r} is already registered")
    fmt = _WIRES.get(route.wire)
    if fmt is None:
        known = ", ".join(repr(w) for w in _WIRES)
        raise ValueError(f"route {name!r}: unknown wire format {route.wire!r} "
                         f"(the wire formats are {known})")
    if route.options is not None and (
        fmt.options is None or not isinstance(route.options, fmt.options)
    ):
        wanted = fmt.options.__name__ if fmt.options is not None else "no options"
        raise TypeError(f"route {name!r}: wire format {fmt.name!r} takes {wanted}, not "
                        f"{type(route.options).__name__}")
    if route.key_required and not route.key_env:
        raise ValueError(f"route {name!r}: key_required needs the key_env that holds the key")
    if route.key_env_fallbacks and not route.key_env:
        raise ValueError(f"route {name!r}: key_env_fallbacks come after a key_env")
    for var in route.key_envs:
        _check_name("key variable", var)
    if bool(route.wire_env) != bool(route.wire_choices) or (
        route.wire_choices and route.wire not in route.wire_choices
    ):
        raise ValueError(f"route {name!r}: wire_env and wire_choices go together, and the "
                         "choices include the route's own wire format")
    for choice in route.wire_choices:
        if choice not in _WIRES:
            raise ValueError(f"route {name!r}: unknown wire format {choice!r} in wire_choices")
    if route.base_url is not None:
        check_base_url(route.base_url)
        if "{region}" in route.base_url and not route.region_env:
            raise ValueError(f"route {name!r}: a base URL with {{region}} needs region_env")
    _ROUTES[name] = route


def unregister_route(name: str) -> None:
    """Remove a route (its ids become unknown)."""
    if _ROUTES.pop(name, None) is None:
        raise ValueError(f"no route {name!r} is registered")


def unregister_wire_format(name: str) -> None:
    """Remove a wire format no route uses."""
    users = [r for r, row in _ROUTES.items() if row.wire == name]
    if users:
        raise ValueError(f"wire format {name!r} is used by the routes "
                         f"{', '.join(repr(u) for u in users)}: unregister them first")
    if _WIRES.pop(name, None) is None:
        raise ValueError(f"no wire format {name!r} is registered")


def wire_format(name: str) -> WireFormat:
    fmt = _WIRES.get(name)
    if fmt is None:
        raise ValueError(f"no wire format {name!r} is registered")
    return fmt


def split_model(model: str) -> tuple[str | None, str]:
    """A router id's route and the model name its server knows (`openai/gpt-4o` ->
    ("openai", "gpt-4o")); (None, id) for an id without a known router prefix."""
    route, sep, name = model.partition("/")
    if sep and name and route in _ROUTES:
        return route, name
    return None, model


register_wire_format(CHAT_COMPLETIONS)
register_wire_format(MESSAGES)
register_wire_format(GENERATE_CONTENT)
register_wire_format(RESPONSES)
register_wire_format(CONVERSE)

_CHAT = CHAT_COMPLETIONS.name
_COMPLETION_TOKENS = OpenAIChatOptions(max_tokens_field="max_completion_tokens")

for _name, _route in {
    # OPENAI_WIRE=openai-responses makes `openai/` ids speak the Responses API.
    "openai": Route(_CHAT, "https://api.openai.com/v1", "OPENAI_API_KEY", True,
                    "OPENAI_BASE_URL", _COMPLETION_TOKENS, "openai", "openai",
                    "OPENAI_WIRE", (_CHAT, RESPONSES.name)),
    "openai-responses": Route(RESPONSES.name, "https://api.openai.com/v1", "OPENAI_API_KEY",
                              True, "OPENAI_BASE_URL", None, "openai", "openai"),
    "anthropic": Route(MESSAGES.name, "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY",
                       True, "ANTHROPIC_BASE_URL", None, "anthropic", "anthropic"),
    "google": Route(GENERATE_CONTENT.name, "https://generativelanguage.googleapis.com/v1beta",
                    "GOOGLE_API_KEY", True, "GOOGLE_BASE_URL", None, "gcp.gemini", "google",
                    key_env_fallbacks=("GEMINI_API_KEY",)),
    "openrouter": Route(_CHAT, "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", True,
                        "OPENROUTER_BASE_URL", _COMPLETION_TOKENS, "openrouter", "openrouter"),
    "groq": Route(_CHAT, "https://api.groq.com/openai/v1", "GROQ_API_KEY", True,
                  "GROQ_BASE_URL", None, "groq", "groq"),
    # Mistral rejects fields it does not know, stream_options among them.
    "mistral": Route(_CHAT, "https://api.mistral.ai/v1", "MISTRAL_API_KEY", True,
                     "MISTRAL_BASE_URL", OpenAIChatOptions(stream_usage=False, profile=MISTRAL),
                     "mistral_ai", "mistral"),
    "ollama": Route(_CHAT, "http://localhost:11434/v1", None, False, "OLLAMA_BASE_URL",
                    None, "ollama"),
    "vllm": Route(_CHAT, "http://localhost:8000/v1", "VLLM_API_KEY", False, "VLLM_BASE_URL",
                  None, "vllm"),
    "openai-compatible": Route(_CHAT, None, "OPENAI_COMPATIBLE_API_KEY", False,
                               "OPENAI_COMPATIBLE_BASE_URL", None, "openai"),
    # SigV4 from the AWS credential chain, or a Bedrock API key (a bearer token).
    "bedrock": Route(CONVERSE.name, "https://bedrock-runtime.{region}.amazonaws.com",
                     "AWS_BEARER_TOKEN_BEDROCK", False, "BEDROCK_BASE_URL", None,
                     "aws.bedrock", "aws", region_env=("AWS_REGION", "AWS_DEFAULT_REGION"),
                     signer=sigv4_signer("bedrock")),
}.items():
    register_route(_name, _route)
del _name, _route


__all__ = [
    "ROUTES",
    "WIRE_FORMATS",
    "Route",
    "check_base_url",
    "register_route",
    "register_wire_format",
    "split_model",
    "unregister_route",
    "unregister_wire_format",
    "wire_format",
]
