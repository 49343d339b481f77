"""Replaying a recorded run (`interpreters.record.journal`) offline, against its agent or a
changed one.

The run's driver (`pipeline.protocol.driver`) is fed the journal's recorded replies: model events
by call, tool outcomes (and what the tools wrote), processor requests' answers, clock
readings and costs, and a cancel where the run was cancelled. Every command is compared
with the recorded one (`Divergence`, the first that differs); tools and judges do not
run again. A replay needs no provider and does no I/O: `replay_sync`, or `replay_async`
for an agent with async hooks (awaited).
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Generator, Sequence
from typing import Literal, cast

import msgspec

from effects import (
    AwaitHook,
    CallModel,
    Perform,
    Pull,
    RunTools,
)
from effects.requests import Request, declared_answer
from interpreters.approvals.writes import with_writes
from interpreters.core.trace import Trace
from interpreters.observers.observe import Observer, describe, log, watched_loop
from interpreters.providers.provider import ProviderError
from interpreters.record.journal import (
    Answered,
    CancelledAt,
    ClockRead,
    CommandSeen,
    Entry,
    InRun,
    Journal,
    ModelReplied,
    Priced,
    Raised,
    RunStarted,
    ToolsDone,
    digest,
    fields_of,
    result_digest,
    tool_writers,
)
from interpreters.run.common import child_failed, chunks_of
from pipeline.agent import Agent
from pipeline.approval import Resumption, typed_states
from pipeline.loop import watched_relay
from pipeline.protocol import Driver, LoopCommand, ModelReply, ToolInvocation, ToolOutcome, Watch
from pipeline.tools import check_deps
from pipeline.values.chunks import DataChunk
from pipeline.values.context import RunContext
from pipeline.values.cost import Cost, PriceQuery, Pricer
from pipeline.values.model import ApiError, ModelEnded, ModelFailed
from pipeline.values.result import RunResult


class Divergence(msgspec.Struct, frozen=True):
    """Where a replay first went another way than the recorded run."""

    index: int
    """The position of the command in its run (0: the first command)."""
    expected: str
    """The recorded command (its description), or "" when the recording had ended."""
    got: str
    """The command of the replay."""
    field: str = ""
    """The first field of the command that differs (`result.cost.total`), when the
    commands are of one kind."""
    recorded: str = ""
    """That field's recorded value (its JSON, cut at `PREVIEW` characters)."""
    replayed: str = ""
    """That field's value in the replay (its JSON, cut alike)."""
    path: tuple[str, ...] = ()
    """The run of the tree it is in (`docs/agents.md`): the tool-call ids from the root's
    call down to the call that ran it; empty for the root."""
    agent: str = ""
    """That run's agent."""

    def __str__(self) -> str:
        where = f"in run {'/'.join(self.path)} ({self.agent}), " if self.path else ""
        if self.field:
            was = self.recorded or "(not kept: streamed text of a scrubbed journal)"
            return (f"{where}command #{self.index} ({self.got!r}): {self.field} differs, "
                    f"recorded {was}, replay {self.replayed}")
        if self.expected == self.got:
            return (f"{where}command #{self.index}: {self.got!r}, its content differs (the "
                    "journal records no fields of it)")
        was = self.expected or "the end of the recording"
        now = self.got or "the end of the run"
        return f"{where}command #{self.index}: recorded {was!r}, replay {now!r}"


def _divergence(i: int, recorded: CommandSeen | None, cmd: LoopCommand) -> Divergence:
    what = describe(cmd)[1]
    if recorded is None:
        return Divergence(i, "", what)
    if recorded.kind != describe(cmd)[0] or not recorded.fields:
        return Divergence(i, recorded.what, what)
    mine = {f.path: f for f in fields_of(cmd)}
    theirs = {f.path: f for f in recorded.fields}
    for f in recorded.fields:
        other = mine.get(f.path)
        if other is None:
            return Divergence(i, recorded.what, what, f.path, f.value, "(absent)")
        if other.digest != f.digest:
            return Divergence(i, recorded.what, what, f.path, f.value, other.value)
    for f in mine.values():
        if f.path not in theirs:
            return Divergence(i, recorded.what, what, f.path, "(absent)", f.value)
    return Divergence(i, recorded.what, what)


class _Tree:
    """A replay of a tree of runs: each run's recorded entries by path, and the first
    divergence in it (in the order the replay ran its runs)."""

    __slots__ = ("first", "observers", "price", "runs", "trace")

    def __init__(self, journal: Journal, observers: Sequence[Observer],
                 price: Pricer | None, trace: Trace) -> None:
        self.runs = journal.runs()
        self.observers = observers
        self.price = price
        self.trace = trace
        self.first: Divergence | None = None

    def feed(self, path: tuple[str, ...], agent: str) -> _Feed:
        """The feed of the child run at `path` (empty when the journal has none)."""
        entries = self.runs.pop(path, ())
        at = entries[0].at if entries and isinstance(entries[0], RunStarted) else 0.0
        return _Feed(entries[1:] if entries else (), at, self, path, agent)

    def diverged(self, d: Divergence) -> None:
        if self.first is None:
            self.first = d


class ReplayRun(msgspec.Struct, frozen=True):
    """A replayed run: its result and trace, and how it compares with the recording."""

    result: RunResult
    trace: Trace
    divergence: Divergence | None
    result_matches: bool
    """The result is the recorded one (its digest is equal)."""

    @property
    def identical(self) -> bool:
        """The same commands and the same result as the recorded run."""
        return self.divergence is None and self.result_matches


class ReplayExhausted(LookupError):
    """The replayed run asked for something the journal does not hold."""


EXHAUSTED = "replay-exhausted"
"""`ApiError.error_type` of a model call the journal has no recording for."""


class _Feed:
    """One run's recorded replies, by channel, and the recorded commands to compare with."""

    def __init__(
        self, entries: Sequence[Entry], at: float, tree: _Tree | None = None,
        path: tuple[str, ...] = (), agent: str = "",
    ) -> None:
        self.calls: deque[deque[ModelReply]] = deque()
        self.tools: deque[ToolsDone | Raised] = deque()
        self.answers: deque[Answered | Raised] = deque()
        self.clock: deque[float] = deque()
        self.commands = tuple(e for e in entries if isinstance(e, CommandSeen))
        self.cancels: dict[int, CancelledAt] = {}
        self.costs: deque[Cost | None] = deque()
        self.priced = False
        self.tree = tree
        self.path = path
        self.agent = agent
        pending: Literal["tools", "answer", "other"] = "other"
        n = -1
        for e in entries:
            if isinstance(e, CommandSeen):
                n += 1
                pending = (
                    "tools" if e.kind == "run-tools"
                    else "answer" if e.kind == "perform" else "other"
                )
            elif isinstance(e, ModelReplied):
                if e.first or not self.calls:
                    self.calls.append(deque())
                self.calls[-1].append(e.event)
            elif isinstance(e, ToolsDone):
                self.tools.append(e)
            elif isinstance(e, Answered):
                self.answers.append(e)
            elif isinstance(e, Raised):
                if pending == "tools":
                    self.tools.append(e)
                elif pending == "answer":
                    self.answers.append(e)
            elif isinstance(e, ClockRead):
                self.clock.append(e.value)
            elif isinstance(e, CancelledAt):
                self.cancels[n] = e
            elif isinstance(e, Priced):
                self.priced = True
                self.costs.append(e.cost)
        self.last_clock = at
        self.stream: deque[ModelReply] = deque()
        self.index = 0
        self.divergence: Divergence | None = None

    def recorded_price(self, query: PriceQuery) -> Cost | None:
        """The recorded pricer's answers, in order (a replay that prices more calls than
        the run did gets None for them: no cost, never a made-up one)."""
        return self.costs.popleft() if self.costs else None

    def read_clock(self) -> float:
        if self.clock:
            self.last_clock = self.clock.popleft()
        return self.last_clock

    def observer_time(self) -> float:
        """The recorded interpreter time of the command being carried out."""
        cmds = self.commands
        if not cmds:
            return self.last_clock
        return cmds[min(self.index, len(cmds) - 1)].at

    def see(self, cmd: LoopCommand) -> None:
        """Compare the replay's next command with the recorded one."""
        i = self.index
        self.index += 1
        if self.divergence is not None:
            return
        recorded = self.commands[i] if i < len(self.commands) else None
        if recorded is None or recorded.digest != digest(cmd):
            self.diverged(_divergence(i, recorded, cmd))

    def diverged(self, d: Divergence) -> None:
        d = msgspec.structs.replace(d, path=self.path, agent=self.agent)
        self.divergence = d
        log.warning("replay diverges from the recording at %s", d)
        if self.tree is not None:
            self.tree.diverged(d)

    def ended(self) -> None:
        """The run is over: recorded commands it did not give are a divergence."""
        if self.divergence is None and self.index < len(self.commands):
            self.diverged(Divergence(self.index, self.commands[self.index].what, ""))

    def cancel_at(self) -> CancelledAt | None:
        """The recorded cancel at the command being carried out, if it was cancelled."""
        return self.cancels.get(self.index - 1) if self.divergence is None else None

    def open_call(self) -> ModelReply:
        if not self.calls:
            self.stream = deque()
            return ModelFailed(ApiError(
                status=None, message="the journal holds no more model calls",
                error_type=EXHAUSTED,
            ))
        self.stream = self.calls.popleft()
        return self.next_event()

    def next_event(self) -> ModelReply:
        return self.stream.popleft() if self.stream else ModelEnded()

    def tool_outcomes(
        self, cmd: RunTools[ToolInvocation, ToolOutcome]
    ) -> tuple[ToolOutcome, ...] | BaseException:
        ids = [i.call.tool_call_id for i in cmd.calls]
        if not self.tools:
            return ReplayExhausted("the journal holds no more tool results")
        entry = self.tools.popleft()
        if isinstance(entry, Raised):
            return _rebuild(entry)
        _write_again(cmd, entry.written)
        if [o.tool_call_id for o in entry.outcomes] == ids:
            return entry.outcomes
        # A changed agent calls other tools: answer each call by its id where recorded.
        by_id = {o.tool_call_id: o for o in entry.outcomes}
        return tuple(
            by_id.get(cid) or ToolOutcome(
                cid, "replay: no recorded result for this call", is_error=True
            )
            for cid in ids
        )

    def answer(self, request: object) -> object:
        if not self.answers:
            return ReplayExhausted("the journal holds no more answers to processor requests")
        entry = self.answers.popleft()
        if isinstance(entry, Raised):
            return _rebuild(entry)
        if entry.answer is not None:
            return entry.answer
        value = entry.value
        want = declared_answer(type(request)) if isinstance(request, Request) else None
        if want is not None and value is not None:
            # Recorded as JSON: back into the type the request declares (a struct, a
            # tuple of messages); one that does not fit is left for `ask` to report.
            with contextlib.suppress(msgspec.ValidationError):
                value = msgspec.convert(value, want)
        return value


def _write_again(
    cmd: RunTools[ToolInvocation, ToolOutcome],
    written: tuple[tuple[str, tuple[DataChunk, ...]], ...],
) -> None:
    """The tools do not run again: what they wrote is written again for them."""
    recorded = dict(written)
    for cid, writer in tool_writers(cmd):
        for chunk in recorded.get(cid, ()):
            writer.write(chunk)


class ReplayedError(Exception):
    """Base of the exceptions a replay rebuilds from a journal (named as the original)."""


def _rebuild(r: Raised) -> BaseException:
    if r.api_error is not None:
        return ProviderError(r.api_error)
    cls: type[ReplayedError] = type(r.error_type, (ReplayedError,), {})
    return cls(r.message)


class _Seen:
    """What the replay's driver tells: the observers first (timed by the recorded clock
    of the command), then the feed, which compares every command with the recorded one
    (those a cancel's finish publishes too)."""

    __slots__ = ("feed", "watch")

    def __init__(self, feed: _Feed, watch: Watch | None) -> None:
        self.feed = feed
        self.watch = watch

    def command(self, cmd: LoopCommand) -> None:
        if self.watch is not None:
            self.watch.command(cmd)
        self.feed.see(cmd)

    def reply(self, cmd: LoopCommand, reply: object) -> None:
        if self.watch is not None:
            self.watch.reply(cmd, reply)

    def failed(self, cmd: LoopCommand, error: BaseException) -> None:
        if self.watch is not None:
            self.watch.failed(cmd, error)

    def end(self, result: RunResult | None) -> None:
        if self.watch is not None:
            self.watch.end(result)


def _steps(d: Driver, feed: _Feed) -> Generator[AwaitHook, object, RunResult]:
    """Drive the run on the recorded replies; yields only async hooks to await. A call
    that runs a child run replays that run on its own entries (`_child`)."""
    try:
        cmd = d.start()
        while d.result is None:
            at = feed.cancel_at()
            if at is not None:
                if isinstance(cmd, RunTools):  # the calls that had finished keep theirs
                    _write_again(cmd, at.written)
                    done = at.done
                    if any(i.child is not None for i in cmd.calls):
                        done = yield from _children(cmd, done, feed)
                    for outcome in done:
                        d.tool_finished(outcome)
                d.cancel(at.reason)  # (its chunks are in the trace)
                break
            reply: object = None
            failure: BaseException | None = None
            if isinstance(cmd, Pull):
                reply = feed.next_event()
            elif isinstance(cmd, CallModel):
                reply = feed.open_call()
            elif isinstance(cmd, RunTools):
                reply = out = feed.tool_outcomes(cmd)
                failure = out if isinstance(out, BaseException) else None
                if failure is None and any(i.child is not None for i in cmd.calls):
                    reply = yield from _children(
                        cmd, cast(tuple[ToolOutcome, ...], out), feed)
            elif isinstance(cmd, Perform):
                reply = answer = feed.answer(cmd.request)
                failure = answer if isinstance(answer, BaseException) else None
            elif isinstance(cmd, AwaitHook):
                try:
                    reply = yield cmd
                except Exception as e:
                    failure = e
            # Publish, CloseStream: no reply; Sleep: no time passes in a replay.
            cmd = d.fail(failure) if failure is not None else d.send(reply)
        assert d.result is not None
        return d.result
    finally:
        d.close()


def _children(
    cmd: RunTools[ToolInvocation, ToolOutcome], outcomes: tuple[ToolOutcome, ...],
    feed: _Feed,
) -> Generator[AwaitHook, object, tuple[ToolOutcome, ...]]:
    """`outcomes` with each child run's replayed (in the order of the calls): its result
    from its own entries, against its agent as it is now."""
    runs = {i.call.tool_call_id: i for i in cmd.calls if i.child is not None}
    out: list[ToolOutcome] = []
    for o in outcomes:
        inv = runs.get(o.tool_call_id)
        if inv is not None and feed.tree is not None:
            o = yield from _child(inv, feed.tree)
        out.append(o)
    return tuple(out)


def _child(inv: ToolInvocation, tree: _Tree) -> Generator[AwaitHook, object, ToolOutcome]:
    """A child run replayed on the entries recorded under its path."""
    child = inv.child
    assert child is not None
    feed = tree.feed(child.path, child.tool.agent.name)
    price = tree.price if tree.price is not None else (
        feed.recorded_price if feed.priced else None)
    try:
        loop, watch = watched_loop(
            child.tool.agent, child.messages, context=child.context, clock=feed.observer_time,
            record=None, observers=tree.observers, loop_clock=feed.read_clock, price=price,
            resume=child.resume, child=child,
        )
    except Exception as e:
        return child_failed(inv, e)
    relayed, seen = watched_relay(child, loop, _Seen(feed, watch))
    d = Driver(relayed, log=chunks_of(tree.trace), watch=seen)
    result = yield from _steps(d, feed)
    feed.ended()
    return ToolOutcome(inv.call.tool_call_id, result)


def _start(
    journal: Journal,
    agent: Agent,
    observers: Sequence[Observer],
    price: Pricer | None,
    deps: object,
) -> tuple[Driver, _Feed, Trace]:
    check_deps(agent.tools, deps)
    h = journal.header
    trace = Trace()
    tree = _Tree(journal, observers, price, trace)
    feed = _Feed(tuple(e for e in journal.entries[1:] if not isinstance(e, InRun)), h.at, tree,
                 (), agent.name)
    if price is None and feed.priced:
        price = feed.recorded_price
    ctx = RunContext(
        run_id=h.run_id, thread_id=h.thread_id, resource_id=h.resource_id, values=h.values,
        deps=deps,
    )
    loop, watch = watched_loop(
        agent, h.messages, context=ctx, clock=feed.observer_time, record=trace.record_effect,
        observers=observers, loop_clock=feed.read_clock, price=price,
        resume=_resumption(h, agent),
    )
    return Driver(loop, log=trace, watch=_Seen(feed, watch)), feed, trace


def _resumption(h: RunStarted, agent: Agent) -> Resumption | None:
    """What the recorded run went on from, its states typed by `agent`'s processors
    again (the journal holds them as JSON): `TypeError` for a state that does not fit
    (one JSON could not encode); a resumed run is bound to its agent, so another one is
    `AgentChanged`, as on resuming."""
    if h.resume is None:
        return None
    s = typed_states(agent, with_writes(h.resume.suspension, h.resume_writes, _decode_write))
    if s.thread_id is None and s.resource_id is None:
        # recorded before suspensions kept their owner: the run went on in the header's
        s = msgspec.structs.replace(s, thread_id=h.thread_id, resource_id=h.resource_id)
    return msgspec.structs.replace(h.resume, suspension=s)


def _finish(journal: Journal, feed: _Feed, trace: Trace, result: RunResult) -> ReplayRun:
    feed.ended()
    ended = journal.ended
    matches = ended is not None and ended.digest == result_digest(result)
    first = feed.tree.first if feed.tree is not None else feed.divergence
    return ReplayRun(result, trace, first, matches)


def _decode_write(body: bytes, cls: type) -> object:
    return msgspec.json.decode(body, type=cls)


def replay_sync(
    journal: Journal,
    agent: Agent,
    *,
    observers: Sequence[Observer] = (),
    price: Pricer | None = None,
    deps: object = None,
) -> ReplayRun:
    """Replay a recorded run of `agent` (or of a changed agent) without I/O.

    `deps` are what the run's tools that take a `ToolContext` are given (the tools do not
    run again, but the loop checks their type as in the run). `price` prices the model
    calls; without it, a run recorded with a pricer gets the costs it recorded.
    Async hooks cannot run here; use `replay_async` for an agent that has them.
    """
    from interpreters.run.base import refuse_async

    refuse_async(agent)
    driver, feed, trace = _start(journal, agent, observers, price, deps)
    steps = _steps(driver, feed)
    try:
        next(steps)
    except StopIteration as done:
        return _finish(journal, feed, trace, _result(done))
    steps.close()
    raise AssertionError("unreachable: async hooks were refused")


async def replay_async(
    journal: Journal,
    agent: Agent,
    *,
    observers: Sequence[Observer] = (),
    price: Pricer | None = None,
    deps: object = None,
) -> ReplayRun:
    """Replay a recorded run under async code: async hooks are awaited (see
    `replay_sync` for `price` and `deps`)."""
    driver, feed, trace = _start(journal, agent, observers, price, deps)
    steps = _steps(driver, feed)
    try:
        cmd = next(steps)
        while True:
            try:
                value = await cmd.awaitable
            except Exception as e:
                cmd = steps.throw(e)
            else:
                cmd = steps.send(value)
    except StopIteration as done:
        return _finish(journal, feed, trace, _result(done))


def _result(done: StopIteration) -> RunResult:
    r = done.value
    if not isinstance(r, RunResult):
        raise TypeError(f"the replay returned {r!r}, not a RunResult")
    return r




__all__ = [
    "EXHAUSTED", "Divergence", "ReplayExhausted", "ReplayRun", "ReplayedError",
    "replay_async", "replay_sync",
]
