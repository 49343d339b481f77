"""The four shared workloads (bench/WORKLOADS.md) on this library.

Every figure is microseconds of framework overhead per unit, measured exactly as
``peers.py`` measures the peers::

    overhead = (time of the run through the framework - time of the bare baseline) / units

Each measurement is 1 warm-up plus 5 timed repetitions (``gc.collect()`` before each, GC
left on while timing); "min" is ``(min framework - min baseline) / units`` and "median" the
same with medians.

The fakes live in the process and cost as little as the peers' bare fakes: a provider that
makes one attempt and yields model events it builds on the spot (one ``TextDelta`` per
chunk, like the peers' fakes build one response object per chunk). The baseline iterates
or calls that same fake directly, so what is left is the library alone.

W1pii (unit: one chunk)
    W1's stream (N text deltas) through one built-in `PIIDetector` (every kind, redact):
    the cost of the hold-back guard per chunk, next to W1's bare K = 0 row. The detector
    releases text in batches, so the check counts characters rather than deltas.
W1 stream (unit: one chunk)
    One run; the fake streams N = 20,000 ``TextDelta("tok ")`` (between its text-start,
    text-end and finish events) and no tool call, consumed through the public streaming
    API (``SyncInterpreter.stream``), counting the text deltas that arrive. K = 0 and
    K = 5 pass-through ``process_output_stream`` processors. Baseline: iterate the fake's
    own event generator.
W2 steps (unit: one step)
    One run of S = 200 steps: at steps 0..S-2 the fake returns one call of the tool
    ``echo`` (which returns its argument), at step S-1 the text ``"done"``. K = 0 and
    K = 5 processors with pass-through ``process_input_step`` and ``process_output_step``
    (the before-model and after-model hooks). Baseline: S calls of the fake (each drained),
    with stand-in requests of the right length built outside the timed region.
W3 history (unit: one step)
    W2 with S = 50 and K = 5, at H = 0 and with H = 2,000 prior user/assistant messages
    (built fresh before each repetition, outside the timed region); the ratio is the
    per-step overhead at H = 2,000 over the one at H = 0.
W4 concurrency
    C = 1,000 concurrent async runs of 3 steps (two ``echo`` calls, then text), the fake
    sleeping 50 ms per call, no processors; wall time / 150 ms and peak RSS, in a process
    of its own, beside a baseline process doing the same 3,000 sleeps with plain asyncio.

Growth: W1 at N = 2,000 / 20,000 / 200,000 and W2 at S = 20 / 200 / 2,000 (K = 5), and
the per-unit overhead at the largest size over the one at the smallest.

The runs use the simulator's set-up (a virtual clock, deterministic run ids) on the sync
interpreter, and on the async one where `interpreters.aio` exists.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import importlib.util
import itertools
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sized
from dataclasses import dataclass, field
from typing import Any, Protocol

from effects import Continue
from interpreters.sync import SyncInterpreter
from interpreters.testing import VirtualClock
from pipeline import (
    Agent,
    InputStepArgs,
    InputStepResult,
    Message,
    OutputStepArgs,
    OutputStepResult,
    Processor,
    RunResult,
    StreamArgs,
    StreamResult,
    TextDelta,
    TextPart,
    tool,
)
from pipeline.processors import TokenLimiterProcessor
from pipeline.protocol import ModelEvent, ModelFinish
from pipeline.values import RunInput, TextEnd, TextStart, ToolCall, Usage

# --------------------------------------------------------------------------- parameters

W1_CHUNKS = 20_000
W2_STEPS = 200
W3_STEPS = 50
W3_HISTORY = 2_000
W4_CONCURRENCY = 1_000
W4_STEPS = 3
W4_LATENCY_S = 0.050
HOOKS_K = 5
WARMUP = 1
REPS = 5
GROWTH_W1 = (2_000, 20_000, 200_000)
GROWTH_W2 = (20, 200, 2_000)
LIMITER_BUDGET = 1_000_000
"""W3L's token budget: W3's whole history (about 20,000 tokens) and its steps fit."""

CHUNK_TEXT = "tok "
MODEL = "bench/fake"
SYNC = "pipeline_sync"
ASYNC = "pipeline_async"

RunFn = Callable[[], Awaitable[object]]


@dataclass
class Params:
    """Workload sizes; `quick()` shrinks them for a smoke test (numbers not for reporting)."""

    w1_chunks: int = W1_CHUNKS
    w2_steps: int = W2_STEPS
    w3_steps: int = W3_STEPS
    w3_history: int = W3_HISTORY
    w4_concurrency: int = W4_CONCURRENCY
    w4_steps: int = W4_STEPS
    w4_latency_s: float = W4_LATENCY_S
    hooks_k: int = HOOKS_K
    warmup: int = WARMUP
    reps: int = REPS
    growth_w1: tuple[int, ...] = GROWTH_W1
    growth_w2: tuple[int, ...] = GROWTH_W2
    gc_off: bool = False
    timer: str = "wall"
    """"wall" (time.perf_counter, as peers.py) or "cpu" (time.process_time: this process's
    CPU time, steadier on a machine other jobs share; not for W4, which waits on sleeps)."""

    @classmethod
    def quick(cls) -> Params:
        return cls(
            w1_chunks=W1_CHUNKS // 10,
            w2_steps=W2_STEPS // 10,
            w3_steps=W3_STEPS // 5,
            w3_history=W3_HISTORY // 10,
            w4_concurrency=W4_CONCURRENCY // 10,
            warmup=0,
            reps=1,
            growth_w1=tuple(n // 10 for n in GROWTH_W1),
            growth_w2=tuple(max(2, s // 10) for s in GROWTH_W2),
        )


@dataclass
class Case:
    """One configuration of one workload, and the bare baseline it is compared to.

    `check` runs after every framework repetition: it raises when the run did not do the
    whole workload and returns how many units (chunks, steps, runs) it did.
    """

    workload: str
    variant: str
    hooks: int
    units: int
    baseline: RunFn
    framework: RunFn
    check: Callable[[], int]
    extra: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- timing


async def time_reps(
    fn: RunFn, params: Params, check: Callable[[], int] | None = None
) -> tuple[list[float], int]:
    """Run `fn` warm-up + timed times; the timed wall times (s) and the last check's count."""
    times: list[float] = []
    done = 0
    clock = time.process_time if params.timer == "cpu" else time.perf_counter
    for i in range(params.warmup + params.reps):
        gc.collect()
        if params.gc_off:
            gc.disable()
        t0 = clock()
        try:
            await fn()
        finally:
            dt = clock() - t0
            gc.enable()
        if check is not None:
            done = check()
        if i >= params.warmup:
            times.append(dt)
    return times, done


async def run_case(system: str, case: Case, params: Params) -> dict[str, Any]:
    """One row in the shape peers.py prints."""
    base, _ = await time_reps(case.baseline, params)
    fw, done = await time_reps(case.framework, params, case.check)
    n = case.units
    us = 1e6 / n
    return {
        "system": system,
        "workload": case.workload,
        "variant": case.variant,
        "hooks": case.hooks,
        "units": n,
        "completed": done,
        "baseline_min_us": min(base) * us,
        "baseline_median_us": statistics.median(base) * us,
        "framework_min_us": min(fw) * us,
        "framework_median_us": statistics.median(fw) * us,
        "overhead_min_us": (min(fw) - min(base)) * us,
        "overhead_median_us": (statistics.median(fw) - statistics.median(base)) * us,
        "framework_times_s": fw,
        "baseline_times_s": base,
        **case.extra,
    }


# --------------------------------------------------------------------------- fakes


class HasMessages(Protocol):
    """What the step fake reads of a request: how many messages it carries."""

    @property
    def messages(self) -> Sized: ...


class StandIn:
    """A request stand-in of the right length for the baseline (built outside timing)."""

    __slots__ = ("messages",)

    def __init__(self, n: int) -> None:
        self.messages = range(n)


_USAGE_TEXT = Usage(10, 1)
_USAGE_CALL = Usage(10, 5)


class StreamFake:
    """W1's model: N text deltas, then finish. One attempt per call, like any provider."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks

    def stream(self, request: object) -> Iterator[ModelEvent]:
        yield TextStart("text-0")
        for _ in range(self.chunks):
            yield TextDelta("text-0", CHUNK_TEXT)
        yield TextEnd("text-0")
        yield ModelFinish("stop", _USAGE_TEXT)

    async def astream(self, request: object) -> AsyncIterator[ModelEvent]:
        yield TextStart("text-0")
        for _ in range(self.chunks):
            yield TextDelta("text-0", CHUNK_TEXT)
        yield TextEnd("text-0")
        yield ModelFinish("stop", _USAGE_TEXT)


class StepFake:
    """W2-W4's model: a call of `echo` at steps 0..S-2, the text "done" at step S-1.

    The step comes from the length of the conversation it is sent, as in peers.py:
    history + 1 messages at step 0 and two more per step (the call and its result).
    """

    def __init__(
        self, steps: int, history: int = 0, latency: float = 0.0, record: bool = True
    ) -> None:
        self.steps = steps
        self.history = history
        self.latency = latency
        self.record = record
        self.seen: list[int] = []

    def respond(self, request: HasMessages) -> tuple[ModelEvent, ...]:
        step = (len(request.messages) - self.history - 1) // 2
        if self.record:
            self.seen.append(step)
        if step < self.steps - 1:
            return (
                ToolCall(f"call_{step}", "echo", {"x": f"v{step}"}),
                ModelFinish("tool-calls", _USAGE_CALL),
            )
        return (
            TextStart("text-0"),
            TextDelta("text-0", "done"),
            TextEnd("text-0"),
            ModelFinish("stop", _USAGE_TEXT),
        )

    def stream(self, request: HasMessages) -> Iterator[ModelEvent]:
        return iter(self.respond(request))

    async def astream(self, request: HasMessages) -> AsyncIterator[ModelEvent]:
        if self.latency:
            await asyncio.sleep(self.latency)
        for e in self.respond(request):
            yield e

    def expect(self, steps: int) -> int:
        """Check that the last run asked for steps 0..steps-1, in order; reset."""
        seen, self.seen = self.seen, []
        if seen != list(range(steps)):
            raise AssertionError(
                f"fake saw steps {seen[:5]}...{seen[-5:]} (len {len(seen)}), "
                f"expected 0..{steps - 1}"
            )
        return len(seen)


# --------------------------------------------------------------------------- processors


class PassStream(Processor):
    """A pass-through stream processor (the per-chunk hook)."""

    def __init__(self, i: int) -> None:
        self.id = f"pass-stream-{i}"

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        return Continue()


class PassStep(Processor):
    """A pass-through step processor: before the model call and after it."""

    def __init__(self, i: int) -> None:
        self.id = f"pass-step-{i}"

    def process_input_step(self, args: InputStepArgs[None]) -> InputStepResult[None]:
        return Continue()

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        return Continue()


def echo(x: str) -> str:
    """Return the argument."""
    return x


ECHO = tool(echo)


def stream_agent(k: int) -> Agent:
    return Agent.create(MODEL, output_processors=[PassStream(i) for i in range(k)], max_steps=1)


def step_agent(k: int, steps: int, limiter: bool = False) -> Agent:
    procs = [PassStep(i) for i in range(k)]
    extra = [TokenLimiterProcessor(LIMITER_BUDGET)] if limiter else []
    return Agent.create(
        MODEL, tools=[ECHO], input_processors=[*procs, *extra], output_processors=procs,
        max_steps=steps,
    )


def history(h: int) -> list[Message]:
    """H prior user/assistant messages, then the prompt "go"."""
    out: list[Message] = []
    for i in range(h // 2):
        out.append(Message(id=f"h{2 * i}", role="user", parts=(TextPart(f"user message {i}"),)))
        out.append(
            Message(id=f"h{2 * i + 1}", role="assistant",
                    parts=(TextPart(f"assistant message {i}"),))
        )
    out.append(Message(id="go", role="user", parts=(TextPart("go"),)))
    return out


# --------------------------------------------------------------------------- interpreters


class Runner(Protocol):
    """One interpreter, as the workloads drive it."""

    system: str

    async def count_deltas(self, agent: Agent, fake: StreamFake, messages: RunInput) -> int: ...

    async def count_chars(self, agent: Agent, fake: StreamFake, messages: RunInput) -> int: ...

    async def run(self, agent: Agent, fake: StepFake, messages: RunInput) -> RunResult: ...

    async def baseline_stream(self, fake: StreamFake) -> None: ...

    async def baseline_steps(self, fake: StepFake, requests: list[StandIn]) -> None: ...


def _run_ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"run{next(counter)}"


class SyncRunner:
    """The sync interpreter with the simulator's set-up (virtual clock, fixed run ids)."""

    system = SYNC

    def _interp(self, fake: StreamFake | StepFake) -> SyncInterpreter:
        clock = VirtualClock(1_700_000_000.0)
        return SyncInterpreter(fake, clock=clock, sleep=clock.sleep, run_ids=_run_ids())

    async def count_deltas(self, agent: Agent, fake: StreamFake, messages: RunInput) -> int:
        c = 0
        for chunk in self._interp(fake).stream(agent, messages):
            if type(chunk) is TextDelta:
                c += 1
        return c

    async def count_chars(self, agent: Agent, fake: StreamFake, messages: RunInput) -> int:
        c = 0
        for chunk in self._interp(fake).stream(agent, messages):
            if type(chunk) is TextDelta:
                c += len(chunk.text)
        return c

    async def run(self, agent: Agent, fake: StepFake, messages: RunInput) -> RunResult:
        return self._interp(fake).run(agent, messages)

    async def baseline_stream(self, fake: StreamFake) -> None:
        for _ in fake.stream(None):
            pass

    async def baseline_steps(self, fake: StepFake, requests: list[StandIn]) -> None:
        for r in requests:
            for _ in fake.stream(r):
                pass


class AsyncRunner:
    """The anyio interpreter (`interpreters.aio`), run here on asyncio."""

    system = ASYNC

    def __init__(self) -> None:
        self._cls: Any = importlib.import_module("interpreters.aio").AsyncInterpreter

    def _interp(self, fake: StreamFake | StepFake) -> Any:
        clock = VirtualClock(1_700_000_000.0)
        return self._cls(fake, clock=clock, run_ids=_run_ids())

    async def count_deltas(self, agent: Agent, fake: StreamFake, messages: RunInput) -> int:
        c = 0
        stream = self._interp(fake).stream(agent, messages)
        async with stream:
            async for chunk in stream:
                if type(chunk) is TextDelta:
                    c += 1
        return c

    async def count_chars(self, agent: Agent, fake: StreamFake, messages: RunInput) -> int:
        c = 0
        stream = self._interp(fake).stream(agent, messages)
        async with stream:
            async for chunk in stream:
                if type(chunk) is TextDelta:
                    c += len(chunk.text)
        return c

    async def run(self, agent: Agent, fake: StepFake, messages: RunInput) -> RunResult:
        result: RunResult = await self._interp(fake).run(agent, messages)
        return result

    async def baseline_stream(self, fake: StreamFake) -> None:
        async for _ in fake.astream(None):
            pass

    async def baseline_steps(self, fake: StepFake, requests: list[StandIn]) -> None:
        for r in requests:
            async for _ in fake.astream(r):
                pass


def async_available() -> bool:
    return importlib.util.find_spec("interpreters.aio") is not None


def runner(system: str) -> Runner:
    return SyncRunner() if system == SYNC else AsyncRunner()


# --------------------------------------------------------------------------- workloads


def stream_case(r: Runner, workload: str, k: int, n: int) -> Case:
    fake = StreamFake(n)
    agent = stream_agent(k)
    got = {"n": 0}

    async def baseline() -> None:
        await r.baseline_stream(fake)

    async def framework() -> None:
        got["n"] = await r.count_deltas(agent, fake, "go")

    def check() -> int:
        c, got["n"] = got["n"], 0
        if c != n:
            raise AssertionError(f"consumed {c} text deltas, expected {n}")
        return c

    variant = f"stream, K={k} stream processors, N={n}"
    return Case(workload, variant, k, n, baseline, framework, check, {"size": n})


def pii_case(r: Runner, n: int) -> Case:
    """W1's stream through one PIIDetector (imported here: an optional extra)."""
    from pipeline.processors import PIIDetector

    fake = StreamFake(n)
    agent = Agent.create(MODEL, output_processors=[PIIDetector()], max_steps=1)
    got = {"n": 0}
    want = n * len(CHUNK_TEXT)

    async def baseline() -> None:
        await r.baseline_stream(fake)

    async def framework() -> None:
        got["n"] = await r.count_chars(agent, fake, "go")

    def check() -> int:
        c, got["n"] = got["n"], 0
        if c != want:
            raise AssertionError(f"consumed {c} characters of text, expected {want}")
        return n

    variant = f"stream, PIIDetector (all kinds, redact), N={n}"
    return Case("W1pii", variant, 1, n, baseline, framework, check, {"size": n})


def steps_case(
    r: Runner, workload: str, k: int, steps: int, h: int, limiter: bool = False
) -> Case:
    fake = StepFake(steps, h)
    agent = step_agent(k, steps, limiter)
    requests = [StandIn(h + 1 + 2 * i) for i in range(steps)]
    fresh: dict[str, list[Message]] = {"h": history(h)}
    last: dict[str, RunResult] = {}

    async def baseline() -> None:
        await r.baseline_steps(fake, requests)
        fake.seen.clear()

    async def framework() -> None:
        last["r"] = await r.run(agent, fake, fresh.pop("h"))

    def check() -> int:
        result = last.pop("r")
        if result.status != "finished" or result.text != "done":
            raise AssertionError(f"run {result.status}: {result.error or result.tripwire}")
        if len(result.steps) != steps:
            raise AssertionError(f"{len(result.steps)} steps, expected {steps}")
        fresh["h"] = history(h)
        return fake.expect(steps)

    variant = f"run, K={k} step processors (input+output step), S={steps}, H={h}"
    if limiter:
        variant += ", + TokenLimiterProcessor"
    return Case(workload, variant, k, steps, baseline, framework, check,
                {"size": steps, "history": h})


def w1(r: Runner, p: Params) -> list[Case]:
    return [stream_case(r, "W1", k, p.w1_chunks) for k in (0, p.hooks_k)]


def w1pii(r: Runner, p: Params) -> list[Case]:
    return [pii_case(r, p.w1_chunks)]


def w2(r: Runner, p: Params) -> list[Case]:
    return [steps_case(r, "W2", k, p.w2_steps, 0) for k in (0, p.hooks_k)]


def w3(r: Runner, p: Params) -> list[Case]:
    return [steps_case(r, "W3", p.hooks_k, p.w3_steps, h) for h in (0, p.w3_history)]


def w3_limiter(r: Runner, p: Params) -> list[Case]:
    """W3 at H = max with a TokenLimiterProcessor added (input and every step, default
    approximate counter) under a budget the whole history fits: the limiter counts every
    message and trims nothing (the fake tells steps by the history's length), its worst
    case per step. Compare with W3's H = max row (workload name W3L)."""
    return [steps_case(r, "W3L", p.hooks_k, p.w3_steps, p.w3_history, limiter=True)]


def growth(r: Runner, p: Params) -> list[Case]:
    """W1 and W2 at three sizes each, K = 5 (workload names G1, G2)."""
    return [stream_case(r, "G1", p.hooks_k, n) for n in p.growth_w1] + [
        steps_case(r, "G2", p.hooks_k, s, 0) for s in p.growth_w2
    ]


CASES: dict[str, Callable[[Runner, Params], list[Case]]] = {
    "W1": w1, "W1pii": w1pii, "W2": w2, "W3": w3, "W3L": w3_limiter, "growth": growth,
}


# --------------------------------------------------------------------------- W4


async def baseline_w4_run(p: Params) -> int:
    for _ in range(p.w4_steps):
        await asyncio.sleep(p.w4_latency_s)
    return p.w4_steps


def w4_runner(system: str, p: Params) -> Callable[[], Awaitable[int]]:
    """One W4 run (returns the number of steps it did), for `system`."""
    if system == "baseline":

        async def base() -> int:
            return await baseline_w4_run(p)

        return base
    r = AsyncRunner()
    fake = StepFake(p.w4_steps, 0, p.w4_latency_s, record=False)
    agent = step_agent(0, p.w4_steps)

    async def one() -> int:
        result = await r.run(agent, fake, "go")
        if result.status != "finished" or result.text != "done":
            raise AssertionError(f"run {result.status}: {result.error or result.tripwire}")
        return len(result.steps)

    return one
