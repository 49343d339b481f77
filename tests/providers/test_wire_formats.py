"""Wire formats and routes as data: a format registered from outside the package (a codec
over a trivial JSON format, and one route row) serves an agent end to end over HTTP, is
named to OpenTelemetry and priced from its row; registration refuses what it cannot use.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import httpx
import msgspec
import pytest

from interpreters.aio import AsyncInterpreter
from interpreters.observers.otel import provider_of
from interpreters.providers import (
    ROUTES,
    WIRE_FORMATS,
    AsyncResolver,
    Encoded,
    OpenAIChatOptions,
    Resolver,
    Route,
    WireFormat,
    WireRoute,
    provider_config,
    register_route,
    register_wire_format,
    unregister_route,
    unregister_wire_format,
)
from interpreters.providers.codec import StreamDecoder, route_options
from interpreters.providers.prices import genai_prices, split_model
from interpreters.providers.sse import SseEvent
from interpreters.sync import SyncInterpreter
from pipeline.agent import Agent
from pipeline.values.chunks import ModelEvent, ModelFinish, TextDelta, TextEnd, TextStart, Usage
from pipeline.values.cost import PriceQuery
from pipeline.values.model import ModelRequest

# --- the toy wire format: what a new format's one file holds ---------------------------


class ToyOptions(msgspec.Struct, frozen=True):
    greeting: str = ""
    """Put before the prompt (a route's setting for this format)."""


class _Piece(msgspec.Struct, frozen=True):
    text: str = ""
    end: bool = False
    tokens: tuple[int, int] = (0, 0)


_piece = msgspec.json.Decoder(_Piece)


def _finish(p: _Piece) -> ModelFinish:
    return ModelFinish("stop", Usage(p.tokens[0], p.tokens[1]))


class ToyDecoder:
    """SSE frames of `{"text": ...}`, then `{"end": true, "tokens": [in, out]}`."""

    def __init__(self) -> None:
        self.done = False
        self.started = False

    def feed(self, event: SseEvent) -> list[ModelEvent]:
        p = _piece.decode(event.data)
        out: list[ModelEvent] = []
        if not self.started:
            out.append(TextStart("t"))
            self.started = True
        if p.text:
            out.append(TextDelta("t", p.text))
        if p.end:
            out += [TextEnd("t"), _finish(p)]
            self.done = True
        return out


class ToyCodec:
    def __init__(self, options: ToyOptions, section: str) -> None:
        self.options = options
        self.section = section

    def path(self, model: str, *, stream: bool) -> str:
        return f"/models/{model}:{'stream' if stream else 'generate'}"

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"x-toy-key": api_key} if api_key else {}

    def encode(self, request: ModelRequest, *, model: str, stream: bool) -> Encoded:
        prompt = " ".join(m.text for m in request.messages if m.role == "user")
        body = {"prompt": self.options.greeting + prompt, "section": self.section}
        return Encoded(msgspec.json.encode(body))

    def stream_decoder(
        self, encoded: Encoded, *, status: int, request_id: str | None
    ) -> StreamDecoder:
        return ToyDecoder()

    def decode_body(
        self, encoded: Encoded, body: bytes, *, status: int, request_id: str | None
    ) -> list[ModelEvent]:
        p = _piece.decode(body)
        return [TextStart("t"), TextDelta("t", p.text), TextEnd("t"), _finish(p)]


def _toy_codec(route: WireRoute) -> ToyCodec:
    return ToyCodec(route_options(route, ToyOptions), route.name)


TOY = WireFormat("toy-json", _toy_codec, ToyOptions)

# --- the tests ---------------------------------------------------------------------------


@pytest.fixture
def toy() -> Iterator[None]:
    register_wire_format(TOY)
    register_route("toy", Route(
        "toy-json", "https://toy.example/v1", "TOY_API_KEY", True, "TOY_BASE_URL",
        options=ToyOptions(greeting="Hello. "), otel_name="toy_ai",
    ))
    register_route("toy-priced", Route(
        "toy-json", "https://toy.example/v1", price_id="openai", otel_name="toy_ai"))
    try:
        yield
    finally:
        unregister_route("toy-priced")
        unregister_route("toy")
        unregister_wire_format("toy-json")


def _server(seen: list[httpx.Request]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith(":stream"):
            body = (b'data: {"text": "Hi"}\n\ndata: {"text": " there"}\n\n'
                    b'data: {"end": true, "tokens": [3, 2]}\n\n')
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  content=body)
        return httpx.Response(200, json={"text": "Hi there", "tokens": [3, 2]})

    return httpx.MockTransport(handle)


@pytest.mark.parametrize(("stream", "verb"), [(True, "stream"), (False, "generate")])
def test_a_registered_wire_format_serves_an_agent(toy: None, stream: bool, verb: str) -> None:
    seen: list[httpx.Request] = []
    with httpx.Client(transport=_server(seen)) as client:
        resolver = Resolver(client=client, stream=stream, env={"TOY_API_KEY": "toy-secret"})
        result = SyncInterpreter(resolve=resolver).run(Agent.create("toy/tiny"), "how are you")
        resolver.close()
    assert result.status == "finished", result.error
    assert result.text == "Hi there"
    assert result.usage.input_tokens == 3 and result.usage.output_tokens == 2
    (request,) = seen
    # The path comes from the codec, from the model and the stream flag.
    assert str(request.url) == f"https://toy.example/v1/models/tiny:{verb}"
    assert request.headers["x-toy-key"] == "toy-secret"
    # The route's options reach the codec, and its name is the options section.
    assert msgspec.json.decode(request.content) == {
        "prompt": "Hello. how are you", "section": "toy"}


@pytest.mark.anyio
async def test_a_registered_wire_format_serves_an_agent_async(
    toy: None, anyio_backend: str
) -> None:
    seen: list[httpx.Request] = []
    async with httpx.AsyncClient(transport=_server(seen)) as client:
        resolver = AsyncResolver(client=client, env={"TOY_API_KEY": "toy-secret"})
        result = await AsyncInterpreter(resolve=resolver).run(Agent.create("toy/tiny"), "hi")
        await resolver.aclose()
    assert result.status == "finished", result.error
    assert result.text == "Hi there"
    assert [str(r.url) for r in seen] == ["https://toy.example/v1/models/tiny:stream"]


def test_a_registered_route_is_configured_named_and_priced_from_its_row(toy: None) -> None:
    cfg = provider_config("toy/tiny", env={"TOY_API_KEY": "k", "TOY_BASE_URL": "http://h/v1"})
    assert (cfg.route, cfg.model, cfg.wire, cfg.endpoint.base_url) == (
        "toy", "tiny", "toy-json", "http://h/v1")
    assert isinstance(cfg.codec(), ToyCodec)
    with pytest.raises(ValueError, match="TOY_API_KEY"):
        provider_config("toy/tiny", env={})
    assert split_model("toy/tiny") == ("toy", "tiny")
    assert provider_of("toy/tiny") == ("toy_ai", "tiny")
    price = genai_prices()
    usage = Usage(1_000_000, 0)
    cost = price(PriceQuery("toy-priced/gpt-4o", None, usage, 1_750_000_000.0))
    openai = price(PriceQuery("openai/gpt-4o", None, usage, 1_750_000_000.0))
    assert cost is not None and openai is not None
    assert cost.total == openai.total > Decimal(0)  # on OpenAI's price list, its price id
    assert price(PriceQuery("toy/gpt-4o", None, usage, 1_750_000_000.0)) is None  # no price id


def test_after_unregistering_an_id_of_the_route_is_unknown() -> None:
    register_wire_format(TOY)
    register_route("toy", Route("toy-json", "https://toy.example/v1"))
    unregister_route("toy")
    unregister_wire_format("toy-json")
    assert "toy" not in ROUTES and "toy-json" not in WIRE_FORMATS
    assert split_model("toy/tiny") == (None, "toy/tiny")
    assert provider_of("toy/tiny") == (None, "toy/tiny")


def test_registration_refuses_duplicates(toy: None) -> None:
    with pytest.raises(ValueError, match="wire format 'toy-json' is already registered"):
        register_wire_format(TOY)
    with pytest.raises(ValueError, match="route 'toy' is already registered"):
        register_route("toy", Route("toy-json", "https://toy.example/v1"))
    with pytest.raises(ValueError, match="route 'openai' is already registered"):
        register_route("openai", Route("openai-chat", "https://x/v1"))


def test_registration_refuses_what_it_cannot_use(toy: None) -> None:
    with pytest.raises(ValueError, match=r"unknown wire format 'nope'.*'openai-chat'"):
        register_route("other", Route("nope", "https://x/v1"))
    with pytest.raises(TypeError, match=r"ToyOptions.*OpenAIChatOptions"):
        register_route("other", Route("toy-json", "https://x/v1", options=OpenAIChatOptions()))
    with pytest.raises(ValueError, match=r"key_required.*key_env"):
        register_route("other", Route("toy-json", "https://x/v1", key_required=True))
    with pytest.raises(ValueError, match="key_env_fallbacks come after a key_env"):
        register_route("other", Route("toy-json", "https://x/v1", key_env_fallbacks=("K",)))
    with pytest.raises(ValueError, match="key variable name"):
        register_route("other", Route("toy-json", "https://x/v1", "K", key_env_fallbacks=("",)))
    with pytest.raises(ValueError, match="credentials"):
        register_route("other", Route("toy-json", "https://user:pw@x/v1"))
    with pytest.raises(ValueError, match="route name"):
        register_route("a/b", Route("toy-json", "https://x/v1"))
    with pytest.raises(ValueError, match="wire format name"):
        register_wire_format(WireFormat("", _toy_codec))
    with pytest.raises(TypeError, match="WireFormat"):
        register_wire_format(_toy_codec)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'toy-json' is used by the routes 'toy', 'toy-priced'"):
        unregister_wire_format("toy-json")
    with pytest.raises(ValueError, match="no route 'other' is registered"):
        unregister_route("other")
    with pytest.raises(ValueError, match="no wire format 'other' is registered"):
        unregister_wire_format("other")
    assert "other" not in ROUTES


def test_the_built_in_routes_name_their_otel_provider_and_price_list() -> None:
    names = {r: (row.otel_name, row.price_id) for r, row in ROUTES.items()}
    assert names == {
        "openai": ("openai", "openai"),
        "openai-responses": ("openai", "openai"),
        "anthropic": ("anthropic", "anthropic"),
        "google": ("gcp.gemini", "google"),
        "openrouter": ("openrouter", "openrouter"),
        "groq": ("groq", "groq"),
        "mistral": ("mistral_ai", "mistral"),
        "ollama": ("ollama", None),
        "vllm": ("vllm", None),
        "openai-compatible": ("openai", None),
        "bedrock": ("aws.bedrock", "aws"),
    }
    assert set(WIRE_FORMATS) == {"openai-chat", "anthropic", "openai-responses", "bedrock-converse",
                                 "gemini"}
