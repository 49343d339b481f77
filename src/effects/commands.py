"""Commands: what the pure agent loop asks an interpreter to do.

The loop is a generator that yields one command at a time and is sent the reply.
Each command declares the type of its reply (`Command[R]`), and its docstring says what
the interpreter must send back; the loop checks every reply (`pipeline.protocol.replies`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Generic, TypeVar

import msgspec

Req = TypeVar("Req")
Ch = TypeVar("Ch")
Ev = TypeVar("Ev")
Call = TypeVar("Call")
ToolOut = TypeVar("ToolOut")
Res = TypeVar("Res")
Q = TypeVar("Q")
R_co = TypeVar("R_co", covariant=True)


class Command(msgspec.Struct, Generic[R_co], frozen=True, tag=True):
    """A command whose reply is an `R_co`."""


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class CallModel(Command[Ev], Generic[Req, Ev], frozen=True, gc=False, tag=True):
    """Open a model stream for `request`. Reply: its first event, or the failure.

    Model streams: `CallModel` opens one, `Pull` reads it, `CloseStream` closes it early.
    The interpreter closes it itself once it has handed over its last event (ModelFinish,
    the end of the stream, a failure), and when the run is cancelled; nothing else
    closes it (a stream hook's I/O, `Perform` or `AwaitHook`, happens while it is open).
    """

    request: Req
    step_number: int
    attempt: int


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class Pull(Command[Ev], Generic[Ch, Ev], frozen=True, gc=False, tag=True):
    """Deliver `publish` to the caller, then reply with the open stream's next event."""

    publish: tuple[Ch, ...]


class CloseStream(Command[None], frozen=True, tag=True):
    """Close the open model stream before its end (a processor aborted the run, a stream
    hook failed): the provider stops generating. Reply: None."""


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class Publish(Command[None], Generic[Ch], frozen=True, gc=False, tag=True):
    """Deliver chunks to the caller. Reply: None."""

    chunks: tuple[Ch, ...]


class RunTools(Command[tuple[ToolOut, ...]], Generic[Call, ToolOut], frozen=True, tag=True):
    """Run these tool calls. Reply: one outcome per call, in the order of the calls."""

    calls: tuple[Call, ...]


class Perform(Command[object], Generic[Q], frozen=True, tag=True):
    """A processor asks for I/O (an LLM judge call, say). Reply: the answer."""

    processor_id: str
    hook: str
    request: Q


class AwaitHook(Command[object], frozen=True, tag=True):
    """An async hook or tool returned an awaitable. Reply: its result.

    Only the async interpreter can carry this out; the sync one rejects async hooks
    before the run starts.
    """

    processor_id: str
    hook: str
    awaitable: Awaitable[object]


class Sleep(Command[None], frozen=True, tag=True):
    """Wait before retrying a transient failure. Reply: None. Virtual in the simulator."""

    seconds: float
    reason: str


class Done(Command[None], Generic[Res], frozen=True, tag="Finish"):
    """The run is over; `result` is final. No reply is expected.

    (Its tag stays "Finish", its name before: journals recorded then still replay.)"""

    result: Res

