"""A run recorded against a real HTTP provider replays offline to the same run.

For generated runs against the loopback server (tests/providers/server.py: real sockets
on 127.0.0.1, OpenAI Chat Completions SSE) with tool steps (a tool that answers and one
that raises), a transient 429 retried after Retry-After, and a judge model whose low
score makes a processor retry the response, recorded under each interpreter (sync,
async on asyncio, async on trio) with a `Recorder`: `Simulator.replay` and
`AsyncSimulator.replay` of the journal give the recorded run's result and trace
(`Trace.comparable()`), and report no divergence. Real clock, real ids: only the journal
makes the replay reproduce them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from examples.quality_guardrail import QualityGuardrail
from interpreters.aio import AsyncInterpreter
from interpreters.core.trace import Trace
from interpreters.providers import AsyncResolver, Resolver
from interpreters.record.journal import Journal, Recorder
from interpreters.sync import SyncInterpreter
from interpreters.testing import AsyncSimulator, Simulator
from pipeline.agent import Agent
from pipeline.values.result import RunResult
from pipeline.values.retry import RetryPolicy
from tests.providers.helpers import KEY, oa_chunk, oa_text_stream, sse
from tests.providers.server import ReplayServer, Reply

SSE = (("content-type", "text/event-stream"),)


def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


def fails(query: str) -> str:
    """A tool whose backend is down."""
    raise RuntimeError(f"no backend for {query}")


def tool_stream(step: int, calls: list[tuple[str, str]]) -> bytes:
    frames: list[str | dict[str, object]] = []
    for i, (name, query) in enumerate(calls):
        frames.append(oa_chunk({"tool_calls": [{
            "index": i, "id": f"call_{step}_{i}", "type": "function",
            "function": {"name": name, "arguments": ""}}]}))
        frames.append(oa_chunk({"tool_calls": [{
            "index": i, "function": {"arguments": json.dumps({"query": query})}}]}))
    frames += [oa_chunk(finish="tool_calls"),
               oa_chunk(usage={"prompt_tokens": 7, "completion_tokens": 2}), "data: [DONE]\n\n"]
    return sse(*frames)


words = st.text(alphabet="abcdefgh xyz", min_size=1, max_size=8)
scenarios = st.fixed_dictionaries({
    "transient": st.booleans(),
    "tool_steps": st.lists(
        st.lists(st.tuples(st.sampled_from(["lookup", "fails"]), words), min_size=1, max_size=2),
        max_size=2,
    ),
    "answer": st.lists(words, min_size=1, max_size=3),
    "judge_retry": st.booleans(),
})


def replies(s: dict[str, object]) -> list[Reply]:
    """The server's replies, in the order the run makes its requests."""
    out: list[Reply] = []
    if s["transient"]:
        out.append(Reply(429, (("content-type", "application/json"), ("retry-after", "0")),
                         b'{"error":{"message":"slow down","type":"rate_limit"}}'))
    steps = s["tool_steps"]
    answer = s["answer"]
    assert isinstance(steps, list) and isinstance(answer, list)
    for i, calls in enumerate(steps):
        out.append(Reply(200, SSE, tool_stream(i, calls), chunks=40))
    if s["judge_retry"]:
        out.append(Reply(200, SSE, oa_text_stream("meh"), chunks=30))
        out.append(Reply(200, SSE, oa_text_stream("0.1"), chunks=30))  # the judge: retry
    out.append(Reply(200, SSE, oa_text_stream(*answer), chunks=30))
    out.append(Reply(200, SSE, oa_text_stream("0.9"), chunks=30))      # the judge: fine
    return out


def make_agent() -> Agent:
    return Agent.create(
        "openai/gpt-4o-mini",
        instructions="Answer briefly.",
        tools=[lookup, fails],
        output_processors=[QualityGuardrail("openai/judge", threshold=0.5)],
        retry_policy=RetryPolicy(max_retries=2),
        max_steps=5,
    )


@pytest.fixture(scope="module")
def server() -> Iterator[ReplayServer]:
    srv = ReplayServer()
    yield srv
    srv.close()


def record_sync(server: ReplayServer, rec: Recorder) -> tuple[RunResult, Trace]:
    resolver = Resolver(base_urls={"openai": server.url + "/v1"}, api_keys={"openai": KEY})
    trace = Trace()
    try:
        result = SyncInterpreter(resolve=resolver, observers=[rec]).run(
            make_agent(), "Find things.", trace=trace)
    finally:
        resolver.close()
    return result, trace


def record_async(server: ReplayServer, rec: Recorder, backend: str) -> tuple[RunResult, Trace]:
    async def main() -> tuple[RunResult, Trace]:
        resolver = AsyncResolver(
            base_urls={"openai": server.url + "/v1"}, api_keys={"openai": KEY})
        trace = Trace()
        try:
            result = await AsyncInterpreter(resolve=resolver, observers=[rec]).run(
                make_agent(), "Find things.", trace=trace)
        finally:
            await resolver.aclose()
        return result, trace

    return anyio.run(main, backend=backend)


# Each example makes real HTTP requests under three interpreters: a twentieth of the
# profile's examples.
@settings(max_examples=max(4, settings().max_examples // 20))
@given(scenario=scenarios)
def test_a_loopback_run_replays_identically_on_every_interpreter(
    server: ReplayServer, scenario: dict[str, object]
) -> None:
    for how in ("sync", "asyncio", "trio"):
        server.reset()
        server.queue(*replies(scenario))
        rec = Recorder(pii="keep")
        if how == "sync":
            result, trace = record_sync(server, rec)
        else:
            result, trace = record_async(server, rec, how)
        assert result.status == "finished", (how, result.error)
        assert result.retry_count == (1 if scenario["judge_retry"] else 0)
        journal = Journal.from_ndjson(rec.last().to_ndjson())
        assert KEY.encode() not in journal.to_ndjson()

        replay = Simulator.replay(journal, make_agent())
        assert replay.result == result, how
        assert replay.trace.comparable() == trace.comparable(), how
        assert replay.identical, (how, replay.divergence)

        areplay = anyio.run(AsyncSimulator.replay, journal, make_agent())
        assert areplay.result == result, how
        assert areplay.trace.comparable() == trace.comparable(), how
