"""What an interpreter and the agent loop say to each other.

The commands the loop yields (`LoopCommand`), the replies it is sent (`ModelReply`,
`ToolOutcome`), how a run is cancelled (`RunCancelled`) and what a trace records
(`EffectRecord`). Each command declares its reply type (`effects.Command[R]`); the loop
checks every reply (`checked`) and raises `ProtocolError` on a wrong one. Interpreters
import these from here and `agent_loop` from `pipeline`, nothing from `pipeline.loop.run`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
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
from effects.started import Ready, Start
from pipeline.agents import ChildRun
from pipeline.processor import HookEffect
from pipeline.tools import Tool
from pipeline.values.chunks import Chunk, ModelEvent
from pipeline.values.messages import ToolCallPart
from pipeline.values.model import ModelEnded, ModelFailed, ModelRequest
from pipeline.values.result import RunResult


class ToolInvocation(msgspec.Struct, frozen=True):
    """A tool call the interpreter should run: `kwargs` are validated, or `error` says why not.

    `child`: the call runs an agent (`docs/agents.md`): start its loop from the
    `ChildRun`, drive it through `pipeline.loop.relay` with a driver of its own, and
    answer with `ToolOutcome(result=<its RunResult>)` (`kwargs` is None: an interpreter
    that does not know children answers the call with an error, failing closed)."""

    call: ToolCallPart
    tool: Tool | None
    kwargs: dict[str, object] | None
    error: str | None = None
    child: ChildRun | None = None


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


_NONE: frozenset[type] = frozenset({type(None)})

REPLIES: Mapping[type, tuple[frozenset[type] | None, str]] = {
    CallModel: (MODEL_REPLY_TYPES, "a model event (ModelReply)"),
    Pull: (MODEL_REPLY_TYPES, "a model event (ModelReply)"),
    Publish: (_NONE, "None"),
    Sleep: (_NONE, "None"),
    CloseStream: (_NONE, "None"),
    RunTools: (None, "one ToolOutcome per call, in the order of the calls"),
    Done: (frozenset(), "no reply: the run is over"),
    Start: (frozenset({int}), "a ticket (an int)"),
    Ready: (frozenset({bool}), "a bool"),
}
"""The one table of what answers what: per command (and per started request a `Perform`
carries), the classes its reply may be (None: checked by `outcomes_match`) and how the
error says so. `checked` and the loop's inline checks on its hot paths read it; a
`Perform`'s other answers and an `AwaitHook`'s are checked by the hook that asked."""


class ProtocolError(TypeError):
    """An interpreter sent the loop a reply of the wrong type for the pending command
    (an interpreter bug): raised out of the loop, naming the command and the reply."""

    def __init__(self, command: Command[object], reply: object) -> None:
        asked: object = command.request if type(command) is Perform else command
        super().__init__(
            f"interpreter bug: {type(asked).__name__} was answered with {reply!r} "
            f"({type(reply).__name__}); it expects {REPLIES[type(asked)][1]}"
        )
        self.command = command
        self.reply = reply


def checked(cmd: Command[R], reply: object) -> R:
    """`reply` as the reply `cmd` declares (`REPLIES`); ProtocolError when it is not one.

    The loop asks every question as `reply = checked(cmd, (yield cmd))`, so a wrong reply
    stops the run at once instead of travelling on (to the caller, say, as a chunk)."""
    t = type(cmd)
    if t is RunTools:
        assert isinstance(cmd, RunTools)
        if not outcomes_match(reply, cmd.calls):
            raise ProtocolError(cmd, reply)
    elif t is not Perform and t is not AwaitHook:
        types = REPLIES[t][0]
        if types is not None and type(reply) not in types:
            raise ProtocolError(cmd, reply)
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
__all__ += [  # the commands, which `REPLIES` pairs with their replies
    "AwaitHook", "CallModel", "CloseStream", "Command", "Done", "Perform", "Publish", "Pull",
    "RunTools", "Sleep",
]
__all__ += ["ModelEnded", "ModelFailed"]  # the replies that end a model stream, or fail it
