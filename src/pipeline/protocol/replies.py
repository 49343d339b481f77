"""What an interpreter and the agent loop say to each other.

The commands the loop yields (`LoopCommand`), the replies it is sent (`ModelReply`,
`ToolOutcome`), how a run is cancelled (`RunCancelled`) and what a trace records
(`EffectRecord`). Each command declares its reply type (`effects.Command[R]`); the loop
checks every reply (`checked`) and raises `ProtocolError` on a wrong one. Interpreters
import these from here and `agent_loop` from `pipeline`, nothing from `pipeline.loop.run`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, TypeGuard, TypeVar, cast, get_args

import msgspec

from effects import (
    AwaitHook,
    CallModel,
    CloseStream,
    Command,
    Done,
    Perform,
    Publish,
    Pull,
    RunTools,
    Sleep,
)
from pipeline.processor import HookEffect
from pipeline.tools import Tool
from pipeline.values.chunks import Chunk, ModelEvent
from pipeline.values.messages import ToolCallPart
from pipeline.values.model import ModelEnded, ModelFailed, ModelRequest
from pipeline.values.result import RunResult


class ToolInvocation(msgspec.Struct, frozen=True):
    """A tool call the interpreter should run: `kwargs` are validated, or `error` says why not."""

    call: ToolCallPart
    tool: Tool | None
    kwargs: dict[str, object] | None
    error: str | None = None


class ToolOutcome(msgspec.Struct, frozen=True):
    """An interpreter's reply for one ToolInvocation."""

    tool_call_id: str
    result: object
    is_error: bool = False


ModelReply = ModelEvent | ModelFailed | ModelEnded
"""What an interpreter sends in reply to CallModel and Pull: a model event, or how the
call or its stream failed."""

MODEL_REPLY_TYPES: frozenset[type] = frozenset(get_args(ModelReply))
"""The classes of `ModelReply`, for the check of every model event (a set lookup)."""

LoopCommand = (
    CallModel[ModelRequest, ModelReply]
    | Pull[Chunk, ModelReply]
    | CloseStream
    | Publish[Chunk]
    | RunTools[ToolInvocation, ToolOutcome]
    | Perform[object]
    | AwaitHook
    | Sleep
    | Done[RunResult]
)
"""Every command the loop yields; each declares its reply type (`effects.Command[R]`)."""

AgentLoop = Generator[LoopCommand, object, RunResult]

R = TypeVar("R")

Asking = Generator[LoopCommand, object, R]
"""A part of the loop that yields commands and ends with an R."""


class ProtocolError(TypeError):
    """An interpreter sent the loop a reply of the wrong type for the pending command
    (an interpreter bug): raised out of the loop, naming the command and the reply."""

    def __init__(self, command: Command[object], reply: object, expected: str) -> None:
        super().__init__(
            f"interpreter bug: {type(command).__name__} was answered with {reply!r} "
            f"({type(reply).__name__}); it expects {expected}"
        )
        self.command = command
        self.reply = reply


def checked(cmd: Command[R], reply: object) -> R:
    """`reply` as the reply `cmd` declares; ProtocolError when it is not one.

    The loop asks every question as `reply = checked(cmd, (yield cmd))`, so a wrong reply
    stops the run at once instead of travelling on (to the caller, say, as a chunk)."""
    t = type(cmd)
    if t is CallModel or t is Pull:
        if type(reply) not in MODEL_REPLY_TYPES:
            raise ProtocolError(cmd, reply, "a model event (ModelReply)")
    elif t is Publish or t is Sleep or t is CloseStream:
        if reply is not None:
            raise ProtocolError(cmd, reply, "None")
    elif t is RunTools:
        assert isinstance(cmd, RunTools)
        if not outcomes_match(reply, cmd.calls):
            raise ProtocolError(cmd, reply, "one ToolOutcome per call, in the order of the calls")
    elif t is Done:
        raise ProtocolError(cmd, reply, "no reply: the run is over")
    # Perform and AwaitHook: any value is an answer (the hook checks its own).
    # The checks above are what `R` means for each command; `cast` says so to the type
    # checker only (a call per command otherwise: this runs for every command of a run).
    if TYPE_CHECKING:
        return cast(R, reply)
    return reply


def outcomes_match(
    reply: object, calls: tuple[object, ...]
) -> TypeGuard[tuple[ToolOutcome, ...]]:
    """Whether `reply` answers RunTools(`calls`): one ToolOutcome per call, in order."""
    if type(reply) is not tuple or len(reply) != len(calls):
        return False
    outcome, invocation = ToolOutcome, ToolInvocation
    for o, c in zip(reply, calls, strict=True):
        # `type(x) is` first: an isinstance against a Struct class asks its metaclass
        if not (
            (type(o) is outcome or isinstance(o, outcome))
            and (type(c) is invocation or isinstance(c, invocation))
            and o.tool_call_id == c.call.tool_call_id
        ):
            return False
    return True



class EffectRecord(msgspec.Struct, frozen=True):
    """One processor decision, for traces."""

    processor_id: str
    hook: str
    effect: HookEffect


EffectRecorder = Callable[[EffectRecord], None]
"""What the loop hands each hook's effect to (`agent_loop(record=...)`, a trace's
`record_effect`). Not `interpreters.Recorder`, the observer that writes journals."""


class RunCancelled(BaseException):
    """Thrown into the loop by an interpreter (`gen.throw`) to cancel the run.

    A BaseException, like GeneratorExit, so no hook's `except Exception` swallows it.
    The loop runs no more hooks: it finishes with status "cancelled" and a `Cancelled`
    error; a response an output processor was still deciding on is dropped (fail
    closed); text streamed so far is kept in a message marked `incomplete` (without its
    tool calls; not at all when process_output_step processors exist); every tool call
    of the response still without a result (tools not run yet, or in flight) gets an
    error result, streamed as a tool-error chunk too.

    Thrown at a `RunTools`, it carries in `tool_outcomes` the outcomes of the calls that
    had finished (their side effects happened): those real results are kept, so a
    continued conversation does not run them again.
    """

    def __init__(
        self, reason: str = "cancelled", tool_outcomes: tuple[ToolOutcome, ...] = ()
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.tool_outcomes = tool_outcomes


__all__ = [
    "MODEL_REPLY_TYPES", "AgentLoop", "Asking", "EffectRecord", "EffectRecorder",
    "LoopCommand", "ModelReply", "ProtocolError", "RunCancelled", "ToolInvocation",
    "ToolOutcome", "checked", "outcomes_match",
]
__all__ += ["ModelEnded", "ModelFailed"]  # the replies that end a model stream, or fail it
