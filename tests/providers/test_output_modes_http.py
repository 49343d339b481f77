"""Output modes over HTTP on the five wire formats, sync and async: `native` (recorded
JSON-schema answers; a route without one refuses it before any request, naming the
route), `tool` (recorded forced final-answer tool calls, decoded back as the answer),
`prompted` (the schema in the instructions, the JSON parsed from the reply's text: made
streams), with typed partial output as the reply streams, and the same validation retry
on every mode."""

from __future__ import annotations

import json

import msgspec
import pytest

from interpreters.aio import AsyncInterpreter
from interpreters.providers import ProviderConfigError
from interpreters.sync import SyncInterpreter
from pipeline import Agent
from pipeline.values.chunks import OutputPartial
from pipeline.values.model import OutputMode
from pipeline.values.output_type import TypedOutput
from pipeline.values.result import RunResult
from tests.providers.cassettes import load, traffic_dir
from tests.providers.made_streams import made
from tests.providers.server import ReplayServer, Reply
from tests.providers.test_conformance import CASES, _request
from tests.providers.test_fallback_http import MODES, Wired

ROOT = traffic_dir()
pytestmark = pytest.mark.skipif(
    not (ROOT / "INDEX.md").exists(), reason=f"recorded traffic not found at {ROOT}"
)
PA = "pydantic+pydantic-ai/tests/models/cassettes/"
ROUTES = {"openai-chat": "openai", "anthropic": "anthropic",
          "openai-responses": "openai-responses", "gemini": "google", "bedrock": "bedrock"}
WIRES = sorted(ROUTES)


class City(msgspec.Struct, frozen=True):
    city: str
    country: str


class Temperature(msgspec.Struct, frozen=True):
    date: str
    city: str
    temperature: str


class Element(msgspec.Struct, frozen=True):
    location: str
    temperature: int
    condition: str


class Weather(msgspec.Struct, frozen=True):
    elements: tuple[Element, ...]


class Capital(msgspec.Struct, frozen=True):
    country: str


# wire format: (the recording, which exchange, output type, the tool's name, the output)
TOOL_ANSWERS: dict[str, tuple[str, int, type, str, object]] = {
    "openai-chat": (PA + "test_openai/test_openai_tool_output.yaml", 1, City, "final_result",
                    City("Mexico City", "Mexico")),
    "gemini": (PA + "test_google/test_google_tool_output.yaml", 1, City, "final_result",
               City("Mexico City", "Mexico")),
    "bedrock": (PA + "test_bedrock/test_bedrock_model_structured_output.yaml", 2, Temperature,
                "final_result", Temperature("2022-01-01", "London", "30°C")),
    "anthropic": ("vercel+ai/packages/anthropic/src/__fixtures__/anthropic-json-tool.1.chunks.txt",
                  0, Weather, "json", Weather((Element("San Francisco", 58, "sunny"),))),
    "openai-responses": (PA + "test_openai_responses/"
                         "test_openai_responses_model_simple_response_with_tool_call.yaml", 0,
                         Capital, "get_capital", Capital("PotatoLand")),
}
NATIVE_ANSWERS: dict[str, tuple[str, str, int, City]] = {
    "openai-chat": ("ollama", PA + "test_ollama/test_ollama_local_native_output_uses_json_schema"
                    ".yaml", 0, City("Paris", "France")),
    "openai-responses": ("openai-responses", PA + "test_openai_responses/test_native_output.yaml",
                         1, City("Mexico City", "Mexico")),
    "gemini": ("google", PA + "test_google/test_google_native_output.yaml", 0,
               City("Mexico City", "Mexico")),
}
NATIVE_FIELDS = ("response_format", "responseSchema", '"json_schema"')


def recorded(name: str, i: int) -> tuple[Reply, bool]:
    ex = load(ROOT, name).exchanges[i]
    return Reply(ex.status, ex.headers, ex.body, chunks=11), _request(CASES[name], ex)[1]


async def run(wired: Wired, agent: Agent, mode: str) -> tuple[RunResult, list[object]]:
    if mode == "sync":
        with wired.sync() as resolve:
            s = SyncInterpreter(resolve=resolve).stream(agent, "where?")
            chunks: list[object] = list(s)
            return s.result, chunks
    async with wired.aio() as aresolve, AsyncInterpreter(resolve=aresolve).stream(
        agent, "where?"
    ) as a:
        chunks = [c async for c in a]
    return a.result, chunks


def typed(t: type, mode: OutputMode, name: str | None = None) -> TypedOutput[object]:
    return TypedOutput.of(t, mode=mode, name=name, partial=True)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", WIRES)
async def test_tool_mode_forces_a_final_answer_tool_on_every_format(
    server: ReplayServer, wire: str, mode: str
) -> None:
    name, i, kind, tool, want = TOOL_ANSWERS[wire]
    reply, stream = recorded(name, i)
    model = f"{ROUTES[wire]}/m"
    server.queue(reply)
    agent = Agent.create(model, output_type=typed(kind, "tool", tool))
    result, chunks = await run(Wired(server, {model: stream}), agent, mode)
    assert result.status == "finished", result.error
    assert result.output == want
    assert not result.steps[0].tool_calls, "the output tool is the answer, not a call"
    sent = server.seen[-1].body.decode()
    assert tool in sent and not any(f in sent for f in NATIVE_FIELDS)
    partials = [c for c in chunks if isinstance(c, OutputPartial)]
    assert partials and partials[-1].value == want


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", sorted(NATIVE_ANSWERS))
async def test_native_mode_sends_the_providers_json_schema(
    server: ReplayServer, wire: str, mode: str
) -> None:
    route, name, i, want = NATIVE_ANSWERS[wire]
    reply, stream = recorded(name, i)
    model = f"{route}/m"
    server.queue(reply)
    agent = Agent.create(model, output_type=typed(City, "native"))
    result, chunks = await run(Wired(server, {model: stream}), agent, mode)
    assert result.status == "finished", result.error
    assert result.output == want
    sent = json.loads(server.seen[-1].body)
    assert any(f.strip('"') in json.dumps(sent) for f in NATIVE_FIELDS)
    assert "tools" not in sent
    assert [c for c in chunks if isinstance(c, OutputPartial)][-1].value == want


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", ["anthropic", "bedrock"])
async def test_native_mode_on_a_route_without_one_is_refused_naming_it(
    server: ReplayServer, wire: str, mode: str
) -> None:
    model = f"{ROUTES[wire]}/m"
    agent = Agent.create(model, output_type=typed(City, "native"))
    wired = Wired(server, {})
    with pytest.raises(ProviderConfigError, match=f"route '{ROUTES[wire]}'.*'native'"):
        if mode == "sync":
            with wired.sync() as resolve:
                SyncInterpreter(resolve=resolve).stream(agent, "where?")
        else:
            async with wired.aio() as aresolve:
                AsyncInterpreter(resolve=aresolve).stream(agent, "where?")
    assert not server.seen, "refused before any request"


PIECES = ['{"ci', 'ty": "Pa', 'ris", "coun', 'try": "Fra', 'nce"}']


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", WIRES)
async def test_prompted_mode_puts_the_schema_in_the_instructions_on_every_format(
    server: ReplayServer, wire: str, mode: str
) -> None:
    model = f"{ROUTES[wire]}/m"
    server.queue(made(wire, ['{"city": "Paris"}']), made(wire, PIECES))
    agent = Agent.create(model, output_type=typed(City, "prompted"))
    result, chunks = await run(Wired(server, {model: True}), agent, mode)
    assert result.status == "finished", result.error
    assert result.output == City("Paris", "France")
    # the first reply lacked a field: back to the model as feedback, as in every mode
    assert result.retry_count == 1
    first, second = (s.body.decode() for s in server.seen[-2:])
    assert "country" in first and "JSON schema" in first  # the schema, in the instructions
    assert not any(f in first for f in NATIVE_FIELDS) and "final_result" not in first
    assert "does not match the City JSON schema" in second
    partials = [c.value for c in chunks if isinstance(c, OutputPartial)]
    # only those that validate (the first after `country` began), the last is the output
    assert partials[-1] == City("Paris", "France")
    assert all(isinstance(p, City) for p in partials) and len(partials) >= 2
