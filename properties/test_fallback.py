"""Fallback models under random failures at random chunk positions, on every interpreter.

A chain of three scripted models (`main`, `backup`, `last`), each failing before it
streams (HTTP errors of every kind, connection failures) or breaking after any number
of events, with stream processors that change text or hold all of it back until the
response ends. For every generated script and policy:

- every interpreter gives the same run (`Trace.comparable()`, the result and the end
  time): the sync and async simulators, the sync and async interpreters wired by hand
  (asyncio and trio), the durable loop over in-process steps, and the journal's replay;
  each with its own circuit breaker on the virtual clock, which opens after one failure
  here, so skips happen too;
- what the caller was streamed stays consistent: the text of each step as the caller
  got it (a `StepReset` drops what the step streamed before it) is the step's text in
  the result, and the run's text is their concatenation; no text of a response that
  broke is anywhere in a finished run (what a processor held back of it was dropped
  with it); without `after_output` no reset is ever sent and a failed model's released
  text ends the run instead of being followed by another model's.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import msgspec
from hypothesis import event, example, given
from hypothesis import strategies as st

from effects import Continue, Out, Replace
from interpreters.aio import AsyncInterpreter
from interpreters.core.breaker import CircuitBreaker
from interpreters.core.trace import Trace
from interpreters.durable.loop import ModelOutcome, ToolDone, drive
from interpreters.record.journal import Recorder
from interpreters.record.replay import replay_sync
from interpreters.run.common import perform_here, start_run, stream_failed
from interpreters.sim.simulator import Scripted
from interpreters.sync import SyncInterpreter, run_tool
from interpreters.testing import (
    AsyncSimulator,
    Fail,
    Say,
    ScriptedModel,
    Simulator,
    VirtualClock,
    call,
    numbered_run_ids,
)
from pipeline.agent import Agent
from pipeline.processor import (
    BaseProcessor,
    FlushArgs,
    FlushResult,
    StatefulProcessor,
    StreamArgs,
    StreamResult,
)
from pipeline.protocol import ToolInvocation
from pipeline.values.chunks import (
    Chunk,
    ModelEvent,
    ReasoningEnd,
    ReasoningStart,
    StepFinish,
    StepReset,
    StepStart,
    TextDelta,
    TextEnd,
    TextStart,
)
from pipeline.values.fallback import DEFAULT_FAIL_OVER, FailureKind, Fallback
from pipeline.values.model import ModelRequest
from pipeline.values.result import ApiFailed, RunResult, StreamFailed
from pipeline.values.retry import RetryPolicy

START = 1_700_000_000.0
MODELS = ("main", "backup", "last")
Scripts = dict[str, list[Scripted]]
Outcome = tuple[RunResult, tuple[object, ...], float]


def echo(text: str) -> str:
    """Echo the text."""
    return f"echo {text}"


class Upper(StatefulProcessor[None]):
    id = "upper"

    def initial_state(self) -> None:
        return None

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            return Replace(TextDelta(args.part.id, args.part.text.upper()))
        return Continue()


class HoldAll(StatefulProcessor[tuple[str, ...]]):
    """Holds every text delta back; releases them joined when the response ends."""

    id = "hold-all"

    def initial_state(self) -> tuple[str, ...]:
        return ()

    def process_output_stream(
        self, args: StreamArgs[tuple[str, ...]]
    ) -> StreamResult[tuple[str, ...]]:
        if isinstance(args.part, TextDelta):
            return Out(Replace(()), (*args.state, args.part.id, args.part.text))
        return Continue()

    def flush_output_stream(
        self, args: FlushArgs[tuple[str, ...]]
    ) -> FlushResult[tuple[str, ...]]:
        held = args.state
        if not held:
            return Continue()
        text = "".join(held[1::2])
        return Out(Replace((TextDelta(held[0], text),)), ())


PROCESSORS: dict[str, Callable[[], BaseProcessor]] = {"upper": Upper, "hold-all": HoldAll}


class Setup(msgspec.Struct, frozen=True):
    processors: tuple[str, ...]
    on: tuple[FailureKind, ...]
    after_output: bool
    max_retries: int

    def agent(self) -> Agent:
        return Agent.create(
            Fallback.of(*MODELS, on=self.on, after_output=self.after_output),
            tools=[echo],
            output_processors=[PROCESSORS[p]() for p in self.processors],
            retry_policy=RetryPolicy(max_retries=self.max_retries),
            max_steps=3,
        )


@st.composite
def say(draw: st.DrawFn, model: str, index: int) -> Say:
    """A response whose text pieces are unique to it (`<model><index>.<k>`)."""
    n = draw(st.integers(0, 3))
    text = [f"{model}{index}.{k} " for k in range(n)]
    broken = draw(st.sampled_from(("no", "no", "break", "break", "unfinished")))
    calls = [call("echo", text=f"{model}{index}")] if draw(st.booleans()) else []
    return Say(
        text=text, calls=calls,
        reasoning=draw(st.sampled_from(((), (f"{model}{index}.r ",)))),
        chunk_latency=draw(st.sampled_from((0.0, 0.25))),
        break_after=draw(st.integers(0, n + 3)) if broken == "break" else None,
        unfinished=broken == "unfinished",
        break_with=draw(st.sampled_from((None, Fail(status=503), Fail(status=500))))
        if broken == "break" else None,
    )


fails = st.builds(
    Fail,
    status=st.sampled_from((429, 500, 503, 404, 400, 401, None)),
    latency=st.sampled_from((0.0, 0.5)),
)


@st.composite
def scripts(draw: st.DrawFn) -> Scripts:
    out: Scripts = {}
    for model in MODELS:
        size = draw(st.integers(0, 4))
        drawn = [draw(st.one_of(say(model, i), fails)) for i in range(size)]
        # then answers that do not fail, so that most runs get somewhere
        out[model] = [*drawn, *(Say([f"{model}{i}.ok "]) for i in range(size, size + 4))]
    return out


setups = st.builds(
    Setup,
    processors=st.lists(st.sampled_from(sorted(PROCESSORS)), unique=True, max_size=2).map(tuple),
    on=st.sampled_from((DEFAULT_FAIL_OVER, (*DEFAULT_FAIL_OVER, "invalid-request", "auth"))),
    after_output=st.booleans(),
    max_retries=st.integers(0, 1),
)


# --- the interpreters -------------------------------------------------------------------


def _breaker(clock: Callable[[], float]) -> CircuitBreaker:
    return CircuitBreaker(failures=1, cooldown=5.0, clock=clock)


def _models(s: Scripts, clock: VirtualClock) -> dict[str, ScriptedModel]:
    return {m: ScriptedModel(s[m], clock=clock) for m in MODELS}


def on_simulator(agent: Agent, s: Scripts) -> Outcome:
    clock = VirtualClock(START)
    models = _models(s, clock)
    sim = Simulator(models["main"], models=models, start=START, run_ids=numbered_run_ids())
    sim.breaker.failures, sim.breaker.cooldown = 1, 5.0
    run = sim.run(agent, "hello")
    return run.result, run.trace.comparable(), run.clock


def on_sync(agent: Agent, s: Scripts, observers: list[Recorder] | None = None) -> Outcome:
    clock = VirtualClock(START)
    models = _models(s, clock)
    interp = SyncInterpreter(resolve=models.__getitem__, clock=clock, sleep=clock.sleep,
                             run_ids=lambda: "run1", breaker=_breaker(clock),
                             observers=observers)
    trace = Trace()
    result = interp.run(agent, "hello", trace=trace)
    return result, trace.comparable(), clock.now


async def on_async(agent: Agent, s: Scripts) -> Outcome:
    clock = VirtualClock(START)
    models = _models(s, clock)

    async def sleep(seconds: float) -> None:
        clock.sleep(seconds)

    interp = AsyncInterpreter(resolve=models.__getitem__, clock=clock, sleep=sleep,
                              run_ids=lambda: "run1", breaker=_breaker(clock))
    trace = Trace()
    result = await interp.run(agent, "hello", trace=trace)
    return result, trace.comparable(), clock.now


async def on_async_simulator(agent: Agent, s: Scripts) -> Outcome:
    clock = VirtualClock(START)
    models = _models(s, clock)
    sim = AsyncSimulator(models["main"], models=models, start=START,
                         run_ids=numbered_run_ids())
    sim.breaker.failures, sim.breaker.cooldown = 1, 5.0
    run = await sim.run(agent, "hello")
    return run.result, run.trace.comparable(), run.clock


class _Steps:
    """The durable driver's steps in process (as in test_equivalence)."""

    def __init__(self, clock: VirtualClock, models: dict[str, ScriptedModel]) -> None:
        self.clock = clock
        self.models = models
        self.handlers = _breaker(clock).handlers()

    def model(self, request: ModelRequest) -> ModelOutcome:
        events: list[ModelEvent] = []
        try:
            for e in self.models[request.model].stream(request):
                events.append(e)
        except Exception as e:
            return ModelOutcome(tuple(events), stream_failed(e, started=bool(events)))
        return ModelOutcome(tuple(events))

    def tool(self, inv: ToolInvocation) -> ToolDone:
        return ToolDone(run_tool(inv))

    def perform(self, request: object) -> object:
        return perform_here(self.models.__getitem__, self.handlers, request)

    def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)

    def publish(self, chunks: tuple[Chunk, ...]) -> None:
        pass

    def expired(self) -> str | None:
        return None


def on_durable(agent: Agent, s: Scripts) -> Outcome:
    clock = VirtualClock(START)
    trace = Trace()
    driver = start_run(agent, "hello", run_id="run1", clock=clock, options={"trace": trace})
    result = drive(driver, _Steps(clock, _models(s, clock)))
    return result, trace.comparable(), clock.now


def _flat(s: Scripts) -> Scripts:
    """The scripts without latencies (the durable model step reads a whole stream)."""
    return {m: [msgspec.structs.replace(x, latency=0.0) if isinstance(x, Fail)
                else msgspec.structs.replace(x, latency=0.0, chunk_latency=0.0) for x in xs]
            for m, xs in s.items()}


# --- what the caller got ------------------------------------------------------------------


def streamed_steps(chunks: tuple[object, ...]) -> list[str]:
    """The text of each step as the caller got it: a reset drops what its step streamed."""
    done: list[str] = []
    buf: list[str] = []
    for c in chunks:
        if type(c) is StepStart or type(c) is StepReset:
            buf = []
        elif type(c) is TextDelta:
            buf.append(c.text)
        elif type(c) is StepFinish:
            done.append("".join(buf))
            buf = []
    return done


def check_parts_closed(chunks: tuple[object, ...]) -> None:
    """Each text and reasoning part is closed before another of its id opens and before
    its step finishes (a reset closes them: the UI stream closes what it drops)."""
    open_ids: set[str] = set()
    for c in chunks:
        if type(c) is TextStart or type(c) is ReasoningStart:
            assert c.id not in open_ids, f"{c.id} opened twice"
            open_ids.add(c.id)
        elif type(c) is TextEnd or type(c) is ReasoningEnd:
            open_ids.discard(c.id)
        elif type(c) is StepReset:
            open_ids.clear()
        elif type(c) is StepFinish:
            assert not open_ids, f"step finished with {open_ids} open"


def broken_pieces(s: Scripts) -> list[str]:
    """The text pieces of every response that breaks."""
    return [t.strip() for xs in s.values() for x in xs
            if isinstance(x, Say) and (x.break_after is not None or x.unfinished)
            for t in x.text]


def check_consistent(setup: Setup, s: Scripts, outcome: Outcome) -> None:
    result, comparable, _ = outcome
    chunks = comparable[2]
    assert isinstance(chunks, tuple)
    resets = [c for c in chunks if type(c) is StepReset]
    tried = [a for step in result.steps for a in step.attempts]
    if isinstance(result.error, ApiFailed | StreamFailed):
        tried += result.error.tried  # the attempts of the step the run failed at
    if not setup.after_output:
        assert not resets, "a reset without after_output"
        assert not any(a.released for a in tried)
    else:
        assert len(resets) == sum(a.released for a in tried)
    if result.status != "finished":
        return
    check_parts_closed(chunks)
    steps = streamed_steps(chunks)
    assert steps == [step.text for step in result.steps]
    assert "".join(steps) == result.text
    text = result.text.lower()
    for piece in broken_pieces(s):
        assert piece.lower() not in text, piece


def _events(result: RunResult) -> None:
    event(f"status {result.status}")
    attempts = [a for step in result.steps for a in step.attempts]
    if attempts:
        event("failed over")
    if any(a.kind == "circuit-open" for a in attempts):
        event("skipped an open circuit")
    if any(a.released for a in attempts):
        event("reset after output")


HELD = Setup(("hold-all",), DEFAULT_FAIL_OVER, False, 0)
"""Every example covers: a model that breaks while a processor holds its text back."""
HELD_SCRIPT: Scripts = {
    "main": [Say(["main0.0 ", "main0.1 "], break_after=2)],
    "backup": [Say(["backup0.0 "])],
    "last": [Say(["last0.0 "])],
}


@given(setup=setups, s=scripts())
@example(setup=HELD, s=HELD_SCRIPT)
@example(setup=msgspec.structs.replace(HELD, processors=("upper",), after_output=True),
         s=HELD_SCRIPT)
def test_failover_is_the_same_and_consistent_on_every_interpreter(
    setup: Setup, s: Scripts
) -> None:
    expected = on_simulator(setup.agent(), s)
    _events(expected[0])
    check_consistent(setup, s, expected)
    assert on_sync(setup.agent(), s) == expected

    async def both() -> list[Outcome]:
        return [await on_async(setup.agent(), s), await on_async_simulator(setup.agent(), s)]

    for backend in ("asyncio", "trio"):
        for got in anyio.run(both, backend=backend):
            assert got == expected, backend
    flat = _flat(s)
    assert on_durable(setup.agent(), flat) == on_simulator(setup.agent(), flat)
    recorder = Recorder()
    recorded = on_sync(setup.agent(), s, observers=[recorder])
    replayed = replay_sync(recorder.journal("run1"), setup.agent())
    assert replayed.identical, replayed.divergence
    assert (replayed.result, replayed.trace.comparable()) == recorded[:2]
