"""Input guards that race the model (`concurrent=True`): the guard's judge call and the first
model call run at once; the model's output is held and no tool runs until the guard passed.

Each case runs on the sync simulator (virtual time), the async simulator (asyncio and
trio) and the sync interpreter (worker threads): a guard that passes gives the sequential
run's result; one that trips while the model streams closes the stream and delivers
nothing; one that trips after the model asked for a tool keeps the tool from running; a
judge that fails fails closed; a cancel while both are in flight delivers nothing."""

from __future__ import annotations

from collections.abc import Generator

import msgspec
import pytest

from effects import Abort, CloseStream, Continue, Replace
from interpreters.durable.loop import drive
from interpreters.run.common import start_run
from interpreters.sync import SyncInterpreter
from interpreters.testing import (
    AsyncSimulator,
    Fail,
    Say,
    ScriptedModel,
    Simulator,
    VirtualClock,
    call,
)
from pipeline import Agent
from pipeline.processor import AskModel, InputArgs, InputResult, ModelAnswer, processor
from pipeline.processors import (
    ModerationProcessor,
    PIIDetector,
    ProcessorConfigError,
    PromptInjectionDetector,
)
from pipeline.tools import tool
from pipeline.values.chunks import Chunk, TextDelta, ToolCall
from pipeline.values.model import ModelRequest
from pipeline.values.result import RunResult
from properties.test_equivalence import _InProcessSteps

CLEAN = msgspec.json.encode({"category_scores": {"hate": 0.0}}).decode()
FLAGGED = msgspec.json.encode({"category_scores": {"hate": 0.9}}).decode()
WORDS = ["one ", "two ", "three"]


class Ran:
    def __init__(self) -> None:
        self.calls = 0


def agent(ran: Ran, *, concurrent: bool = True) -> Agent:
    @tool
    def lookup(q: str) -> str:
        """Look q up."""
        ran.calls += 1
        return q.upper()

    guard = ModerationProcessor("judge", categories=("hate",), moderate_stream=False,
                                concurrent=concurrent)
    return Agent.create("m", input_processors=[guard], tools=[lookup])


def judge(verdict: str | Fail, latency: float) -> ScriptedModel:
    if isinstance(verdict, Fail):
        return ScriptedModel([msgspec.structs.replace(verdict, latency=latency)])
    return ScriptedModel([Say(verdict, latency=latency)])


class Seen(msgspec.Struct):
    chunks: list[Chunk]
    result: RunResult
    first_text_at: float | None = None


def on_sync(model: list[Say], verdict: str | Fail, guard_latency: float, *,
            concurrent: bool = True, timeout: float | None = None,
            ran: Ran | None = None) -> Seen:
    ran = ran or Ran()
    sim = Simulator(ScriptedModel(model), models={"judge": judge(verdict, guard_latency)},
                    start=0.0)
    got: list[Chunk] = []
    first: float | None = None
    with sim.stream(agent(ran, concurrent=concurrent), "hi", timeout=timeout) as s:
        for c in s:
            if first is None and isinstance(c, TextDelta):
                first = sim.clock.now
            got.append(c)
    return Seen(got, s.result, first)


async def on_async(model: list[Say], verdict: str | Fail, guard_latency: float, *,
                   timeout: float | None = None, ran: Ran | None = None) -> Seen:
    ran = ran or Ran()
    sim = AsyncSimulator(ScriptedModel(model), models={"judge": judge(verdict, guard_latency)},
                         start=0.0)
    got: list[Chunk] = []
    first: float | None = None
    async with sim.stream(agent(ran), "hi", timeout=timeout) as s:
        async for c in s:
            if first is None and isinstance(c, TextDelta):
                first = sim.clock.now
            got.append(c)
    return Seen(got, s.result, first)


def on_threads(model: list[Say], verdict: str, ran: Ran | None = None) -> Seen:
    ran = ran or Ran()
    main, judging = ScriptedModel(model), judge(verdict, 0.0)
    interp = SyncInterpreter(resolve=lambda model_id: judging if model_id == "judge" else main,
                             observers=())
    with interp.stream(agent(ran), "hi") as s:
        got = list(s)
    return Seen(got, s.result)


def text_of(chunks: list[Chunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


STREAM = [Say(WORDS, latency=0.3, chunk_latency=0.1)]


# --- a guard that passes ------------------------------------------------------------------


def test_a_passing_guard_gives_the_sequential_run_and_the_first_token_at_the_max() -> None:
    racing = on_sync(STREAM, CLEAN, 0.5)
    sequential = on_sync(STREAM, CLEAN, 0.5, concurrent=False)
    assert racing.result.status == sequential.result.status == "finished"
    assert racing.result.text == sequential.result.text == "one two three"
    assert [m.parts for m in racing.result.messages.messages] == [
        m.parts for m in sequential.result.messages.messages
    ]
    assert text_of(racing.chunks) == text_of(sequential.chunks)
    model = unguarded_first_text_at(STREAM)
    assert sequential.first_text_at == pytest.approx(0.5 + model)  # the sum
    assert racing.first_text_at == pytest.approx(max(0.5, model))
    slow = [Say(WORDS, latency=0.7, chunk_latency=0.1)]
    model_first = on_sync(slow, CLEAN, 0.2)
    assert model_first.first_text_at == pytest.approx(max(0.2, unguarded_first_text_at(slow)))


def unguarded_first_text_at(model: list[Say]) -> float:
    sim = Simulator(ScriptedModel(model), start=0.0)
    with sim.stream(Agent.create("m"), "hi") as s:
        for c in s:
            if isinstance(c, TextDelta):
                return sim.clock.now
    raise AssertionError("no text")


@pytest.mark.anyio
async def test_a_passing_guard_on_the_async_simulator() -> None:
    got = await on_async(STREAM, CLEAN, 0.5)
    assert got.result.status == "finished"
    assert text_of(got.chunks) == got.result.text == "one two three"
    assert got.first_text_at == pytest.approx(0.5)


def test_a_passing_guard_in_worker_threads() -> None:
    got = on_threads(STREAM, CLEAN)
    assert got.result.status == "finished"
    assert text_of(got.chunks) == got.result.text == "one two three"


# --- a guard that trips while the model streams ---------------------------------------------


def assert_nothing_delivered(got: Seen, status: str) -> None:
    assert got.result.status == status
    assert text_of(got.chunks) == ""
    assert not [c for c in got.chunks if isinstance(c, ToolCall)]
    assert got.result.text == ""
    assert all(m.role != "assistant" for m in got.result.messages.messages)


def test_a_trip_while_the_model_streams_closes_it_and_delivers_nothing() -> None:
    got = on_sync(STREAM, FLAGGED, 0.45)
    assert_nothing_delivered(got, "tripped")
    assert got.result.tripwire is not None
    assert got.result.tripwire.processor_id == "moderation"


def test_a_trip_closes_the_open_model_stream() -> None:
    sim = Simulator(ScriptedModel(STREAM), models={"judge": judge(FLAGGED, 0.45)}, start=0.0)
    run = sim.run(agent(Ran()), "hi")
    assert run.result.status == "tripped"
    assert len(run.trace.commands_of(CloseStream)) == 1  # the model stops generating


@pytest.mark.anyio
async def test_a_trip_while_the_model_streams_on_the_async_simulator() -> None:
    assert_nothing_delivered(await on_async(STREAM, FLAGGED, 0.45), "tripped")


def test_a_trip_in_worker_threads() -> None:
    assert_nothing_delivered(on_threads(STREAM, FLAGGED), "tripped")


# --- a guard that trips after the model asked for a tool ---------------------------------------


TOOL_CALL = [Say(calls=[call("lookup", q="x")], latency=0.01), Say("done")]


def test_a_trip_after_the_model_finished_with_a_tool_call_runs_no_tool() -> None:
    ran = Ran()
    got = on_sync(TOOL_CALL, FLAGGED, 2.0, ran=ran)
    assert_nothing_delivered(got, "tripped")
    assert ran.calls == 0


@pytest.mark.anyio
async def test_no_tool_runs_before_the_guard_on_the_async_simulator() -> None:
    ran = Ran()
    assert_nothing_delivered(await on_async(TOOL_CALL, FLAGGED, 2.0, ran=ran), "tripped")
    assert ran.calls == 0
    passed = Ran()
    ok = await on_async(TOOL_CALL, CLEAN, 2.0, ran=passed)
    assert ok.result.status == "finished" and passed.calls == 1


def test_no_tool_runs_before_the_guard_in_worker_threads() -> None:
    ran = Ran()
    assert_nothing_delivered(on_threads(TOOL_CALL, FLAGGED, ran), "tripped")
    assert ran.calls == 0


# --- a judge that fails, a cancel --------------------------------------------------------------


def test_a_judge_that_fails_fails_closed() -> None:
    got = on_sync(STREAM, Fail(status=400), 0.2)
    assert_nothing_delivered(got, "tripped")
    assert got.result.tripwire is not None
    assert "fail closed" in got.result.tripwire.reason


@pytest.mark.anyio
async def test_a_judge_that_fails_fails_closed_on_the_async_simulator() -> None:
    assert_nothing_delivered(await on_async(STREAM, Fail(status=400), 0.2), "tripped")


def test_a_cancel_while_guard_and_model_are_in_flight_delivers_nothing() -> None:
    got = on_sync(STREAM, CLEAN, 1.0, timeout=0.4)
    assert_nothing_delivered(got, "cancelled")


@pytest.mark.anyio
async def test_a_cancel_while_both_are_in_flight_on_the_async_simulator() -> None:
    assert_nothing_delivered(await on_async(STREAM, CLEAN, 1.0, timeout=0.4), "cancelled")


# --- user processors ----------------------------------------------------------------------------


def ask_judge(args: InputArgs[None]) -> Generator[object, object, InputResult[None]]:
    answer = yield AskModel(ModelRequest(model="judge", system=(),
                                            messages=args.message_list.messages))
    assert isinstance(answer, ModelAnswer)
    return Abort("no") if answer.text == FLAGGED else Continue()


def test_a_user_processor_races_with_concurrent_true() -> None:
    guard = processor("mine", concurrent=True, process_input=ask_judge)
    for verdict, status in ((CLEAN, "finished"), (FLAGGED, "tripped")):
        sim = Simulator(ScriptedModel(STREAM), models={"judge": judge(verdict, 0.5)}, start=0.0)
        run = sim.run(Agent.create("m", input_processors=[guard]), "hi")
        assert run.result.status == status
        assert run.result.judges is not None  # the judge call is counted
        if status == "tripped":
            assert run.clock == pytest.approx(0.5)  # stopped at the verdict
            continue
        # the two waits overlapped: the run took no longer than the guard and the stream
        assert run.clock == pytest.approx(max(0.5, Simulator(ScriptedModel(STREAM), start=0.0)
                                              .run(Agent.create("m"), "hi").clock))


def test_a_racing_guard_that_replaces_the_messages_fails_the_run() -> None:
    guard = processor("rewrites", concurrent=True,
                      process_input=lambda a: Replace(a.message_list))
    run = Simulator(ScriptedModel(STREAM)).run(Agent.create("m", input_processors=[guard]), "hi")
    assert run.result.status == "failed"
    assert "only pass or abort" in str(run.result.error)
    assert run.result.text == ""


def test_the_option_is_checked_when_built() -> None:
    with pytest.raises(ProcessorConfigError, match="concurrent"):
        ModerationProcessor("judge", concurrent="yes")  # type: ignore[arg-type]
    with pytest.raises(ProcessorConfigError, match="concurrent"):
        ModerationProcessor("judge", concurrent=True, strategy="filter")
    with pytest.raises(TypeError, match="concurrent"):
        processor("p", concurrent=1, process_input=ask_judge)  # type: ignore[call-overload]


# --- the other judge-using built-ins -----------------------------------------------------------


def test_the_injection_and_pii_judges_race_when_asked() -> None:
    clean_injection = msgspec.json.encode({"injection": False, "score": 0.0}).decode()
    cases = (
        (PromptInjectionDetector(judge_model="judge", judge="always", concurrent=True,
                                 classifier_threshold=None), Say(clean_injection), "finished"),
        (PromptInjectionDetector(judge_model="judge", judge="always", concurrent=True,
                                 classifier_threshold=None), Fail(status=400), "tripped"),
        (PIIDetector(judge_model="judge", strategy="block", concurrent=True), Fail(status=400),
         "failed"),
    )
    for guard, verdict, status in cases:
        answer = msgspec.structs.replace(verdict, latency=1.0)
        sim = Simulator(ScriptedModel([Say(["Hi ", "there"], latency=0.5)]),
                        models={"judge": ScriptedModel([answer])}, start=0.0)
        run = sim.run(Agent.create("m", input_processors=[guard]), "hello")
        assert run.result.status == status
        assert run.result.text == ("Hi there" if status == "finished" else "")
        assert run.clock == pytest.approx(1.0)  # the verdict and the model at once


def test_the_built_ins_refuse_racing_where_it_cannot_hold() -> None:
    with pytest.raises(ProcessorConfigError, match="without a judge_model"):
        PromptInjectionDetector(concurrent=True)
    with pytest.raises(ProcessorConfigError, match="rewrite"):
        PromptInjectionDetector(judge_model="judge", strategy="rewrite", concurrent=True)
    with pytest.raises(ProcessorConfigError, match="redact"):
        PIIDetector(judge_model="judge", concurrent=True)  # redacting changes the input
    with pytest.raises(ProcessorConfigError, match="mask"):
        PIIDetector(judge_model="judge", strategy="block", strategies={"email": "mask"},
                    concurrent=True)
    with pytest.raises(ProcessorConfigError, match="concurrent"):
        PIIDetector(judge_model="judge", strategy="block", concurrent=None)  # type: ignore[arg-type]


def test_the_durable_loop_runs_a_racing_guard_in_order() -> None:
    for verdict, status, text in ((CLEAN, "finished", "one two three"), (FLAGGED, "tripped", "")):
        clock = VirtualClock(0.0)
        models = {"m": ScriptedModel(STREAM, clock=clock),
                  "judge": ScriptedModel([Say(verdict)], clock=clock)}
        driver = start_run(agent(Ran()), "hi", run_id="run1", clock=clock, options={})
        steps = _InProcessSteps(clock, models.__getitem__)
        result = drive(driver, steps)
        assert (result.status, result.text) == (status, text)
