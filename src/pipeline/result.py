"""What a run produces: per-step results, the final result, and the typed errors."""

from __future__ import annotations

from typing import Literal

import msgspec

from pipeline.chunks import FinishReason, Tripwire, Usage
from pipeline.messages import MessageList, SourcePart, ToolCallPart, ToolResultPart
from pipeline.model import ApiError


class StepResult(msgspec.Struct, frozen=True, kw_only=True):
    """One model call that was kept (a step discarded by a retry is not here)."""

    step_number: int
    model: str
    text: str
    reasoning: str
    tool_calls: tuple[ToolCallPart, ...]
    tool_results: tuple[ToolResultPart, ...]
    sources: tuple[SourcePart, ...]
    finish_reason: FinishReason
    usage: Usage


class ProcessorFailed(msgspec.Struct, frozen=True, tag="processor-failed"):
    """A processor raised (or returned an effect its hook does not allow)."""

    processor_id: str
    hook: str
    error_type: str
    message: str

    def __str__(self) -> str:
        return (
            f"processor {self.processor_id!r} failed in {self.hook}: "
            f"{self.error_type}: {self.message}"
        )


class ApiFailed(msgspec.Struct, frozen=True, tag="api-failed"):
    """The provider rejected the call and no error processor recovered it."""

    step_number: int
    error: ApiError
    attempts: int

    def __str__(self) -> str:
        return (
            f"model call failed at step {self.step_number} "
            f"after {self.attempts} attempt(s): {self.error}"
        )


class StreamFailed(msgspec.Struct, frozen=True, tag="stream-failed"):
    """The model stream broke after it started; what was received is kept, marked incomplete."""

    step_number: int
    message: str
    error: ApiError | None = None

    def __str__(self) -> str:
        return f"model stream broke at step {self.step_number}: {self.message}"


class Cancelled(msgspec.Struct, frozen=True, tag="cancelled"):
    """The caller cancelled the run (or it timed out)."""

    reason: str

    def __str__(self) -> str:
        return f"run cancelled: {self.reason}"


class InvalidInput(msgspec.Struct, frozen=True, tag="invalid-input"):
    """The caller's input is not a conversation the library can send; no model was called.

    `message_index` is the position of the bad message in the input (None: the input as a
    whole, or its system messages), `field` the field at fault (`parts[0].text`).
    """

    message_index: int | None
    field: str
    problem: str
    message_id: str | None = None

    def __str__(self) -> str:
        where = "input" if self.message_index is None else f"message {self.message_index}"
        if self.message_id is not None:
            where += f" (id {self.message_id!r})"
        return f"invalid input: {where}, field {self.field!r}: {self.problem}"


RunError = ProcessorFailed | ApiFailed | StreamFailed | Cancelled | InvalidInput

Status = Literal["finished", "tripped", "failed", "cancelled"]


class RunFailedError(Exception):
    """Raised by `RunResult.unwrap()` for a run that did not finish; carries the result."""

    def __init__(self, result: RunResult) -> None:
        self.result = result
        detail = result.error if result.error is not None else result.tripwire
        super().__init__(f"run {result.status}: {detail}")


class RunResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of a run. `messages` always holds the conversation so far."""

    status: Status
    text: str
    messages: MessageList
    steps: tuple[StepResult, ...]
    usage: Usage
    finish_reason: FinishReason
    tripwire: Tripwire | None = None
    error: RunError | None = None
    retry_count: int = 0
    api_error_retry_count: int = 0

    def unwrap(self) -> RunResult:
        """This result if the run finished, else raise RunFailedError."""
        if self.status != "finished":
            raise RunFailedError(self)
        return self


class OutputResult(msgspec.Struct, frozen=True, kw_only=True):
    """What `process_output_result` sees of the finished generation."""

    text: str
    usage: Usage
    finish_reason: FinishReason
    steps: tuple[StepResult, ...]
