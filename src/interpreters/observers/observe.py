"""Observers: watch a run from outside the loop, the same way under every interpreter.

An observer sees what the interpreter and the loop say to each other: every command the
loop yields, every reply (or exception) sent back in, every processor effect, and every
clock reading the loop takes. It is started per run (`Observer.start`) and can do
nothing to the run; tracing (`interpreters.observers.otel`), logging
(`interpreters.observers.logs`) and recording (`interpreters.record.journal`) are observers.

    interp = SyncInterpreter(provider, observers=[LogObserver(), Recorder("runs/")])

The run's `pipeline.protocol.driver.Driver` tells the observers what passes (`watched_loop` gives
the loop and its `Watch`), so no interpreter has per-observer code. An observer that
raises is logged and dropped for the rest of the run: observing never changes a run's
outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import msgspec

from effects import (
    AwaitHook,
    CallModel,
    CloseStream,
    Perform,
    Publish,
    Pull,
    RunTools,
    Sleep,
)
from pipeline.agent import Agent
from pipeline.agents import ChildRun
from pipeline.approval import Resumption
from pipeline.loop import agent_loop
from pipeline.protocol import AgentLoop, EffectRecord, EffectRecorder, LoopCommand, Watch
from pipeline.values.context import RunContext
from pipeline.values.cost import Cost, PriceQuery, Pricer
from pipeline.values.messages import JsonObject, MessageList
from pipeline.values.result import RunResult

log = logging.getLogger("pipeline")


class RunInfo(msgspec.Struct, frozen=True):
    """What an observer learns when a run starts."""

    agent: Agent
    messages: MessageList
    """The run's input, as the loop gets it."""
    context: RunContext
    clock: Callable[[], float]
    """The interpreter's clock (virtual in the simulator): observers time with it."""
    started_at: float
    price: Pricer | None = None
    """The run's pricer, if it has one (`pipeline.values.cost`)."""
    resume: Resumption | None = None
    """What a resumed run goes on from (its suspension and decisions), else None."""
    parent_run_id: str | None = None
    """A child run's (an agent called as a tool, a handoff: `docs/agents.md`): the run
    of the agent that called it, and its call (`parent_call_id`); None for a root run."""
    parent_call_id: str | None = None

    @property
    def run_id(self) -> str:
        return self.context.run_id

    @property
    def thread_id(self) -> str | None:
        return self.context.thread_id

    @property
    def values(self) -> JsonObject | None:
        return self.context.values


class RunObserver:
    """One run's observer. Override what you need; every method does nothing here.

    `at` is the interpreter's clock when the observer is told (virtual time in the
    simulator). A command is followed by exactly one of `reply` and `failed`, except
    `Done` (followed by `end`) and a command the run was closed at (`end(None)`).
    """

    sees_stream = True
    """Whether this observer sees `Pull` (the per-chunk commands) and their replies; an
    observer that does not want them sets this False and costs a run's chunks nothing."""

    def command(self, cmd: LoopCommand, at: float) -> None:
        """The loop yielded `cmd`."""

    def reply(self, cmd: LoopCommand, reply: object, at: float) -> None:
        """The interpreter answered `cmd` with `reply`."""

    def failed(self, cmd: LoopCommand, error: BaseException, at: float) -> None:
        """The interpreter threw `error` into the loop at `cmd` (RunCancelled: a cancel)."""

    def effect(self, record: EffectRecord, at: float) -> None:
        """A processor hook returned an effect."""

    def clock(self, reading: float) -> None:
        """The loop read the clock and got `reading`."""

    def priced(self, query: PriceQuery, cost: Cost | None) -> None:
        """The run's pricer priced a model call (None: it knows no price, or failed)."""

    def end(self, result: RunResult | None, at: float) -> None:
        """The run is over: its result, or None when it was closed before it finished."""


class Observer(Protocol):
    """Makes a run's observer when a run starts (None: not interested in this run)."""

    def start(self, run: RunInfo) -> RunObserver | None: ...


def watched_loop(
    agent: Agent,
    messages: MessageList,
    *,
    context: RunContext,
    clock: Callable[[], float],
    record: EffectRecorder | None,
    observers: Sequence[Observer],
    loop_clock: Callable[[], float] | None = None,
    price: Pricer | None = None,
    resume: Resumption | None = None,
    child: ChildRun | None = None,
) -> tuple[AgentLoop, Watch | None]:
    """The agent loop of a run and what its driver tells of it to `observers` (None when
    none is interested in the run); `record` still gets effects.

    `loop_clock` (default `clock`) is the clock the loop reads; observers time with
    `clock`. A replay hands the recorded readings in as `loop_clock`. `child`: the
    `ChildRun` this run is (its observers see its parent run and call,
    `RunInfo.parent_run_id`).
    """
    info = RunInfo(
        agent, messages, context, clock, clock(), price, resume,
        child.parent_run_id if child is not None else None,
        child.path[-1] if child is not None else None,
    )
    live: list[RunObserver] = []
    for x in observers:
        o = _start(x, info)
        if o is not None:
            live.append(o)
    if not live:  # (the default LogObserver, when logging is not configured)
        loop = agent_loop(
            agent, messages, context=context, clock=loop_clock or clock, record=record,
            price=price, resume=resume, child=child,
        )
        return loop, None
    watching = _Watchers(live, clock)
    inner_clock = loop_clock or clock

    def read_clock() -> float:
        reading = inner_clock()
        watching.clock(reading)
        return reading

    def on_effect(e: EffectRecord) -> None:
        if record is not None:
            record(e)
        watching.effect(e, clock())

    loop = agent_loop(
        agent, messages, context=context, clock=read_clock, record=on_effect,
        price=_watched_price(price, watching) if price is not None else None,
        resume=resume, child=child,
    )
    return loop, watching


def _watched_price(price: Pricer, watching: _Watchers) -> Pricer:
    """`price`, each call and its answer told to the observers (a pricer that raises:
    as None, the cost the loop then gives the call)."""

    def priced(q: PriceQuery) -> Cost | None:
        try:
            cost = price(q)
        except Exception:
            watching.priced(q, None)
            raise
        watching.priced(q, cost)
        return cost

    return priced


def _start(o: Observer, info: RunInfo) -> RunObserver | None:
    try:
        return o.start(info)
    except Exception:
        log.warning("observer %s failed to start; it will not see run %s",
                    type(o).__name__, info.run_id, exc_info=True)
        return None


class _Watchers:
    """The run's observers, told by the run's driver; one that raises is logged and
    dropped. Each is told the time by `now` (the interpreter's clock).

    `stream` are those that see `Pull` commands and their replies (the per-chunk path):
    a run whose observers all skip it pays almost nothing per chunk.
    """

    __slots__ = ("live", "now", "stream")

    def __init__(self, live: list[RunObserver], now: Callable[[], float]) -> None:
        self.live = live
        self.now = now
        self.stream = [o for o in live if o.sees_stream]

    def _drop(self, o: RunObserver) -> None:
        log.warning("observer %s failed and is dropped for this run",
                    type(o).__name__, exc_info=True)
        for group in (self.live, self.stream):
            if o in group:
                group.remove(o)

    def _tell(self, group: list[RunObserver], what: str, *args: object) -> None:
        """Each observer of `group` told by its method `what`; one that raises is dropped."""
        for o in tuple(group):
            try:
                getattr(o, what)(*args)
            except Exception:
                self._drop(o)

    # `command` and `reply` are told per chunk (a Pull) to observers that see the stream:
    # written out, without `_tell`'s generic call (measured: a quarter more a chunk).
    def command(self, cmd: LoopCommand) -> None:
        group = self.stream if cmd.__class__ is Pull else self.live
        if not group:
            return
        at = self.now()
        for o in tuple(group):
            try:
                o.command(cmd, at)
            except Exception:
                self._drop(o)

    def reply(self, cmd: LoopCommand, reply: object) -> None:
        group = self.stream if cmd.__class__ is Pull else self.live
        if not group:
            return
        at = self.now()
        for o in tuple(group):
            try:
                o.reply(cmd, reply, at)
            except Exception:
                self._drop(o)

    def failed(self, cmd: LoopCommand, error: BaseException) -> None:
        self._tell(self.live, "failed", cmd, error, self.now())

    def effect(self, record: EffectRecord, at: float) -> None:
        self._tell(self.live, "effect", record, at)

    def clock(self, reading: float) -> None:
        self._tell(self.live, "clock", reading)

    def priced(self, query: PriceQuery, cost: Cost | None) -> None:
        # (an observer written before `priced` existed lacks it: it is not told)
        told = [o for o in self.live if getattr(o, "priced", None) is not None]
        self._tell(told, "priced", query, cost)

    def end(self, result: RunResult | None) -> None:
        self._tell(self.live, "end", result, self.now())


def describe(cmd: LoopCommand) -> tuple[str, str]:
    """A command's kind and a short description of it, without message content."""
    if isinstance(cmd, Pull):
        return "pull", f"pull, publishing {len(cmd.publish)} chunk(s)"
    if isinstance(cmd, Publish):
        return "publish", f"publish {len(cmd.chunks)} chunk(s)"
    if isinstance(cmd, CallModel):
        return "call-model", (
            f"call {cmd.request.model} (step {cmd.step_number}, attempt {cmd.attempt}, "
            f"{len(cmd.request.messages)} messages)"
        )
    if isinstance(cmd, RunTools):
        calls = ", ".join(f"{i.call.tool_name}#{i.call.tool_call_id}" for i in cmd.calls)
        return "run-tools", f"run tools {calls}"
    if isinstance(cmd, Perform):
        return "perform", (
            f"{cmd.processor_id}.{cmd.hook} asks for {type(cmd.request).__name__}"
        )
    if isinstance(cmd, AwaitHook):
        return "await", f"await {cmd.processor_id}.{cmd.hook}"
    if isinstance(cmd, CloseStream):
        return "close-stream", "close the model stream"
    if isinstance(cmd, Sleep):
        return "sleep", f"sleep {cmd.seconds:g} s"
    return "finish", f"finish: {cmd.result.status}"


__all__ = ["Observer", "RunInfo", "RunObserver", "describe", "watched_loop"]
