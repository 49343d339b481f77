"""The providers under the real interpreters: an agent with a tool, end to end over HTTP.

The replay server plays the recorded two-turn OpenAI stream (a `get_capital` tool call,
then the answer); the agent's tool runs in between, and its result must reach the second
request with the call's id. Then the retry path: a 429 with Retry-After before success.
"""

from __future__ import annotations

import json

import pytest

from interpreters.aio import AsyncInterpreter
from interpreters.providers import AsyncResolver, Resolver
from interpreters.sync import SyncInterpreter
from pipeline.agent import Agent
from pipeline.tools import tool
from pipeline.values.retry import RetryPolicy
from tests.providers.cassettes import load, traffic_dir
from tests.providers.helpers import KEY, oa_text_stream
from tests.providers.server import ReplayServer, Reply

ROOT = traffic_dir()
CASSETTE = "pydantic+pydantic-ai/tests/models/cassettes/test_openai/" \
    "test_run_stream_sync_streams_real_model.yaml"


@tool
def get_capital(country: str) -> str:
    """The capital of a country."""
    return {"UK": "London"}.get(country, "unknown")


def _agent() -> Agent:
    return Agent.create("openai/gpt-4o-mini", tools=[get_capital],
                        retry_policy=RetryPolicy(max_retries=2))


def _queue_recording(server: ReplayServer) -> None:
    for ex in load(ROOT, CASSETTE).exchanges:
        server.queue(Reply(ex.status, ex.headers, ex.body, chunks=50))


def _check_second_request(server: ReplayServer) -> None:
    second = json.loads(server.seen[-1].body)
    call = second["messages"][1]["tool_calls"][0]
    assert call["id"] == "call_ZR5UUuTt3pf61kjwAJIYdVMj"
    assert json.loads(call["function"]["arguments"]) == {"country": "UK"}
    assert second["messages"][2] == {
        "role": "tool", "tool_call_id": "call_ZR5UUuTt3pf61kjwAJIYdVMj", "content": "London"}


def test_sync_interpreter_runs_a_tool_loop(server: ReplayServer) -> None:
    _queue_recording(server)
    resolver = Resolver(base_urls={"openai": server.url + "/v1"}, api_keys={"openai": KEY})
    result = SyncInterpreter(resolve=resolver).run(
        _agent(), "What is the capital of the UK? Use the tool, then answer.")
    resolver.close()
    assert result.status == "finished", result.error
    assert result.text == "The capital of the UK is London."
    assert result.usage.input_tokens == 53 + 78
    _check_second_request(server)


@pytest.mark.anyio
async def test_async_interpreter_runs_a_tool_loop(
    server: ReplayServer, anyio_backend: str
) -> None:
    _queue_recording(server)
    resolver = AsyncResolver(base_urls={"openai": server.url + "/v1"}, api_keys={"openai": KEY})
    result = await AsyncInterpreter(resolve=resolver).run(
        _agent(), "What is the capital of the UK? Use the tool, then answer.")
    await resolver.aclose()
    assert result.status == "finished", result.error
    assert result.text == "The capital of the UK is London."
    _check_second_request(server)


def test_retry_after_reaches_the_loops_backoff(server: ReplayServer) -> None:
    server.queue(
        Reply(429, (("content-type", "application/json"), ("retry-after", "3")),
              b'{"error":{"message":"slow down","type":"rate_limit"}}'),
        Reply(200, (("content-type", "text/event-stream"),), oa_text_stream("fine")),
    )
    waits: list[float] = []
    resolver = Resolver(base_urls={"openai": server.url + "/v1"}, api_keys={"openai": KEY})
    result = SyncInterpreter(resolve=resolver, sleep=waits.append).run(
        Agent.create("openai/m", retry_policy=RetryPolicy(max_retries=2)), "hi")
    resolver.close()
    assert result.status == "finished" and result.text == "fine"
    assert waits == [3.0] and len(server.seen) == 2
