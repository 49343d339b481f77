"""The durable driver gives the sync interpreter's run, and a run recovered from its
recorded step outcomes alone is the same run: no model, tool or handler is called.

For the generated agents and scripts of test_equivalence (tools valid and not, broken
streams, retries with backoff, processors doing I/O, a judge model...), `drive` fed by
steps that round-trip every outcome through msgspec JSON, as the DBOS steps store them,
ends with the sync interpreter's result at the same virtual time (the sync run of a model
whose response is read whole before its first event goes to the loop, even when the loop
closes it early: a durable model call is one step that reads the whole response, docs/durable.md
"Limits"); then a second drive
that answers every step from the first one's records, as DBOS does on recovery, ends
with the same result and publishes the same chunks without any I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import msgspec
from hypothesis import given

from interpreters.core.trace import Trace
from interpreters.durable.loop import ModelOutcome, ToolDone, drive, tool_context
from interpreters.providers.provider import Provider, ProviderError
from interpreters.run.common import answer_of, start_run, stream_failed
from interpreters.sim.simulator import Scripted
from interpreters.sync import SyncInterpreter, run_tool
from interpreters.testing import ScriptedModel, VirtualClock
from pipeline.agent import Agent
from pipeline.processor import AskModel, ModelAnswer
from pipeline.protocol import ToolInvocation
from pipeline.values.chunks import Chunk, ModelEvent
from pipeline.values.model import ModelRequest
from pipeline.values.result import RunResult
from properties.test_equivalence import (
    START,
    Check,
    Pipeline,
    _wired,
    check_text,
    judge_script,
    pipelines,
    prompts,
    scripts,
)


class ReadFirst:
    """A scripted model whose whole response is read before its first event is handed
    over, as the durable model step reads it (its virtual time passes then), even when
    the loop would have closed the stream early (a stream processor failed or aborted)."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        events: list[ModelEvent] = []
        failure: Exception | None = None
        try:
            events.extend(self.model.stream(request))  # (a Fail raises here, as before)
        except ProviderError as e:
            if not events:
                raise
            failure = e  # a break: raised after the events, as the durable step keeps it
        return self._replay(events, failure)

    @staticmethod
    def _replay(events: list[ModelEvent], failure: Exception | None) -> Iterator[ModelEvent]:
        yield from events
        if failure is not None:
            raise failure


def on_sync_interpreter(
    agent: Agent, script: list[Scripted], prompt: str
) -> tuple[RunResult, float]:
    """The sync interpreter's result and end time, each model call read whole first."""
    clock = VirtualClock(START)
    model = ReadFirst(ScriptedModel(script, clock=clock))
    judge = ScriptedModel(judge_script, clock=clock)

    def resolve(model_id: str) -> Provider:
        return judge if model_id == "judge" else model

    interp = SyncInterpreter(
        resolve=resolve, handlers={Check: check_text}, clock=clock, sleep=clock.sleep,
        run_ids=lambda: "run1",
    )
    return interp.run(agent, prompt, trace=Trace()), clock.now


class LiveSteps:
    """Carries out each step and keeps its outcome, encoded, as a DBOS step would."""

    def __init__(self, resolve: Callable[[str], ScriptedModel], sleep: Callable[[float], None]):
        self.resolve = resolve
        self._sleep = sleep
        self.records: list[bytes] = []
        self.published: list[Chunk] = []

    def _keep(self, value: object) -> bytes:
        data = msgspec.json.encode(value)
        self.records.append(data)
        return data

    def model(self, request: ModelRequest) -> ModelOutcome:
        events: list[ModelEvent] = []
        try:
            events.extend(self.resolve(request.model).stream(request))
            got = ModelOutcome(tuple(events))
        except Exception as e:
            got = ModelOutcome(tuple(events), stream_failed(e, started=bool(events)))
        return msgspec.json.decode(self._keep(got), type=ModelOutcome)

    def tool(self, inv: ToolInvocation) -> ToolDone:
        ctx = tool_context(inv)
        outcome = run_tool(inv)
        done = ToolDone(outcome, ctx.writer.written if ctx is not None else ())
        return msgspec.json.decode(self._keep(done), type=ToolDone)

    def perform(self, request: object) -> object:
        if isinstance(request, AskModel):
            answer = answer_of(self.resolve(request.request.model).stream(request.request))
            self.records.append(msgspec.json.encode(answer))
            return answer
        assert isinstance(request, Check)
        value = check_text(request)
        self.records.append(msgspec.json.encode(value))
        return value

    def sleep(self, seconds: float) -> None:
        self._sleep(seconds)
        self.records.append(b"null")

    def publish(self, chunks: tuple[Chunk, ...]) -> None:
        self.published.extend(chunks)

    def expired(self) -> str | None:
        return None


class RecoveredSteps:
    """Answers every step from the records, in order, as DBOS does on recovery."""

    def __init__(self, records: list[bytes]) -> None:
        self.records = list(records)
        self.published: list[Chunk] = []

    def _next(self) -> bytes:
        assert self.records, "the recovered run asked for a step the first run never took"
        return self.records.pop(0)

    def model(self, request: ModelRequest) -> ModelOutcome:
        return msgspec.json.decode(self._next(), type=ModelOutcome)

    def tool(self, inv: ToolInvocation) -> ToolDone:
        return msgspec.json.decode(self._next(), type=ToolDone)

    def perform(self, request: object) -> object:
        data = self._next()
        if isinstance(request, AskModel):
            return msgspec.json.decode(data, type=ModelAnswer)
        return msgspec.json.decode(data)

    def sleep(self, seconds: float) -> None:
        self._next()

    def publish(self, chunks: tuple[Chunk, ...]) -> None:
        self.published.extend(chunks)

    def expired(self) -> str | None:
        return None


def durable_run(
    agent: Agent, prompt: str, steps: LiveSteps | RecoveredSteps, clock: Callable[[], float]
) -> RunResult:
    driver = start_run(
        agent, prompt, run_id="run1", clock=clock, options={},
    )
    return drive(driver, steps)


class Readings:
    """A clock whose readings are kept; replayed, it reads them back in order (the
    durable runtime's clock is recorded step by step too)."""

    def __init__(self, clock: Callable[[], float] | None, readings: list[float]) -> None:
        self._clock = clock
        self.readings = readings

    def __call__(self) -> float:
        if self._clock is None:
            return self.readings.pop(0)
        now = self._clock()
        self.readings.append(now)
        return now


@given(pipeline=pipelines, script=scripts, prompt=prompts)
def test_the_durable_driver_and_its_recovery_give_the_sync_run(
    pipeline: Pipeline, script: list[Scripted], prompt: str
) -> None:
    expected, end = on_sync_interpreter(pipeline.agent(), script, prompt)
    clock, resolve = _wired(script)
    live = LiveSteps(resolve, clock.sleep)
    readings = Readings(clock, [])
    first = durable_run(pipeline.agent(), prompt, live, readings)
    assert first == expected
    assert clock.now == end

    recovered = RecoveredSteps(live.records)
    again = durable_run(pipeline.agent(), prompt, recovered, Readings(None, readings.readings))
    assert again == first
    assert recovered.published == live.published
    assert not recovered.records, "the recovered run took fewer steps"
