"""Input guards that race the model: `process_input` of a processor with `concurrent`.

Such a hook is started where it stands in the input processors (it sees the messages
the processors before it made) and runs beside the first model call: its first request
that would wait is started (`effects.started.Start`) instead, and the hook is parked
(`start_racing`). The model call then goes out. Once it answered, `race_gate` reads the
model's events into a held buffer (nothing is handed to the caller, no chunk goes
through the stream processors, no tool runs) while some guard is not ready, then
collects every guard: a trip (or a guard that failed: fail closed) closes the model's
stream and ends the run with nothing of the model's output anywhere; when all passed,
`feed` gives the held events to the step's stream (`model_call.consume`) before the
stream's next ones. So the first token comes after max(guard, model), not their sum.

A racing guard cannot change the messages the model already has: a `Replace` from it
is an error of the hook (fail closed).

Nothing here is on the per-chunk path of a run without such a guard.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from typing import TypeVar

from effects import Abort, AwaitHook, CloseStream, Continue, Perform, Publish, Pull, Request
from effects.started import STARTED_REQUESTS, Collect, Job, Ready, Start
from pipeline.loop.hooks import Bound, Outcome, call_hook, invalid
from pipeline.loop.model_call import close_stream
from pipeline.loop.state import Racing, RunConfig, RunState, apply, trip
from pipeline.processor import InputArgs
from pipeline.protocol.replies import (
    MODEL_REPLY_TYPES,
    LoopCommand,
    ModelReply,
    ProtocolError,
    checked,
)
from pipeline.values.chunks import Chunk, ModelFinish
from pipeline.values.model import ModelEnded, ModelFailed

R = TypeVar("R")

MAX_HELD = 4096
"""The most model events held while a guard runs; past it the stream waits (is not read)
until every guard answered."""

_ENDS = (ModelFinish, ModelFailed, ModelEnded)
_NO_WAIT = (Start, Ready)


def start_racing(
    rc: RunConfig, st: RunState, b: Bound, args: InputArgs[object]
) -> Generator[LoopCommand, object, None]:
    """Call the guard's `process_input` until it would wait; park it in `st.racing` (or,
    when it never waits, apply its verdict now)."""
    call = call_hook(b, args)
    try:
        cmd = next(call)
        while True:
            if type(cmd) is Perform and type(cmd.request) in _NO_WAIT:
                cmd = call.send((yield cmd))
                continue
            if type(cmd) is Perform and isinstance(cmd.request, Request) and (
                type(cmd.request) not in STARTED_REQUESTS
            ):
                start: Perform[object] = Perform(cmd.processor_id, cmd.hook, Start(cmd.request))
                ticket = yield start
                if type(ticket) is not int:
                    raise ProtocolError(start, ticket)
                st.racing = (*st.racing, Racing(b, call, None, Job(ticket, cmd.request)))
                return
            assert isinstance(cmd, Perform | AwaitHook)
            st.racing = (*st.racing, Racing(b, call, cmd, None))
            return
    except StopIteration as done:
        _verdict(rc, st, b, done.value)


def _verdict(rc: RunConfig, st: RunState, b: Bound, outcome: Outcome) -> None:
    eff = apply(rc, st, b, outcome)
    if isinstance(eff, Abort):
        raise trip(b, eff)
    if not isinstance(eff, Continue):
        raise invalid(b, f"a concurrent input processor may only pass or abort, "
                         f"not {type(eff).__name__}: the model already has the messages")


def _finish(r: Racing) -> Generator[LoopCommand, object, Outcome]:
    """Collect a parked guard and run it to its end."""
    call = r.call
    if r.job is None:
        assert r.waiting is not None
        return (yield from relay(call, r.waiting))
    take: Perform[object] = Perform(r.bound.processor_id, r.bound.hook, Collect(r.job))
    try:
        answer = yield take
    except Exception as e:  # the guard's request failed: the hook decides (or fails)
        return (yield from relay(call, None, e))
    return (yield from relay(call, None, answer=answer))


def _ready(st: RunState) -> Generator[LoopCommand, object, bool]:
    """Whether every parked guard could go on without waiting."""
    for r in st.racing:
        ticket = r.ticket()
        if ticket is None:
            return False
        ask: Perform[object] = Perform(r.bound.processor_id, r.bound.hook, Ready(ticket))
        got = yield ask
        if type(got) is not bool:
            raise ProtocolError(ask, got)
        if not got:
            return False
    return True


def race_gate(
    rc: RunConfig, st: RunState, first: object
) -> Generator[LoopCommand, object, tuple[object, deque[object], bool]]:
    """Hold the model's events until every racing guard passed (see the module doc).
    Returns the first event, the other events held, and whether the stream ended."""
    held: deque[object] = deque()
    got = first
    ended = isinstance(got, _ENDS)
    try:
        while not ended and len(held) < MAX_HELD and not (yield from _ready(st)):
            pull: Pull[Chunk, ModelReply] = Pull(())
            got = yield pull
            if type(got) not in MODEL_REPLY_TYPES:
                raise ProtocolError(pull, got)
            held.append(got)
            ended = isinstance(got, _ENDS)
        while st.racing:
            r = st.racing[0]
            outcome = yield from _finish(r)
            st.racing = st.racing[1:]
            _verdict(rc, st, r.bound, outcome)
    except BaseException as e:
        drop_racing(st)
        if not ended and isinstance(e, Exception) and not isinstance(e, ProtocolError):
            # a trip or a failed guard: the model stops (a cancel: the interpreter closes)
            yield from close_stream()
        raise
    return first, held, ended


def drop_racing(st: RunState) -> None:
    """The run ends with guards still parked: their hooks' cleanup runs now."""
    for r in st.racing:
        r.call.close()
    st.racing = ()


def feed(
    inner: Generator[LoopCommand, object, None], held: deque[object], ended: bool
) -> Generator[LoopCommand, object, None]:
    """Drive the step's stream (`inner`) with the held events (`relay`)."""
    yield from relay(inner, None, held=held, ended=ended)


_NOTHING = object()


def relay(
    inner: Generator[LoopCommand, object, R],
    cmd: LoopCommand | None,
    failure: BaseException | None = None,
    *,
    answer: object = _NOTHING,
    held: deque[object] | None = None,
    ended: bool = False,
) -> Generator[LoopCommand, object, R]:
    """Pass `inner`'s commands on and their replies (or failures) back, to its end; it
    starts from `cmd`, or (None) by being sent `answer` (thrown `failure`; neither: it is
    started). A Pull is answered from `held` first (its chunks published as a Pull would
    have); a close of a stream that ended already (`ended`) is answered here."""
    try:
        if cmd is None:
            if failure is not None:
                cmd = inner.throw(failure)
            else:
                cmd = next(inner) if answer is _NOTHING else inner.send(answer)
        while True:
            t = type(cmd)
            if t is Pull and held:
                assert isinstance(cmd, Pull)
                if cmd.publish:
                    out: Publish[Chunk] = Publish(cmd.publish)
                    try:
                        checked(out, (yield out))
                    except BaseException as e:
                        cmd = inner.throw(e)
                        continue
                cmd = inner.send(held.popleft())
                continue
            if t is CloseStream and ended:
                cmd = inner.send(None)
                continue
            try:
                reply = yield cmd
            except BaseException as e:
                cmd = inner.throw(e)
            else:
                cmd = inner.send(reply)
    except StopIteration as done:
        value: R = done.value
        return value
