"""What an interpreter and the agent loop say to each other.

The commands the loop yields (`LoopCommand`), the replies it is sent (`ModelReply`,
`ToolOutcome`), how a run is cancelled (`RunCancelled`) and what a trace records
(`EffectRecord`). Interpreters need only these and `agent_loop`; `pipeline.loop`
re-exports them all.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import msgspec

from effects import AwaitHook, CallModel, Finish, Perform, Publish, Pull, RunTools, Sleep
from pipeline.chunks import (
    Chunk,
    DataChunk,
    ModelFinish,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    SourceChunk,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
)
from pipeline.messages import ToolCallPart
from pipeline.model import ModelEnded, ModelFailed, ModelRequest
from pipeline.result import RunResult
from pipeline.tools import Tool


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


ModelReply = (
    TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolCallDelta
    | ToolCall
    | SourceChunk
    | DataChunk
    | ModelFinish
    | ModelFailed
    | ModelEnded
)
"""What an interpreter sends in reply to CallModel and Pull."""

LoopCommand = (
    CallModel[ModelRequest]
    | Pull[Chunk]
    | Publish[Chunk]
    | RunTools[ToolInvocation]
    | Perform[object]
    | AwaitHook
    | Sleep
    | Finish[RunResult]
)
AgentLoop = Generator[LoopCommand, object, RunResult]


class EffectRecord(msgspec.Struct, frozen=True):
    """One processor decision, for traces."""

    processor_id: str
    hook: str
    effect: object


Recorder = Callable[[EffectRecord], None]


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
