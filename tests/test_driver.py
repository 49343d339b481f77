"""The interpreter's half of the protocol (`pipeline.protocol.Driver`), on hand-written loops:
the stream state, the finished tools a cancel keeps, the cancel routine, and what the
trace and the watchers are told."""

from __future__ import annotations

import inspect
from collections.abc import Generator

import msgspec
import pytest

from effects import AwaitHook, CallModel, CloseStream, Done, Publish, Pull, RunTools
from interpreters.core.trace import Trace
from interpreters.testing import Say, ScriptedModel, Simulator
from pipeline.protocol import Driver, LoopCommand, RunCancelled, ToolInvocation, ToolOutcome
from pipeline.values.chunks import Chunk, ModelFinish, TextDelta
from pipeline.values.messages import ToolCallPart
from pipeline.values.model import ModelRequest
from pipeline.values.result import RunResult

from .helpers import make_agent

RESULT = Simulator(ScriptedModel([Say(["x"])])).run(make_agent(), "hi").result
CANCELLED = msgspec.structs.replace(RESULT, status="cancelled")
REQUEST = ModelRequest(model="m", system=(), messages=())
CALLS = tuple(
    ToolInvocation(ToolCallPart(f"c{i}", "echo", {}), None, None) for i in range(3)
)


class Watcher:
    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    def command(self, cmd: LoopCommand) -> None:
        self.seen.append(("command", type(cmd).__name__))

    def reply(self, cmd: LoopCommand, reply: object) -> None:
        self.seen.append(("reply", type(cmd).__name__))

    def failed(self, cmd: LoopCommand, error: BaseException) -> None:
        self.seen.append(("failed", type(error).__name__))

    def end(self, result: RunResult | None) -> None:
        self.seen.append(("end", None if result is None else result.status))


def streaming() -> Generator[LoopCommand, object, RunResult]:
    """A model call with one chunk, then a close, then the end."""
    got = yield CallModel(REQUEST, step_number=0, attempt=0)
    assert isinstance(got, TextDelta)
    got = yield Pull((TextDelta("t", "a"),))
    yield CloseStream()
    yield Publish((TextDelta("t", "b"),))
    yield Done(RESULT)
    return RESULT


def test_the_stream_is_open_from_a_model_call_until_its_last_event_or_a_close() -> None:
    d = Driver(streaming())
    assert type(d.start()) is CallModel and not d.stream_open
    assert type(d.send(TextDelta("t", "a"))) is Pull and d.stream_open
    assert type(d.send(TextDelta("t", "z"))) is CloseStream and d.stream_open
    assert type(d.send(None)) is Publish and not d.stream_open
    assert type(d.send(None)) is Done
    assert d.result == RESULT


def test_a_close_with_no_stream_open_is_answered_by_the_driver() -> None:
    d = Driver(streaming())
    d.start()
    d.send(TextDelta("t", "a"))
    # the stream ended with its last event: the close never reaches the interpreter
    assert type(d.send(ModelFinish("stop"))) is Publish
    assert not d.stream_open


def test_the_trace_records_every_command_and_every_chunk_handed_out() -> None:
    trace = Trace()
    d = Driver(streaming(), log=trace)
    cmd = d.start()
    for reply in (TextDelta("t", "a"), ModelFinish("stop"), None):
        cmd = d.send(reply)
    assert type(cmd) is Done
    assert [type(c).__name__ for c in trace.commands] == [
        "CallModel", "Pull", "CloseStream", "Publish", "Done"
    ]
    assert trace.chunks == [TextDelta("t", "a"), TextDelta("t", "b")]


def test_watchers_see_each_command_its_reply_and_the_end_once() -> None:
    w = Watcher()
    d = Driver(streaming(), watch=w)
    d.start()
    d.send(TextDelta("t", "a"))
    d.send(TextDelta("t", "z"))
    d.send(None)
    d.send(None)
    d.close()  # after the end: no second end
    assert w.seen == [
        ("command", "CallModel"), ("reply", "CallModel"), ("command", "Pull"),
        ("reply", "Pull"), ("command", "CloseStream"), ("reply", "CloseStream"),
        ("command", "Publish"), ("reply", "Publish"), ("command", "Done"),
        ("end", RESULT.status),
    ]


def tools_then_cancel(seen: list[tuple[ToolOutcome, ...]]) -> Generator[
    LoopCommand, object, RunResult
]:
    try:
        yield RunTools(CALLS)
    except RunCancelled as c:
        seen.append(c.tool_outcomes)
        yield Publish((TextDelta("t", "tool-error"),))
        yield Done(CANCELLED)
        return CANCELLED
    raise AssertionError("not cancelled")


def test_a_cancel_keeps_the_outcomes_of_the_calls_that_finished() -> None:
    seen: list[tuple[ToolOutcome, ...]] = []
    w = Watcher()
    d = Driver(tools_then_cancel(seen), watch=w)
    assert type(d.start()) is RunTools
    done = ToolOutcome("c1", "real")
    d.tool_finished(done)
    chunks: tuple[Chunk, ...] = d.cancel("stop")
    assert seen == [(done,)]
    assert chunks == (TextDelta("t", "tool-error"),)
    assert d.result == CANCELLED
    assert ("failed", "RunCancelled") in w.seen and w.seen[-1] == ("end", "cancelled")
    assert d.cancel("again") == ()  # over: nothing more


def test_outcomes_of_an_earlier_tool_step_are_not_kept_by_a_later_cancel() -> None:
    seen: list[tuple[ToolOutcome, ...]] = []

    def loop() -> Generator[LoopCommand, object, RunResult]:
        yield RunTools(CALLS)
        try:
            yield CallModel(REQUEST, step_number=1, attempt=0)
        except RunCancelled as c:
            seen.append(c.tool_outcomes)
        yield Done(CANCELLED)
        return CANCELLED

    d = Driver(loop())
    d.start()
    d.tool_finished(ToolOutcome("c0", 1))
    d.send(tuple(ToolOutcome(c.call.tool_call_id, 1) for c in CALLS))
    d.cancel("stop")
    assert seen == [()]


def test_a_cancel_at_an_await_discards_the_awaitable() -> None:
    async def hook() -> None:
        raise AssertionError("never awaited")

    coro = hook()

    def loop() -> Generator[LoopCommand, object, RunResult]:
        try:
            yield AwaitHook(processor_id="p", hook="process_input", awaitable=coro)
        except RunCancelled:
            yield Done(CANCELLED)
        return CANCELLED

    d = Driver(loop())
    d.start()
    d.cancel("stop")
    assert inspect.getcoroutinestate(coro) == "CORO_CLOSED"  # no "never awaited" warning


def test_a_loop_that_does_not_finish_a_cancel_is_an_error() -> None:
    def loop() -> Generator[LoopCommand, object, RunResult]:
        try:
            yield CallModel(REQUEST, step_number=0, attempt=0)
        except RunCancelled:
            yield CallModel(REQUEST, step_number=0, attempt=1)
        return RESULT

    d = Driver(loop())
    d.start()
    with pytest.raises(RuntimeError, match="after a cancel"):
        d.cancel("stop")


def test_closing_a_run_not_over_tells_the_watchers_it_has_no_result() -> None:
    w = Watcher()
    gen = streaming()
    d = Driver(gen, watch=w)
    d.start()
    d.close()
    assert w.seen[-1] == ("end", None)
    assert inspect.getgeneratorstate(gen) == "GEN_CLOSED" and d.result is None
