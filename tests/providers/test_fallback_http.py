"""Fallback models over HTTP on the five wire formats, sync and async: a primary that
fails (recorded errors of each format, and failures made here) and a fallback that
answers with a recorded response of each format, served by the replay server on
127.0.0.1."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import pytest

from interpreters.aio import AsyncInterpreter
from interpreters.core.breaker import CircuitBreaker
from interpreters.providers import AsyncHttpProvider, HttpProvider, provider_config
from interpreters.sync import SyncInterpreter
from pipeline import Agent
from pipeline.ui_stream import UIData, UIPart, ui_parts, ui_start
from pipeline.values.chunks import Chunk, StepReset, TextDelta
from pipeline.values.fallback import DEFAULT_FAIL_OVER, FailureKind, Fallback
from pipeline.values.result import RunResult
from pipeline.values.retry import RetryPolicy
from tests.providers.cassettes import Recorded, load, traffic_dir
from tests.providers.server import ReplayServer, Reply
from tests.providers.test_conformance import CASES, _request

ROOT = traffic_dir()
pytestmark = pytest.mark.skipif(
    not (ROOT / "INDEX.md").exists(), reason=f"recorded traffic not found at {ROOT}"
)

PA = "pydantic+pydantic-ai/tests/models/cassettes/"
ANSWERS = {
    # wire format: (route, recorded answer, its text's start)
    "openai-chat": ("openai", "openai+openai-python/.inline-snapshot/external/e2aad469…cbfd.bin",
                    "I'm unable to provide real-time weather"),
    "anthropic": ("anthropic",
                  "simonw+llm-anthropic/tests/cassettes/test_anthropic/test_stream_events_text.yaml",
                  "Hello"),
    "openai-responses": (
        "openai-responses",
        PA + "test_openai_responses/test_openai_responses_model_simple_response.yaml",
        "The capital of France is Paris.",
    ),
    "gemini": ("google", PA + "test_google/test_google_model_stream.yaml",
               "The capital of France is Paris."),
    "bedrock": ("bedrock", PA + "test_bedrock/test_bedrock_model_stream.yaml",
                "The capital of France is Paris."),
}
WIRES = sorted(ANSWERS)

ERRORS: dict[str, tuple[str, str, FailureKind]] = {
    # a recorded error of each format: (route, file, its kind)
    "openai-chat": ("openai", "pydantic+pydantic-ai/tests/cassettes/test_model_name_suggestions/"
                    "test_model_name_suggestion[openai-chat].yaml", "unavailable"),
    "anthropic": ("anthropic", "DataDog+dd-trace-py/tests/contrib/anthropic/cassettes/"
                  "anthropic_completion_invalid_api_key.yaml", "auth"),
    "openai-responses": ("openai-responses", PA + "test_openai_responses/"
                         "test_openai_responses_model_http_error.yaml", "invalid-request"),
    "gemini": ("google", "vercel+ai/packages/google/src/__fixtures__/google-429-retry-info.json",
               "rate-limit"),
    "bedrock": ("bedrock", PA + "test_bedrock/test_bedrock_error.yaml", "invalid-request"),
}


CUT = {
    # a streamed answer of each format, to cut in its middle
    **{w: a[1] for w, a in ANSWERS.items()},
    "openai-responses": PA + "test_openai_responses/test_openai_responses_thinking_part_iter.yaml",
}


def _recorded(name: str) -> tuple[Recorded, bool]:
    case = CASES[name]
    ex = load(ROOT, name).exchanges[0]
    # (the OpenAI SDK's recordings are SSE bodies with no request recorded)
    return ex, _request(case, ex)[1] or ex.body.startswith(b"data:")


def answer(wire: str, **kw: object) -> tuple[Reply, bool]:
    ex, stream = _recorded(ANSWERS[wire][1])
    return Reply(ex.status, ex.headers, ex.body, chunks=7, **kw), stream  # type: ignore[arg-type]


def recorded_error(wire: str) -> Reply:
    ex, _ = _recorded(ERRORS[wire][1])
    return Reply(ex.status, ex.headers, ex.body)


def made_error(status: int) -> Reply:
    body = json.dumps({"error": {"message": f"made here: {status}", "type": "server_error"}})
    return Reply(status, (("content-type", "application/json"),), body.encode())


@dataclass
class Wired:
    """Providers for router ids, all served by the replay server."""

    server: ReplayServer
    streams: dict[str, bool]

    def config(self, model_id: str) -> tuple[object, object]:
        cfg = provider_config(model_id, base_url=self.server.url + "/v1",
                              api_key="sk-test-key")
        return cfg.endpoint, cfg.codec()

    @contextlib.contextmanager
    def sync(self) -> Iterator[Callable[[str], HttpProvider]]:
        made: dict[str, HttpProvider] = {}

        def resolve(model_id: str) -> HttpProvider:
            if model_id not in made:
                endpoint, codec = self.config(model_id)
                made[model_id] = HttpProvider(endpoint, codec,  # type: ignore[arg-type]
                                              stream=self.streams.get(model_id, True))
            return made[model_id]

        try:
            yield resolve
        finally:
            for p in made.values():
                p.close()

    @contextlib.asynccontextmanager
    async def aio(self) -> AsyncIterator[Callable[[str], AsyncHttpProvider]]:
        made: dict[str, AsyncHttpProvider] = {}

        def resolve(model_id: str) -> AsyncHttpProvider:
            if model_id not in made:
                endpoint, codec = self.config(model_id)
                made[model_id] = AsyncHttpProvider(endpoint, codec,  # type: ignore[arg-type]
                                                   stream=self.streams.get(model_id, True))
            return made[model_id]

        try:
            yield resolve
        finally:
            for p in made.values():
                await p.aclose()


def agent(models: tuple[str, ...], on: tuple[FailureKind, ...] = DEFAULT_FAIL_OVER,
          after_output: bool = False, **kw: object) -> Agent:
    return Agent.create(Fallback.of(*models, on=on, after_output=after_output),
                        retry_policy=RetryPolicy(max_retries=0), **kw)  # type: ignore[arg-type]


async def run(wired: Wired, a: Agent, mode: str) -> tuple[RunResult, list[object]]:
    """The run under the sync or the async interpreter (each with a breaker of its own)."""
    if mode == "sync":
        with wired.sync() as resolve:
            stream = SyncInterpreter(resolve=resolve, sleep=lambda _s: None,
                                     breaker=CircuitBreaker()).stream(a, "hi")
            chunks: list[object] = list(stream)
            return stream.result, chunks
    async with wired.aio() as aresolve:
        interp = AsyncInterpreter(resolve=aresolve, breaker=CircuitBreaker())
        async with interp.stream(a, "hi") as s:
            chunks = [c async for c in s]
        return s.result, chunks


MODES = ("sync", "async")


def other(wire: str) -> str:
    """A wire format other than `wire` (where the primary's failure is served)."""
    return WIRES[(WIRES.index(wire) + 1) % len(WIRES)]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("failure", ["500", "429", "503", "404", "no-response"])
async def test_a_failing_primary_fails_over_to_the_next_model(
    server: ReplayServer, wire: str, failure: str, mode: str
) -> None:
    route, _, start = ANSWERS[wire]
    primary_route = ANSWERS[other(wire)][0]
    primary, backup = f"{primary_route}/first", f"{route}/second"
    ok, stream = answer(wire)
    server.queue(Reply(no_response=True) if failure == "no-response"
                 else made_error(int(failure)), ok)
    result, _ = await run(Wired(server, {backup: stream}), agent((primary, backup)), mode)
    assert result.status == "finished", result.error
    assert result.text.startswith(start)
    [step] = result.steps
    assert step.model == backup
    [tried] = step.attempts
    assert tried.model == primary and not tried.released
    assert tried.kind == {"500": "server", "429": "rate-limit", "503": "server",
                          "404": "unavailable", "no-response": "connection"}[failure]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", WIRES)
async def test_a_recorded_error_fails_over_as_the_policy_says(
    server: ReplayServer, wire: str, mode: str
) -> None:
    """Each format's recorded error: a provider's failure fails over; an invalid request
    or a refused key does not unless the policy names it."""
    route, _, kind = ERRORS[wire]
    backup_wire = other(wire)
    b_route, _, start = ANSWERS[backup_wire]
    primary, backup = f"{route}/first", f"{b_route}/second"
    ok, stream = answer(backup_wire)
    wired = Wired(server, {backup: stream})
    server.queue(recorded_error(wire), ok)
    result, _ = await run(wired, agent((primary, backup)), mode)
    if kind in DEFAULT_FAIL_OVER:
        assert result.status == "finished", result.error
        assert result.steps[0].attempts[0].kind == kind
    else:
        assert result.status == "failed"
        assert len(server.seen) == 1, "the fallback model was never called"
        server.reset()
        server.queue(recorded_error(wire), ok)
        result, _ = await run(wired, agent((primary, backup), on=(*DEFAULT_FAIL_OVER, kind)),
                              mode)
        assert result.status == "finished", result.error
        assert result.steps[0].attempts[0].kind == kind
    assert result.text.startswith(start)


def _streamed_text(chunks: list[object]) -> str:
    text: list[str] = []
    for c in chunks:
        if isinstance(c, StepReset):
            text = []
        elif isinstance(c, TextDelta):
            text.append(c.text)
    return "".join(text)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", WIRES)
async def test_a_stream_cut_after_its_text_went_out_is_reset_only_when_asked(
    server: ReplayServer, wire: str, mode: str
) -> None:
    """A stream cut mid-answer: by default the run fails (the caller has its text); with
    `after_output` the caller gets a reset, then the next model's answer alone."""
    route = ANSWERS[wire][0]
    ex, stream = _recorded(CUT[wire])
    assert stream
    backup_wire = other(wire)
    b_route, _, start = ANSWERS[backup_wire]
    primary, backup = f"{route}/first", f"{b_route}/second"
    ok, b_stream = answer(backup_wire)
    cut = Reply(ex.status, ex.headers, ex.body, chunks=1, cut_after=len(ex.body) * 4 // 5)
    wired = Wired(server, {primary: True, backup: b_stream})
    server.queue(cut, ok)
    failed, chunks = await run(wired, agent((primary, backup)), mode)
    if failed.status == "finished":  # the cut fell after the answer's end
        pytest.skip("the cut left the answer whole")
    assert failed.status == "failed"
    assert not any(isinstance(c, StepReset) for c in chunks)
    server.reset()
    server.queue(cut, ok)
    result, chunks = await run(wired, agent((primary, backup), after_output=True), mode)
    assert result.status == "finished", result.error
    [reset] = [c for c in chunks if isinstance(c, StepReset)]
    assert (reset.model, reset.next_model) == (primary, backup)
    assert _streamed_text(chunks) == result.text and result.text.startswith(start)
    assert result.steps[0].attempts[0].released
    state, _ = ui_start()
    parts: list[UIPart] = []
    for c in chunks:
        assert isinstance(c, Chunk)
        state, out = ui_parts(state, c)
        parts.extend(out)
    [ui_reset] = [p for p in parts if isinstance(p, UIData) and p.type == "data-step-reset"]
    assert isinstance(ui_reset.data, dict)
    assert ui_reset.data["model"] == primary and ui_reset.data["part_ids"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", WIRES)
async def test_a_model_that_keeps_failing_is_skipped_for_its_cooldown(
    server: ReplayServer, wire: str, mode: str
) -> None:
    route, _, start = ANSWERS[wire]
    primary_route = ANSWERS[other(wire)][0]
    primary, backup = f"{primary_route}/first", f"{route}/second"
    wired = Wired(server, {backup: answer(wire)[1]})
    breaker = CircuitBreaker(failures=1, cooldown=60.0)
    a = agent((primary, backup))
    server.queue(made_error(503), answer(wire)[0], answer(wire)[0])
    results = []
    for _ in range(2):
        if mode == "sync":
            with wired.sync() as resolve:
                results.append(SyncInterpreter(resolve=resolve, breaker=breaker).run(a, "hi"))
        else:
            async with wired.aio() as aresolve:
                results.append(await AsyncInterpreter(resolve=aresolve, breaker=breaker)
                               .run(a, "hi"))
    assert [r.status for r in results] == ["finished", "finished"]
    assert results[1].text.startswith(start)
    assert len(server.seen) == 3, "the second run never called the failing model"
    assert [t.kind for t in results[1].steps[0].attempts] == ["circuit-open"]
    assert breaker.circuit(primary).state == "open"
