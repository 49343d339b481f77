"""The durable interpreter's I/O over a run's driver (`pipeline.protocol.driver`).

`drive` feeds the pure agent loop from `Steps`, whose methods are checkpointed steps of a
durable workflow (`interpreters.durable.dbos.runs` implements them on DBOS). On recovery the
workflow runs the loop again from the start; every step that had completed returns its
recorded outcome instead of running, so the loop, being pure, takes the same path and no
completed model call or tool runs twice.

A model call is ONE step that reads the whole stream (`ModelOutcome`); the loop is then
fed its events one by one, as `Pull` asks. Nothing here imports dbos.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import msgspec

from effects import AwaitHook, CallModel, CloseStream, Done, Perform, Publish, Pull, RunTools, Sleep
from effects.started import STARTED_REQUESTS
from interpreters.core.deadline import timed_out
from interpreters.observers.observe import Observer
from interpreters.run.common import child_driver, child_failed
from interpreters.run.started import InOrder
from pipeline.approval import Decision, Resumption
from pipeline.protocol import Driver, LoopCommand, ToolInvocation, ToolOutcome
from pipeline.tools.context import ToolContext
from pipeline.values.chunks import Chunk, DataChunk, ModelEvent
from pipeline.values.cost import Pricer
from pipeline.values.model import ModelEnded, ModelFailed, ModelRequest
from pipeline.values.result import RunResult, Suspension


class ModelOutcome(msgspec.Struct, frozen=True):
    """What one model call delivered: its events, then how it ended (None: it ended)."""

    events: tuple[ModelEvent, ...]
    failed: ModelFailed | None = None


class ToolDone(msgspec.Struct, frozen=True):
    """One tool call's outcome, with the data chunks it wrote through its context."""

    outcome: ToolOutcome
    written: tuple[DataChunk, ...] = ()


class Steps(Protocol):
    """The durable side effects of one run; each is a checkpointed step."""

    def model(self, request: ModelRequest) -> ModelOutcome: ...

    def tool(self, inv: ToolInvocation) -> ToolDone: ...

    def perform(self, request: object) -> object:
        """A processor's I/O request (an `AskModel` judge call...): its answer."""
        ...

    def sleep(self, seconds: float) -> None: ...

    def publish(self, chunks: tuple[Chunk, ...]) -> None:
        """Chunks for the caller (cheap: buffered until the next step)."""
        ...

    def expired(self) -> str | None:
        """Why the run must stop now (its timeout passed), else None. Read between
        steps, from recorded time only, so a recovery stops at the same place."""
        ...


class WaitingSteps(Steps, Protocol):
    """`Steps` of a run that waits for approvals."""

    def approval(self, s: Suspension) -> tuple[Decision, ...]:
        """The decisions for what `s` waits on (recorded: a recovery gets the same)."""
        ...


class RecordedClock:
    """A run's time as its steps recorded it, and its timeout on that time (`expired`):
    the base of every `Steps` that reads recorded outcomes."""

    def __init__(self, started_at: float, timeout: float | None) -> None:
        self._now = started_at
        self._deadline = None if timeout is None else started_at + timeout
        self._timeout = timeout

    def expired(self) -> str | None:
        if self._deadline is not None and self._now >= self._deadline:
            assert self._timeout is not None
            return timed_out(self._timeout)
        return None

    def now(self) -> float:
        return self._now


def drive(
    d: Driver, steps: Steps, *, observers: Sequence[Observer] = (), price: Pricer | None = None
) -> RunResult:
    """Run `d`'s loop to its end with `steps` carrying out its commands (`observers` and
    `price`: those of its child runs, as the run's own)."""
    events: tuple[ModelEvent, ...] = ()
    end: object = ModelEnded()
    pos = 0
    jobs = InOrder(steps.perform)  # started requests: each one a step when started
    try:
        cmd = d.start()
        while True:
            t = type(cmd)
            if t is Done:
                assert d.result is not None
                return d.result
            if t in _IO:
                reason = steps.expired()
                if reason is not None:
                    return _expire(d, steps, reason)
            if type(cmd) is Pull:
                if cmd.publish:
                    steps.publish(cmd.publish)
                if pos < len(events):
                    reply: object = events[pos]
                    pos += 1
                else:
                    reply = end
                cmd = d.send(reply)
            elif t is CloseStream:
                # The call's step already read the whole stream: nothing stays open.
                pos = len(events)
                cmd = d.send(None)
            elif type(cmd) is Publish:
                steps.publish(cmd.chunks)
                cmd = d.send(None)
            elif type(cmd) is CallModel:
                got = steps.model(cmd.request)
                events, pos = got.events, 1
                end = got.failed if got.failed is not None else ModelEnded()
                cmd = d.send(events[0] if events else end)
            elif type(cmd) is RunTools:
                # Each call is a step: the timeout is checked before each one; the calls
                # that finished keep their real results.
                outcomes: list[ToolOutcome] = []
                try:
                    for inv in cmd.calls:
                        if outcomes and (reason := steps.expired()) is not None:
                            return _expire(d, steps, reason)
                        outcomes.append(_tool(steps, inv, d, observers, price))
                        d.tool_finished(outcomes[-1])
                except Exception as e:
                    cmd = d.fail(e)
                else:
                    cmd = d.send(tuple(outcomes))
            else:
                try:
                    reply = _carry_out(steps, cmd, jobs)
                except Exception as e:
                    cmd = d.fail(e)
                else:
                    cmd = d.send(reply)
    finally:
        d.close()


def drive_resumed(
    begin: Callable[[Resumption | None], Driver],
    steps: WaitingSteps,
    *,
    observers: Sequence[Observer] = (),
    price: Pricer | None = None,
) -> RunResult:
    """Drive the run `begin(None)` starts to its end: at each suspension it waits for
    the decisions (`steps.approval`) and goes on with `begin(resumption)`. The
    suspension is rebuilt by replaying the recorded steps, never stored."""
    resume: Resumption | None = None
    while True:
        result = drive(begin(resume), steps, observers=observers, price=price)
        if result.status != "suspended" or result.suspension is None:
            return result
        resume = Resumption(result.suspension, steps.approval(result.suspension))


def _expire(d: Driver, steps: Steps, reason: str) -> RunResult:
    """End the run as cancelled at its pending command: its final chunks published."""
    steps.publish(d.cancel(reason))
    assert d.result is not None
    return d.result


def _carry_out(steps: Steps, cmd: LoopCommand, jobs: InOrder) -> object:
    """The reply to a Sleep, a Perform or an AwaitHook."""
    if isinstance(cmd, Sleep):
        steps.sleep(cmd.seconds)
        return None
    if isinstance(cmd, Perform):
        if type(cmd.request) in STARTED_REQUESTS:
            return jobs.answer(cmd.request)
        return steps.perform(cmd.request)
    if isinstance(cmd, AwaitHook):
        # A hook is not a step (as a sync one is not): it runs again on recovery.
        aw = cmd.awaitable
        assert isinstance(aw, Awaitable)
        return wait_for(aw)
    raise TypeError(f"unknown command {cmd!r}")


def wait_for(aw: Awaitable[object]) -> object:
    """The value of an async hook's or tool's awaitable, on an event loop of its own (a
    workflow runs in a thread of its own, with none running)."""

    async def main() -> object:
        return await aw

    return asyncio.run(main())


_IO = (CallModel, RunTools, Perform, Sleep)
"""The commands that are steps: time moves only there, so the timeout is checked there."""


def _tool(
    steps: Steps, inv: object, d: Driver, observers: Sequence[Observer], price: Pricer | None
) -> ToolOutcome:
    assert isinstance(inv, ToolInvocation)
    if inv.child is not None:
        return _child(steps, inv, d, observers, price)
    done = steps.tool(inv)
    # On recovery the tool did not run: what it wrote is written again for it.
    ctx = tool_context(inv)
    if ctx is not None and not ctx.writer.written:
        for chunk in done.written:
            ctx.writer.write(chunk)
    return done.outcome


def _child(
    steps: Steps, inv: ToolInvocation, parent: Driver, observers: Sequence[Observer],
    price: Pricer | None,
) -> ToolOutcome:
    """A child run (`docs/agents.md`): not a step of its own but its commands, each the
    step it would be in a run of its own, in order; so a recovery takes the same path
    through the tree and no completed call of a child runs twice, and a child's approval
    suspends the whole tree (the root waits for the decisions, `drive_resumed`). What it
    publishes goes to `steps.publish` as the run's own chunks do."""
    assert inv.child is not None
    clock = getattr(steps, "now", None)
    try:
        d = child_driver(inv.child, clock=clock if callable(clock) else _no_clock,
                         observers=observers, price=price, log=parent.log)
    except Exception as e:
        return child_failed(inv, e)
    return ToolOutcome(inv.call.tool_call_id,
                       drive(d, steps, observers=observers, price=price))


def _no_clock() -> float:
    return 0.0


def tool_context(inv: ToolInvocation) -> ToolContext[object] | None:
    """The context of a call whose tool takes one (its writer collects data chunks)."""
    param = inv.tool.context_param if inv.tool is not None else None
    ctx = inv.kwargs.get(param) if param is not None and inv.kwargs is not None else None
    return ctx if isinstance(ctx, ToolContext) else None
