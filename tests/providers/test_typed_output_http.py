"""Typed output end to end over HTTP: Anthropic's forced output tool, decoded back into
`result.output` (a recorded stream, replayed by a server on 127.0.0.1)."""

from __future__ import annotations

import json

import msgspec
import pytest

from interpreters.providers import HttpProvider, provider_config
from interpreters.sync import SyncInterpreter
from pipeline.agent import Agent
from pipeline.values.output_type import TypedOutput
from tests.providers.cassettes import load, traffic_dir
from tests.providers.server import ReplayServer, Reply
from tests.providers.test_conformance import CASES, codec_for

ROOT = traffic_dir()
pytestmark = pytest.mark.skipif(
    not (ROOT / "INDEX.md").exists(), reason=f"recorded traffic not found at {ROOT}"
)
NAME = "vercel+ai/packages/anthropic/src/__fixtures__/anthropic-json-tool.1.chunks.txt"


class Element(msgspec.Struct, frozen=True):
    location: str
    temperature: int
    condition: str


class Weather(msgspec.Struct, frozen=True):
    elements: tuple[Element, ...]


def test_anthropic_output_tool_becomes_the_typed_output(server: ReplayServer) -> None:
    [ex] = load(ROOT, NAME).exchanges
    server.queue(Reply(ex.status, ex.headers, ex.body, chunks=5))
    cfg = provider_config("anthropic/m", base_url=server.url + "/v1", api_key="sk-test-key")
    # The recorded reply calls the output tool `json`: name the output so.
    agent = Agent.create("anthropic/m", structured_output=TypedOutput.of(Weather, name="json"))
    with HttpProvider(cfg.endpoint, codec_for(CASES[NAME])[1](), stream=True) as p:
        result = SyncInterpreter(p).run(agent, "weather?")
    assert result.status == "finished", result.error
    assert result.output == Weather((Element("San Francisco", 58, "sunny"),))
    sent = json.loads(server.seen[-1].body)
    assert sent["tool_choice"] == {"type": "tool", "name": "json"}
    schema = sent["tools"][-1]["input_schema"]
    assert schema["type"] == "object" and "$ref" not in json.dumps(schema)
