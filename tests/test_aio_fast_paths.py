"""The async interpreter's fast paths (W4 of bench/WORKLOADS.md) behave as the slow ones.

A model stream that closes without waiting skips the shielded cancel scope, and one sync
tool call runs without a task group or coroutine; these tests pin what must not change:
a close that waits is shielded from a cancellation that is already pending when the
stream ends, and a single tool call of every kind (sync, async, sync returning an
awaitable, raising, in a worker thread) gives the result the model sees.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable

import anyio
import anyio.lowlevel
import pytest

from interpreters import aio
from interpreters.aio import AsyncInterpreter
from interpreters.observers.observe import RunInfo, RunObserver
from interpreters.run.common import NoCleanupStream
from interpreters.testing import Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.values.chunks import ModelEvent, ModelFinish, TextDelta, TextEnd, TextStart, Usage
from pipeline.values.model import ModelRequest
from pipeline.values.result import RunResult
from tests.helpers import SAYS_HI

pytestmark = pytest.mark.anyio


class CancelsThenCleansUp:
    """A provider that cancels the caller's scope just before its finish event (so the
    cancellation is pending, not yet delivered, when the stream ends) and whose cleanup
    first checks for a cancellation, then waits (closing an HTTP response, say)."""

    def __init__(self, scope: anyio.CancelScope) -> None:
        self.scope = scope
        self.log: list[str] = []

    async def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        try:
            for event in SAYS_HI[:-1]:
                yield event
            self.scope.cancel()
            yield SAYS_HI[-1]
        finally:
            try:
                await anyio.lowlevel.checkpoint_if_cancelled()
                await anyio.lowlevel.checkpoint()
                self.log.append("cleaned up")
            except BaseException as e:
                self.log.append(f"interrupted: {type(e).__name__}")
                raise


async def test_a_cancel_pending_when_the_stream_ends_does_not_cut_its_close_short() -> None:
    scope = anyio.CancelScope()
    model = CancelsThenCleansUp(scope)
    with anyio.fail_after(10):
        with scope:
            await AsyncInterpreter(model, observers=()).run(Agent.create("m"), "hi")
    assert model.log == ["cleaned up"]


class SaysHiThenCleansUp:
    """A provider that says "hi", then runs `cleanup` as its stream closes (each subclass
    one way a cleanup can behave)."""

    def __init__(self) -> None:
        self.log: list[str] = []

    async def cleanup(self) -> None:
        raise NotImplementedError

    async def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        try:
            for event in SAYS_HI:
                yield event
        finally:
            await self.cleanup()


class ScopedCleanup(SaysHiThenCleansUp):
    """A provider whose cleanup enters a cancel scope and waits in it (as httpx's close
    of a pooled connection does): the close must not put a scope of its own inside."""

    async def cleanup(self) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.lowlevel.checkpoint()
        self.log.append("cleaned up")


async def test_a_cleanup_that_waits_in_its_own_cancel_scope_closes_cleanly() -> None:
    model = ScopedCleanup()
    result = await AsyncInterpreter(model, observers=()).run(Agent.create("m"), "hi")
    assert (result.status, result.text, model.log) == ("finished", "hi", ["cleaned up"])


class CleanupNeverEnds(SaysHiThenCleansUp):
    """A provider whose cleanup waits on something that never comes (a hung connection)."""

    async def cleanup(self) -> None:
        try:
            await anyio.sleep_forever()
        except BaseException as e:
            self.log.append(f"cut: {type(e).__name__}")
            raise


async def test_a_cleanup_that_never_ends_is_cut_at_the_grace_and_the_run_finishes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(aio, "CLOSE_GRACE", 0.01)
    model = CleanupNeverEnds()
    with anyio.fail_after(10):
        result = await AsyncInterpreter(model, observers=()).run(Agent.create("m"), "hi")
    assert (result.status, result.text) == ("finished", "hi")
    assert len(model.log) == 1 and model.log[0].startswith("cut: ")


class ClosesAtOnce(SaysHiThenCleansUp):
    """A provider whose streams close without waiting; counts the closes."""

    closed = 0

    async def cleanup(self) -> None:
        self.closed += 1


async def test_a_stream_that_closes_at_once_is_closed_after_its_finish_event() -> None:
    model = ClosesAtOnce()
    result = await AsyncInterpreter(model, observers=()).run(Agent.create("m"), "hi")
    assert (result.status, result.text, model.closed) == ("finished", "hi", 1)


class Plain(NoCleanupStream):
    """A stream with nothing to release: it counts its `close()` calls and must never be
    closed through a shielded `aclose()`."""

    def __init__(self, events: list[ModelEvent], gate: anyio.Event | None) -> None:
        self.events = events
        self.gate = gate
        self.closes = 0

    def __aiter__(self) -> Plain:
        return self

    async def __anext__(self) -> ModelEvent:
        if self.closes or not self.events:
            raise StopAsyncIteration
        if self.gate is not None and len(self.events) == 1:
            await self.gate.wait()  # (before the finish event)
        return self.events.pop(0)

    def close(self) -> None:
        self.closes += 1

    async def aclose(self) -> None:
        raise AssertionError("a stream with nothing to release is closed with close()")


class PlainModel:
    def __init__(self, gate: anyio.Event | None = None) -> None:
        self.gate = gate
        self.streams: list[Plain] = []

    def astream(self, request: ModelRequest) -> Plain:
        events: list[ModelEvent] = [
            TextStart("t"), TextDelta("t", "hi"), TextEnd("t"), ModelFinish("stop", Usage(1, 1))
        ]
        self.streams.append(Plain(events, self.gate))
        return self.streams[-1]


async def test_a_stream_with_nothing_to_release_is_closed_at_once_after_its_finish() -> None:
    model = PlainModel()
    result = await AsyncInterpreter(model, observers=()).run(Agent.create("m"), "hi")
    assert (result.status, result.text) == ("finished", "hi")
    assert [s.closes for s in model.streams] == [1]


async def test_a_stream_with_nothing_to_release_is_closed_at_once_when_cancelled() -> None:
    model = PlainModel(gate=anyio.Event())
    interp = AsyncInterpreter(model, observers=())
    with anyio.move_on_after(0.05) as scope:
        async with interp.stream(Agent.create("m"), "hi") as stream:
            async for _ in stream:
                pass
    assert scope.cancelled_caught
    assert stream.result.status == "cancelled"
    assert [s.closes for s in model.streams] == [1]


def plain(x: int) -> int:
    """A sync tool."""
    return x + 1


async def later(x: int) -> int:
    """An async tool."""
    await anyio.lowlevel.checkpoint()
    return x + 2


def gives_awaitable(x: int) -> Awaitable[int]:
    """A sync tool that returns an awaitable."""
    return later(x + 10)


def fails(x: int) -> int:
    """A sync tool that raises."""
    raise ValueError(f"bad {x}")


async def _one_call(tool_name: str, *, in_threads: bool = False) -> RunResult:
    model = ScriptedModel([Say(calls=[call(tool_name, x=1)]), Say("ok")])
    agent = Agent.create("m", tools=[plain, later, gives_awaitable, fails])
    return await AsyncInterpreter(
        model, observers=(), tools_in_threads=in_threads
    ).run(agent, "go")


@pytest.mark.parametrize(
    ("tool_name", "in_threads", "output", "is_error"),
    [
        ("plain", False, 2, False),
        ("plain", True, 2, False),
        ("later", False, 3, False),
        ("later", True, 3, False),
        ("gives_awaitable", False, 13, False),
        ("fails", False, "ValueError: bad 1", True),
        ("fails", True, "ValueError: bad 1", True),
        ("nope", False, None, True),
    ],
)
async def test_a_single_tool_call_of_every_kind_gives_its_result(
    tool_name: str, in_threads: bool, output: object, is_error: bool
) -> None:
    result = await _one_call(tool_name, in_threads=in_threads)
    assert result.status == "finished"
    (res,) = [r for m in result.messages.all for r in m.tool_results()]
    assert res.is_error is is_error
    if output is not None:
        assert res.result == output


# --- `run` without a signal or timeout drives the stream itself (no guard coroutine) ---


class _Ends(RunObserver):
    def __init__(self, ends: list[RunResult | None]) -> None:
        self.ends = ends

    def end(self, result: RunResult | None, at: float) -> None:
        self.ends.append(result)


class _Watch:
    def __init__(self) -> None:
        self.ends: list[RunResult | None] = []

    def start(self, run: RunInfo) -> RunObserver:
        return _Ends(self.ends)


@pytest.mark.parametrize("calls", [1, 2])
async def test_run_cancelled_by_an_enclosing_scope_in_a_tool_answers_every_call(
    calls: int,
) -> None:
    """One async tool call (no list of finished calls kept) or two (the quick one keeps
    its real result): the run ends cancelled, every call answered, and the scope's
    cancellation goes on to the caller."""
    started = anyio.Event()

    async def stuck(x: int) -> str:
        """Wait forever."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    def quick(x: int) -> str:
        """Answer at once."""
        return f"quick {x}"

    script = [call("stuck", x=0)] if calls == 1 else [call("quick", x=1), call("stuck", x=0)]
    model = ScriptedModel([Say(calls=script)])
    watch = _Watch()
    agent = Agent.create("m", tools=[stuck, quick])
    finished = False
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:

                async def cancel() -> None:
                    await started.wait()
                    scope.cancel()

                tg.start_soon(cancel)
                await AsyncInterpreter(model, observers=[watch]).run(agent, "hi")
                finished = True
    assert scope.cancelled_caught and not finished
    [result] = watch.ends
    assert result is not None and result.status == "cancelled"
    answers = {
        p.tool_call_id: p for m in result.messages.messages for p in m.tool_results()
    }
    assert len(answers) == calls
    assert [p.is_error for p in answers.values()] == [False] * (calls - 1) + [True]
    if calls == 2:
        first, _ = answers.values()
        assert first.result == "quick 1"


async def test_run_whose_hook_raises_a_base_exception_closes_the_model_and_the_loop() -> None:
    """Anything but a cancellation (here a KeyboardInterrupt in a tool) goes on to the
    caller; the model stream is closed and the run is ended (the observer's `end(None)`)."""

    def interrupt() -> str:
        """Interrupt."""
        raise KeyboardInterrupt

    model = ScriptedModel([Say(calls=[call("interrupt")]), Say("never")])
    watch = _Watch()
    interp = AsyncInterpreter(model, observers=[watch])
    with pytest.raises(KeyboardInterrupt):
        await interp.run(Agent.create("m", tools=[interrupt]), "hi")
    assert watch.ends == [None]
    assert len(model.requests) == 1
