"""The async interpreter: runs, streams, async hooks and tools, I/O, virtual time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator

import anyio
import anyio.lowlevel
import msgspec
import pytest

from effects import Abort, AwaitHook, Continue, Out, Replace
from interpreters import AsyncNotSupportedError
from interpreters.aio import AsyncInterpreter
from interpreters.core.trace import Trace
from interpreters.providers.provider import AsyncProvider
from interpreters.sim.simulator import Scripted
from interpreters.sync import SyncInterpreter
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
    AskModel,
    InputArgs,
    InputResult,
    ModelAnswer,
    OutputResultArgs,
    OutputResultResult,
    OutputStepArgs,
    OutputStepResult,
    StatefulProcessor,
    StepChange,
    StreamArgs,
    StreamResult,
    abort,
    processor,
)
from pipeline.values.chunks import Chunk, Finish, ModelEvent, TextDelta
from pipeline.values.context import RunContext
from pipeline.values.messages import MessageList, TextPart, user
from pipeline.values.model import ModelRequest
from pipeline.values.result import ApiFailed, ProcessorFailed, StreamFailed
from tests.helpers import NoKeyError, assert_scoped, assert_unconfigured, unconfigured

pytestmark = pytest.mark.anyio


def weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


async def forecast(city: str, days: int = 1) -> str:
    """Forecast for a city (async)."""
    await anyio.lowlevel.checkpoint()
    return f"{days} day(s) of sun in {city}"


class Upper(StatefulProcessor[None]):
    id = "upper"

    def initial_state(self) -> None:
        return None

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            return Replace(TextDelta(args.part.id, args.part.text.upper()))
        return Continue()


class Guard(StatefulProcessor[None]):
    id = "guard"

    def initial_state(self) -> None:
        return None

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if "bad" in args.text.lower():
            abort("too bad", retry=True)
        return Continue()


SCRIPT: list[Scripted] = [
    Fail(status=429, retry_after=2),
    Say("checking", calls=[call("weather", city="Paris")]),
    Say(["bad", " answer"]),
    Say(["it is ", "sunny"]),
]


def sync_agent() -> Agent:
    return Agent.create(
        "sim/model", instructions="be nice", tools=[weather], output_processors=[Upper(), Guard()]
    )


async def test_run_equals_the_sync_simulator() -> None:
    sim = Simulator(ScriptedModel(SCRIPT), run_ids=numbered_run_ids())
    expected = sim.run(sync_agent(), "weather?")
    asim = AsyncSimulator(ScriptedModel(SCRIPT), run_ids=numbered_run_ids())
    got = await asim.run(sync_agent(), "weather?")
    assert got.result == expected.result
    assert got.trace.comparable() == expected.trace.comparable()
    assert got.clock == expected.clock
    assert got.result.text == "CHECKINGIT IS SUNNY"
    assert got.result.retry_count == 1


async def test_stream_hands_out_every_chunk_then_the_result() -> None:
    sim = AsyncSimulator(ScriptedModel(SCRIPT))
    trace = Trace()
    stream = sim.stream(sync_agent(), "weather?", trace=trace)
    assert not stream.done
    with pytest.raises(RuntimeError, match="not finished"):
        _ = stream.result
    got: list[Chunk] = []
    async with stream:
        async for c in stream:
            got.append(c)
    assert stream.done
    assert got == trace.chunks
    assert isinstance(got[-1], Finish)
    # the caller saw the response the guard discarded too (it had streamed)
    streamed = "".join(c.text for c in got if isinstance(c, TextDelta))
    assert streamed == "CHECKINGBAD ANSWERIT IS SUNNY"
    assert stream.result.status == "finished"
    # iterating a finished stream again yields nothing
    assert [c async for c in stream] == []


class AsyncPipeline(StatefulProcessor[int]):
    """Every hook is async: lowercases the input, uppercases the stream, retries once."""

    id = "async-pipeline"

    def initial_state(self) -> int:
        return 0

    async def process_input(self, args: InputArgs[int]) -> InputResult[int]:
        await anyio.lowlevel.checkpoint()
        low = args.message_list.map_messages(
            lambda m: m.with_parts(TextPart(p.text.lower()) for p in m.parts
                                   if isinstance(p, TextPart))
        )
        return Replace(low)

    async def process_output_stream(self, args: StreamArgs[int]) -> StreamResult[int]:
        await anyio.lowlevel.checkpoint()
        if isinstance(args.part, TextDelta):
            return Replace(TextDelta(args.part.id, args.part.text.upper()))
        return Continue()

    async def process_output_step(self, args: OutputStepArgs[int]) -> OutputStepResult[int]:
        await anyio.lowlevel.checkpoint()
        if args.state == 0 and not args.tool_calls:
            return Out(Abort("once more", retry=True), 1)
        return Continue()

    async def process_output_result(
        self, args: OutputResultArgs[int]
    ) -> OutputResultResult[int]:
        await anyio.lowlevel.checkpoint()
        return Continue()


async def test_async_hooks_are_awaited() -> None:
    p = AsyncPipeline()
    agent = Agent.create("m", input_processors=[p], output_processors=[p])
    model = ScriptedModel([Say("first"), Say("second")])
    run = await AsyncSimulator(model).run(agent, "HELLO There")
    assert run.result.status == "finished"
    assert model.requests[0].messages[0].text == "hello there"
    assert run.result.text == "SECOND"
    assert run.result.retry_count == 1
    awaited = {
        (c.processor_id, c.hook) for c in run.trace.commands if isinstance(c, AwaitHook)
    }
    assert awaited == {
        ("async-pipeline", h)
        for h in ("process_input", "process_output_stream", "process_output_step",
                  "process_output_result")
    }


class AsyncRaiser(StatefulProcessor[None]):
    id = "raiser"

    def initial_state(self) -> None:
        return None

    async def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        await anyio.lowlevel.checkpoint()
        if "trip" in args.text:
            abort("tripped by async hook", metadata={"k": 1})
        raise ValueError("judge crashed")


async def test_async_hook_that_raises_fails_closed_and_abort_trips() -> None:
    agent = Agent.create("m", output_processors=[AsyncRaiser()])
    failed = await AsyncSimulator(ScriptedModel([Say("hello")])).run(agent, "x")
    assert failed.result.status == "failed"
    assert failed.result.error == ProcessorFailed(
        "raiser", "process_output_step", "ValueError", "judge crashed"
    )
    tripped = await AsyncSimulator(ScriptedModel([Say("trip")])).run(agent, "x")
    assert tripped.result.status == "tripped"
    assert tripped.result.tripwire is not None
    assert tripped.result.tripwire.processor_id == "raiser"
    assert tripped.result.tripwire.reason == "tripped by async hook"


async def test_async_tool_is_awaited_and_sync_tool_runs() -> None:
    agent = Agent.create("m", tools=[weather, forecast])
    model = ScriptedModel([
        Say(calls=[call("forecast", city="Oslo", days=3), call("weather", city="Rome")]),
        Say("done"),
    ])
    run = await AsyncSimulator(model).run(agent, "go")
    assert run.result.status == "finished"
    results = run.result.steps[0].tool_results
    assert [(r.tool_name, r.result, r.is_error) for r in results] == [
        ("forecast", "3 day(s) of sun in Oslo", False),
        ("weather", "sunny in Rome", False),
    ]


async def test_async_tool_that_raises_is_an_error_result() -> None:
    async def explode(x: int) -> int:
        """Explodes."""
        await anyio.lowlevel.checkpoint()
        raise RuntimeError(f"no {x}")

    agent = Agent.create("m", tools=[explode])
    run = await AsyncSimulator(
        ScriptedModel([Say(calls=[call("explode", x=2)]), Say("ok")])
    ).run(agent, "go")
    r = run.result.steps[0].tool_results[0]
    assert (r.is_error, r.result) == (True, "RuntimeError: no 2")
    assert run.result.status == "finished"


@pytest.mark.filterwarnings("ignore::pipeline.ProcessorPlacementWarning")  # placed so on purpose
def test_sync_interpreter_rejects_async_hooks_and_tools_naming_them() -> None:
    p = AsyncPipeline()
    agent = Agent.create("m", output_processors=[p], tools=[forecast])
    with pytest.raises(AsyncNotSupportedError) as e:
        Simulator(ScriptedModel([Say("x")])).run(agent, "hi")
    msg = str(e.value)
    assert "'async-pipeline'" in msg
    assert "process_output_stream" in msg
    assert "tool 'forecast' is async" in msg
    assert "AsyncInterpreter" in msg
    with pytest.raises(AsyncNotSupportedError):
        SyncInterpreter(ScriptedModel([Say("x")])).run(agent, "hi")


class Check(msgspec.Struct, frozen=True):
    text: str


class Judge(StatefulProcessor[None]):
    """A generator hook: asks a handler (Check) and a judge model (AskModel)."""

    id = "judge"

    def initial_state(self) -> None:
        return None

    def process_output_step(
        self, args: OutputStepArgs[None]
    ) -> Generator[object, object, OutputStepResult[None]]:
        ok = yield Check(args.text)
        verdict = yield AskModel(
            ModelRequest(model="judge", system=(), messages=args.messages[-1:])
        )
        assert isinstance(verdict, ModelAnswer)
        if not ok or verdict.text != "PASS":
            abort(f"blocked: {verdict.text}")
        return Continue()


async def test_generator_hook_io_through_async_handler_and_judge_model() -> None:
    seen: list[str] = []

    async def check(req: object) -> bool:
        assert isinstance(req, Check)
        await anyio.lowlevel.checkpoint()
        seen.append(req.text)
        return "ok" in req.text

    agent = Agent.create("main", output_processors=[Judge()])
    judge = ScriptedModel([Say("PASS"), Say("FAIL")])
    sim = AsyncSimulator(ScriptedModel([Say("ok fine"), Say("ok too")]),
                         models={"judge": judge}, handlers={Check: check})
    first = await sim.run(agent, "a")
    second = await sim.run(agent, "b")
    assert seen == ["ok fine", "ok too"]
    assert first.result.status == "finished"
    assert second.result.status == "tripped"
    assert second.result.tripwire is not None
    assert second.result.tripwire.reason == "blocked: FAIL"
    assert [r.messages[-1].text for r in judge.requests] == ["ok fine", "ok too"]


async def test_missing_handler_fails_the_hook_closed() -> None:
    agent = Agent.create("main", output_processors=[Judge()])
    run = await AsyncSimulator(ScriptedModel([Say("ok")])).run(agent, "a")
    assert run.result.status == "failed"
    assert isinstance(run.result.error, ProcessorFailed)
    assert run.result.error.error_type == "LookupError"
    assert "no handler for I/O request Check" in run.result.error.message


async def test_latency_and_backoff_are_virtual() -> None:
    model = ScriptedModel([
        Fail(status=503, retry_after=45.0),
        Say(["a", "b"], latency=86_400.0, chunk_latency=60.0),
    ])
    sim = AsyncSimulator(model, start=1000.0)
    with anyio.fail_after(30):  # a safety net: real sleeps of a day would never end
        run = await sim.run(Agent.create("m"), "x")
    assert run.result.status == "finished"
    # 45 s retry + 86400 latency + 60 * 4 gaps between the 5 events
    assert run.clock == 1000.0 + 45.0 + 86_400.0 + 60.0 * 4


async def test_real_sleep_uses_the_given_sleeps_not_the_virtual_clock() -> None:
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)
        await anyio.lowlevel.checkpoint()

    script: list[Scripted] = [Fail(status=429, retry_after=0.01), Say("x", latency=0.5)]
    real = AsyncSimulator(ScriptedModel(script, async_sleep=record), real_sleep=True, start=5.0)
    run = await real.run(Agent.create("m"), "x")
    assert run.result.status == "finished"
    assert slept == [0.5]          # the model's latency went to its async_sleep
    assert run.clock == 5.0        # and the retry waited for real, not on the clock
    virtual = AsyncSimulator(ScriptedModel(script), start=5.0)
    assert (await virtual.run(Agent.create("m"), "x")).clock == 5.0 + 0.01 + 0.5


async def test_provider_failures_are_typed() -> None:
    rejected = await AsyncSimulator(
        ScriptedModel([Fail(status=400, message="bad request")])
    ).run(Agent.create("m"), "x")
    assert rejected.result.status == "failed"
    assert isinstance(rejected.result.error, ApiFailed)
    assert rejected.result.error.error.status == 400

    broken = await AsyncSimulator(
        ScriptedModel([Say(["one ", "two ", "three"], break_after=3)])
    ).run(Agent.create("m"), "x")
    assert broken.result.status == "failed"
    assert isinstance(broken.result.error, StreamFailed)
    last = broken.result.messages.messages[-1]
    assert (last.role, last.text, last.incomplete) == ("assistant", "one two ", True)


async def test_provider_that_raises_when_opening_and_coroutine_astream() -> None:
    class Down:
        def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            raise ConnectionError("refused")

    class CoroutineProvider:
        def __init__(self) -> None:
            self.model = ScriptedModel([Say("from a coroutine")])

        async def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            await anyio.lowlevel.checkpoint()
            return self.model.astream(request)

    down = await AsyncInterpreter(Down()).run(Agent.create("m"), "x")
    assert down.status == "failed"
    assert isinstance(down.error, ApiFailed)
    assert "ConnectionError: refused" in down.error.error.message

    ok = await AsyncInterpreter(CoroutineProvider()).run(  # type: ignore[arg-type]
        Agent.create("m"), "x"
    )
    assert ok.text == "from a coroutine"


async def test_run_context_and_clock_reach_the_messages() -> None:
    clock = VirtualClock(42.0)
    interp = AsyncInterpreter(
        ScriptedModel([Say("hi")], clock=clock), clock=clock, run_ids=lambda: "r7"
    )
    result = await interp.run(
        Agent.create("m"), MessageList.of([user("hello", id="u-1")]),
        thread_id="t1", resource_id="u1",
    )
    reply = result.messages.messages[-1]
    assert reply.id.startswith("r7-")
    assert (reply.thread_id, reply.resource_id, reply.created_at) == ("t1", "u1", 42.0)


async def test_timeout_must_be_non_negative() -> None:
    interp = AsyncInterpreter(ScriptedModel([Say("x")]))
    with pytest.raises(ValueError, match="timeout"):
        interp.stream(Agent.create("m"), "x", timeout=-1)
    with pytest.raises(ValueError, match="provider"):
        AsyncInterpreter()


async def test_the_async_simulator_stream_takes_the_run_context_like_run() -> None:
    seen: list[RunContext] = []

    def note(args: InputArgs[None]) -> InputResult[None]:
        seen.append(args.context)
        return Continue()

    agent = Agent.create("m", input_processors=[processor("note", process_input=note)])
    sim = AsyncSimulator(ScriptedModel([Say("a"), Say("a")]))
    ran = await sim.run(agent, "hi", thread_id="t1", resource_id="u1", values={"tier": "pro"})
    async with sim.stream(
        agent, "hi", thread_id="t1", resource_id="u1", values={"tier": "pro"}
    ) as stream:
        async for _ in stream:
            pass
    assert_scoped(seen, stream.result, ran.result)


# --- configuration errors ------------------------------------------------------------------


async def test_a_missing_key_for_the_agents_model_raises_before_any_request() -> None:
    served = ScriptedModel([Say("never")])
    interp = AsyncInterpreter(resolve=unconfigured("m", served))
    with pytest.raises(NoKeyError, match="no API key for m"):
        interp.stream(Agent.create("m"), "x")
    with pytest.raises(NoKeyError, match="no API key for m"):
        await interp.run(Agent.create("m"), "x")
    assert served.requests == []


async def test_a_switch_to_an_unconfigured_model_fails_with_a_configuration_error() -> None:
    served = ScriptedModel([Say("never")])
    to_other = processor(
        "to-other", process_input_step=lambda args: Replace(StepChange(model="other"))
    )
    agent = Agent.create("m", input_processors=[to_other])
    result = await AsyncInterpreter(resolve=unconfigured("other", served)).run(agent, "x")
    assert_unconfigured(result, "other")
    assert served.requests == []


async def test_other_resolver_failures_are_left_to_the_run() -> None:
    def resolve(model_id: str) -> AsyncProvider:
        raise KeyError(model_id)

    stream = AsyncInterpreter(resolve=resolve).stream(Agent.create("m"), "x")  # no raise
    async with stream:
        async for _ in stream:
            pass
    assert isinstance(stream.result.error, ApiFailed)
    assert stream.result.error.error.error_type == "provider-error"
