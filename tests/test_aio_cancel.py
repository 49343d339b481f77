"""Cancelling async runs: a signal, a timeout, an enclosing cancel scope, an early close.

Every test blocks the run at a known point (a model that blocks before an event, a tool or
hook that waits forever) and cancels it there, so nothing depends on timing. Each checks
the consistency guarantees: status "cancelled" with a `Cancelled` error, the text
streamed so far kept and marked incomplete, every tool call paired with one result, the
model stream closed, and no task of the run still running once it returned.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Generator
from functools import partial

import anyio
import anyio.lowlevel
import msgspec
import pytest

from effects import Continue
from interpreters.aio import AsyncInterpreter
from interpreters.core.cancel import CancelSignal
from interpreters.core.trace import Trace
from interpreters.providers.provider import ProviderError
from interpreters.testing import AsyncSimulator, Fail, Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.loop import agent_loop
from pipeline.processor import OutputStepArgs, OutputStepResult, StatefulProcessor
from pipeline.protocol import RunCancelled
from pipeline.values.chunks import (
    Chunk,
    ErrorChunk,
    ModelEvent,
    TextDelta,
    TextStart,
    ToolError,
)
from pipeline.values.context import RunContext
from pipeline.values.messages import MessageList, user
from pipeline.values.model import ApiError, ModelRequest
from pipeline.values.result import Cancelled, RunResult
from tests.helpers import SAYS_HI, AsyncTrackedModel, unpaired_tool_calls

pytestmark = pytest.mark.anyio

STREAMING = [Say(["Hello", " wor", "ld"])]
"""Events: text-start, 'Hello', ' wor', 'ld', text-end, model-finish."""


async def _run_and_abort(
    interp: AsyncInterpreter, agent: Agent, gate: anyio.Event, *, reason: str = "stop"
) -> tuple[RunResult, Trace]:
    """Start a run with a signal, cancel it once `gate` is set; return its result."""
    signal = CancelSignal()
    trace = Trace()
    box: list[RunResult] = []

    async def go() -> None:
        box.append(await interp.run(agent, "hi", signal=signal, trace=trace))

    with anyio.fail_after(10):  # a safety net only
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await gate.wait()
            signal.cancel(reason)
    return box[0], trace


def _streamed_text(chunks: list[Chunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


async def test_signal_mid_stream_keeps_the_partial_text_marked_incomplete() -> None:
    model = AsyncTrackedModel(STREAMING, block=(0, 3))  # blocks before 'ld'
    result, trace = await _run_and_abort(
        AsyncInterpreter(model), Agent.create("m"), model.blocked, reason="user left"
    )
    assert result.status == "cancelled"
    assert result.error == Cancelled("user left")
    assert result.finish_reason == "cancelled"
    assert result.text == "Hello wor" == _streamed_text(trace.chunks)
    last = result.messages.messages[-1]
    assert (last.role, last.text, last.incomplete) == ("assistant", "Hello wor", True)
    assert trace.chunks[-1] == ErrorChunk("Cancelled", "run cancelled: user left")
    assert model.closed_early == 1


class WaitsForever:
    """Tools that record how they ended."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.started: anyio.Event | None = None

    async def quick(self, x: int) -> int:
        """Returns at once."""
        self.log.append("quick done")
        return x

    async def stuck(self, x: int) -> int:
        """Never returns."""
        assert self.started is not None
        try:
            self.started.set()
            await anyio.sleep_forever()
        finally:
            self.log.append("stuck cleaned up")
        return x


async def test_signal_mid_tool_pairs_every_call_and_leaves_no_task() -> None:
    from pipeline.tools import make_tool

    tools = WaitsForever()
    tools.started = anyio.Event()
    agent = Agent.create(
        "m", tools=[make_tool(tools.quick, name="quick"), make_tool(tools.stuck, name="stuck")]
    )
    model = AsyncTrackedModel([
        Say("working", calls=[call("quick", x=1), call("stuck", x=2)]), Say("never")
    ])
    result, trace = await _run_and_abort(AsyncInterpreter(model), agent, tools.started)
    # the stuck tool was cancelled and cleaned up before run() returned
    assert tools.log == ["quick done", "stuck cleaned up"]
    assert result.status == "cancelled"
    msgs = result.messages.messages
    assert unpaired_tool_calls(msgs) == []
    assert msgs[-2].role == "assistant"
    assert [c.tool_name for c in msgs[-2].tool_calls()] == ["quick", "stuck"]
    # the call that finished keeps its real result; only the unfinished one is cancelled
    assert [(r.tool_name, r.is_error) for r in msgs[-1].tool_results()] == [
        ("quick", False), ("stuck", True)
    ]
    assert msgs[-1].tool_results()[0].result == 1
    assert msgs[-1].tool_results()[1].result == "tool call cancelled: stop"
    errors = [c for c in trace.chunks if isinstance(c, ToolError)]
    assert [e.tool_name for e in errors] == ["stuck"]
    assert len(model.requests) == 1
    assert model.closed_early == 0


class SlowJudge(StatefulProcessor[None]):
    """An async output-step hook that waits forever (a judge that never answers)."""

    id = "slow-judge"

    def __init__(self) -> None:
        self.entered: anyio.Event | None = None
        self.cleaned = False

    def initial_state(self) -> None:
        return None

    async def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        assert self.entered is not None
        try:
            self.entered.set()
            await anyio.sleep_forever()
        finally:
            self.cleaned = True
        return Continue()


def lookup(q: str) -> str:
    """Look up."""
    return q


async def test_signal_in_an_async_output_step_hook_drops_the_response_it_was_judging() -> None:
    judge = SlowJudge()
    judge.entered = anyio.Event()
    agent = Agent.create("m", tools=[lookup], output_processors=[judge])
    model = ScriptedModel([Say("let me see", calls=[call("lookup", q="a")])])
    result, _ = await _run_and_abort(AsyncInterpreter(model), agent, judge.entered)
    assert judge.cleaned
    assert result.status == "cancelled"
    msgs = result.messages.messages
    assert unpaired_tool_calls(msgs) == []
    # the judge never approved the response: it is not kept (fail closed), nor its call
    assert [m.role for m in msgs] == ["user"]
    assert result.text == ""


async def test_timeout_mid_stream() -> None:
    model = AsyncTrackedModel(STREAMING, block=(0, 2))  # blocks before ' wor'
    with anyio.fail_after(10):
        result = await AsyncInterpreter(model).run(Agent.create("m"), "hi", timeout=0.05)
    assert result.status == "cancelled"
    assert isinstance(result.error, Cancelled)
    assert "timed out after 0.05 s" in result.error.reason
    assert (result.text, result.messages.messages[-1].incomplete) == ("Hello", True)
    assert model.closed_early == 1


async def test_a_timeout_does_not_touch_a_run_that_ends_in_time() -> None:
    run = await AsyncSimulator(ScriptedModel(STREAMING)).run(
        Agent.create("m"), "hi", timeout=600
    )
    assert run.result.status == "finished"
    assert run.result.text == "Hello world"


async def test_enclosing_cancel_scope_reraises_and_leaves_the_result_on_the_stream() -> None:
    model = AsyncTrackedModel(STREAMING, block=(0, 3))
    stream = AsyncInterpreter(model).stream(Agent.create("m"), "hi")
    got: list[Chunk] = []
    reached_after = False
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                nonlocal reached_after
                with anyio.CancelScope() as scope:
                    tg.start_soon(_cancel_when, model.blocked, scope)
                    async with stream:
                        async for c in stream:
                            got.append(c)
                    reached_after = True
                assert scope.cancelled_caught

            tg.start_soon(consume)
    assert not reached_after
    assert stream.result.status == "cancelled"
    assert stream.result.error == Cancelled("cancelled by the caller")
    assert stream.result.text == "Hello wor" == _streamed_text(got)
    assert model.closed_early == 1


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def test_enclosing_cancel_scope_cancels_run_and_its_tools() -> None:
    from pipeline.tools import make_tool

    tools = WaitsForever()
    tools.started = anyio.Event()
    agent = Agent.create(
        "m", tools=[make_tool(tools.quick, name="quick"), make_tool(tools.stuck, name="stuck")]
    )
    model = ScriptedModel([Say(calls=[call("quick", x=0), call("stuck", x=1)])])
    finished = False
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:
                tg.start_soon(_cancel_when, tools.started, scope)
                await AsyncInterpreter(model).run(agent, "hi")
                finished = True
    assert scope.cancelled_caught
    assert not finished
    assert tools.log == ["quick done", "stuck cleaned up"]


async def test_closing_the_stream_early_cancels_the_run_and_closes_the_model() -> None:
    model = AsyncTrackedModel(STREAMING)
    stream = AsyncInterpreter(model).stream(Agent.create("m"), "hi")
    async with stream:
        async for c in stream:
            if isinstance(c, TextDelta):
                break
    assert model.closed_early == 1
    assert model.produced == 2  # text-start and 'Hello': nothing was read ahead
    assert stream.result.status == "cancelled"
    assert stream.result.error == Cancelled("the stream was closed before the run ended")
    assert stream.result.text == "Hello"
    assert stream.result.messages.messages[-1].incomplete
    assert [c async for c in stream] == []
    await stream.aclose()  # closing twice is fine
    assert stream.result.status == "cancelled"


async def test_closing_a_stream_never_iterated_calls_no_model() -> None:
    model = AsyncTrackedModel(STREAMING)
    stream = AsyncInterpreter(model).stream(Agent.create("m"), "hi")
    await stream.aclose()
    assert stream.result.status == "cancelled"
    assert model.requests == []


async def test_a_signal_cancelled_before_the_run_calls_no_model() -> None:
    model = AsyncTrackedModel(STREAMING)
    signal = CancelSignal()
    signal.cancel("not wanted")
    signal.cancel("second reason is ignored")
    result = await AsyncInterpreter(model).run(Agent.create("m"), "hi", signal=signal)
    assert result.status == "cancelled"
    assert result.error == Cancelled("not wanted")
    assert model.requests == []
    assert [m.role for m in result.messages.messages] == ["user"]


async def test_one_signal_cancels_every_run_it_was_given() -> None:
    models = [AsyncTrackedModel(STREAMING, block=(0, 2)) for _ in range(3)]
    signal = CancelSignal()
    results: list[RunResult] = []

    async def go(model: AsyncTrackedModel) -> None:
        results.append(await AsyncInterpreter(model).run(Agent.create("m"), "x", signal=signal))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for m in models:
                tg.start_soon(go, m)
            for m in models:
                await m.blocked.wait()
            signal.cancel("all of them")
    assert [r.status for r in results] == ["cancelled"] * 3
    assert [r.text for r in results] == ["Hello"] * 3
    assert all(m.closed_early == 1 for m in models)


async def test_cancel_during_retry_backoff() -> None:
    sleeping = anyio.Event()

    async def sleep(seconds: float) -> None:
        assert seconds == 30.0
        sleeping.set()
        await anyio.sleep_forever()

    model = ScriptedModel([Fail(status=429, retry_after=30.0), Say("late")])
    result, _ = await _run_and_abort(
        AsyncInterpreter(model, sleep=sleep), Agent.create("m"), sleeping
    )
    assert result.status == "cancelled"
    assert len(model.requests) == 1
    assert [m.role for m in result.messages.messages] == ["user"]


class Ask(msgspec.Struct, frozen=True):
    q: str


class Swallower(StatefulProcessor[None]):
    """A generator hook that catches every Exception around its I/O request."""

    id = "swallower"

    def initial_state(self) -> None:
        return None

    def process_output_step(
        self, args: OutputStepArgs[None]
    ) -> Generator[object, object, OutputStepResult[None]]:
        try:
            yield Ask("?")
        except Exception:
            return Continue()
        return Continue()


async def test_a_hook_catching_exception_cannot_swallow_the_cancel() -> None:
    waiting = anyio.Event()

    async def never(_req: object) -> None:
        waiting.set()
        await anyio.sleep_forever()

    agent = Agent.create("m", output_processors=[Swallower()])
    interp = AsyncInterpreter(ScriptedModel([Say("answer")]), handlers={Ask: never})
    result, _ = await _run_and_abort(interp, agent, waiting)
    assert result.status == "cancelled"
    assert result.text == ""  # the hook never approved it


async def test_a_cancelled_history_is_valid_input_for_the_next_run() -> None:
    judge = SlowJudge()
    judge.entered = anyio.Event()
    agent = Agent.create("m", tools=[lookup], output_processors=[judge])
    model = ScriptedModel([Say("see", calls=[call("lookup", q="a"), call("lookup", q="b")])])
    first, _ = await _run_and_abort(AsyncInterpreter(model), agent, judge.entered)
    follow_up = first.messages.add(user("and now?", id="u2"), "input")
    nxt = ScriptedModel([Say("fine")])
    second = await AsyncSimulator(nxt).run(Agent.create("m", tools=[lookup]), follow_up)
    assert second.result.status == "finished"
    assert unpaired_tool_calls(nxt.requests[0].messages) == []


def test_the_loop_itself_finishes_a_cancel_without_io() -> None:
    """Pure: throw RunCancelled at a Pull; the loop yields only Publish and Done."""
    from effects import CallModel, Done, Publish, Pull

    loop = agent_loop(
        Agent.create("m"), MessageList.of([user("hi", id="u")]), context=RunContext(run_id="r")
    )
    cmd = next(loop)
    while not isinstance(cmd, CallModel):
        cmd = loop.send(None)
    cmd = loop.send(TextStart("t"))
    assert isinstance(cmd, Pull)
    cmd = loop.send(TextDelta("t", "par"))
    assert isinstance(cmd, Pull)
    cmd = loop.throw(RunCancelled("because"))
    kinds = []
    while not isinstance(cmd, Done):
        assert isinstance(cmd, Publish)
        kinds.append([type(c).__name__ for c in cmd.chunks])
        cmd = loop.send(None)
    assert kinds == [["ErrorChunk"]]
    res = cmd.result
    assert isinstance(res, RunResult)
    assert (res.status, res.text, res.error) == ("cancelled", "par", Cancelled("because"))
    assert res.messages.messages[-1].incomplete
    assert res.steps == ()  # the stream never finished: no step was recorded


async def test_run_as_a_task_group_target_with_partial() -> None:
    """`run` works as a task-group target with functools.partial (as documented)."""
    signal = CancelSignal()
    model = AsyncTrackedModel(STREAMING, block=(0, 1))
    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(AsyncInterpreter(model).run, Agent.create("m"), "x", signal=signal))
        await model.blocked.wait()
        signal.cancel()
    assert model.closed_early == 1
    assert repr(signal) == "CancelSignal(cancelled: 'cancelled by the caller')"


# --- a stream belongs to the task that iterates it -----------------------------------------


async def test_aclose_from_another_task_is_a_clear_error_and_a_signal_stops_the_stream() -> None:
    model = AsyncTrackedModel(STREAMING, block=(0, 3))  # blocks before 'ld'
    signal = CancelSignal()
    stream = AsyncInterpreter(model).stream(Agent.create("m"), "hi", signal=signal)
    got: list[Chunk] = []

    async def consume() -> None:
        async with stream:
            async for c in stream:
                got.append(c)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await model.blocked.wait()
            with pytest.raises(RuntimeError, match=r"another task .* signal\.cancel\(\)"):
                await stream.aclose()
            with pytest.raises(RuntimeError, match="one task at a time"):
                await stream.__anext__()
            assert not stream.done and model.closed == 0  # the consumer's run is untouched
            signal.cancel("the watcher stopped it")
    assert stream.result.status == "cancelled"
    assert stream.result.error == Cancelled("the watcher stopped it")
    assert _streamed_text(got) == "Hello wor" == stream.result.text
    assert got[-1] == ErrorChunk("Cancelled", "run cancelled: the watcher stopped it")
    assert model.closed_early == 1


# --- the model stream's close is shielded -------------------------------------------------


class SlowCleanup:
    """A provider whose stream cleanup (closing its HTTP response, say) takes a while."""

    def __init__(self) -> None:
        self.closing = anyio.Event()
        self.release = anyio.Event()
        self.log: list[str] = []

    async def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        try:
            for event in SAYS_HI:
                yield event
        finally:
            self.closing.set()
            try:
                await self.release.wait()
                self.log.append("cleaned up")
            except BaseException as e:
                self.log.append(f"interrupted: {type(e).__name__}")
                raise


@pytest.mark.parametrize("how", ["enclosing scope", "signal"])
async def test_a_cancel_while_the_model_stream_closes_does_not_cut_its_cleanup_short(
    how: str,
) -> None:
    model = SlowCleanup()
    scope = anyio.CancelScope()
    signal = CancelSignal()

    async def go() -> None:
        with scope:
            await AsyncInterpreter(model).run(Agent.create("m"), "hi", signal=signal)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await model.closing.wait()  # after the finish event: the normal close
            if how == "signal":
                signal.cancel()
            else:
                scope.cancel()
            for _ in range(10):
                await anyio.lowlevel.checkpoint()
            assert model.log == []  # still closing: the cancel waits for it
            model.release.set()
    assert model.log == ["cleaned up"]


def _late_failure() -> ProviderError:
    """After holding the event loop past the run's timeout (0.05 s) with no checkpoint,
    as a starved process does: the call's own deadline error."""
    time.sleep(0.15)
    return ProviderError(
        ApiError(status=200, message="the model call did not end within its deadline",
                 error_type="deadline_exceeded")
    )


class _LateDeadline:
    """A model that fails with its own deadline after the run's timeout was due."""

    def __init__(self, *, opened: bool) -> None:
        self.opened = opened

    async def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self.opened:
            yield TextStart("t")
            yield TextDelta("t", "Hel")
        raise _late_failure()


class _LateDeadlineBatches(_LateDeadline):
    """`_LateDeadline` read as batches (`astream_batches`, as the HTTP providers are)."""

    async def astream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        if self.opened:
            yield [TextStart("t"), TextDelta("t", "Hel")]
        raise _late_failure()


@pytest.mark.parametrize("batches", [False, True], ids=["events", "batches"])
@pytest.mark.parametrize("opened", [False, True], ids=["before-its-first-event", "mid-stream"])
async def test_a_model_failure_after_the_runs_timeout_ends_the_run_as_timed_out(
    opened: bool, batches: bool
) -> None:
    # What comes after the run's own deadline is not the run's outcome: the run timed out
    # (status "cancelled"), as under the sync interpreter, not "failed" by the model call.
    model = (_LateDeadlineBatches if batches else _LateDeadline)(opened=opened)
    with anyio.fail_after(10):
        result = await AsyncInterpreter(model).run(Agent.create("m"), "hi", timeout=0.05)
    assert result.status == "cancelled", (result.status, result.error)
    assert isinstance(result.error, Cancelled)
    assert "timed out after 0.05 s" in result.error.reason
    assert unpaired_tool_calls(result.messages.messages) == []
