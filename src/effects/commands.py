"""Commands: what the pure agent loop asks an interpreter to do.

The loop is a generator that yields one command at a time and is sent the reply.
Each docstring states the reply the interpreter must send back.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Generic, TypeVar

import msgspec

Req = TypeVar("Req")
Ch = TypeVar("Ch")
Call = TypeVar("Call")
Res = TypeVar("Res")
Q = TypeVar("Q")


class CallModel(msgspec.Struct, Generic[Req], frozen=True, tag=True):
    """Open a model stream for `request`. Reply: its first event, or the failure."""

    request: Req
    step_number: int
    attempt: int


class Pull(msgspec.Struct, Generic[Ch], frozen=True, tag=True):
    """Deliver `publish` to the caller, then reply with the open stream's next event.

    Any command other than `Pull` while a model stream is open closes that stream, except
    `Perform` and `AwaitHook`: a stream hook's own I/O while it processes a chunk.
    """

    publish: tuple[Ch, ...]


class Publish(msgspec.Struct, Generic[Ch], frozen=True, tag=True):
    """Deliver chunks to the caller. Reply: None."""

    chunks: tuple[Ch, ...]


class RunTools(msgspec.Struct, Generic[Call], frozen=True, tag=True):
    """Run these tool calls. Reply: one outcome per call, in the order of the calls."""

    calls: tuple[Call, ...]


class Perform(msgspec.Struct, Generic[Q], frozen=True, tag=True):
    """A processor asks for I/O (an LLM judge call, say). Reply: the answer."""

    processor_id: str
    hook: str
    request: Q


class AwaitHook(msgspec.Struct, frozen=True, tag=True):
    """An async hook or tool returned an awaitable. Reply: its result.

    Only the async interpreter can carry this out; the sync one rejects async hooks
    before the run starts.
    """

    processor_id: str
    hook: str
    awaitable: Awaitable[object]


class Sleep(msgspec.Struct, frozen=True, tag=True):
    """Wait before retrying a transient failure. Reply: None. Virtual in the simulator."""

    seconds: float
    reason: str


class Finish(msgspec.Struct, Generic[Res], frozen=True, tag=True):
    """The run is over; `result` is final. No reply is expected."""

    result: Res


Command = (
    CallModel[object]
    | Pull[object]
    | Publish[object]
    | RunTools[object]
    | Perform[object]
    | AwaitHook
    | Sleep
    | Finish[object]
)
