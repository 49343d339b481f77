"""Stream chunks: what a run streams to its caller, tagged on `type`.

The model's own events (text, reasoning, tool calls, its finish) are chunks too, so a
provider adapter and the simulator produce the same values the caller receives.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from pipeline.values.messages import JsonObject

FinishReason = Literal[
    "stop", "length", "tool-calls", "content-filter", "error", "tripwire", "cancelled", "other"
]


class Usage(msgspec.Struct, frozen=True):
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0
    """Of `input_tokens`, those read from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Of `input_tokens`, those written to the prompt cache (billed above the input rate
    where the provider charges for writes: Anthropic, Bedrock)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.reasoning_tokens - other.reasoning_tokens,
            self.cached_input_tokens - other.cached_input_tokens,
            self.cache_write_tokens - other.cache_write_tokens,
        )


class TextStart(msgspec.Struct, frozen=True, tag="text-start"):
    id: str


class TextDelta(msgspec.Struct, frozen=True, tag="text-delta"):
    id: str
    text: str


class TextEnd(msgspec.Struct, frozen=True, tag="text-end"):
    id: str


class ReasoningStart(msgspec.Struct, frozen=True, tag="reasoning-start"):
    id: str


class ReasoningDelta(msgspec.Struct, frozen=True, tag="reasoning-delta"):
    id: str
    text: str


class ReasoningEnd(msgspec.Struct, frozen=True, tag="reasoning-end"):
    """End of a reasoning block; Anthropic's signature or redacted data rides here."""

    id: str
    signature: str | None = None
    redacted: str | None = None
    provider: str | None = None
    """The route whose model signed it (`anthropic`, `google`...): the codecs send a
    signature back only to that route (None: from before routes were recorded)."""


class ToolCallDelta(msgspec.Struct, frozen=True, tag="tool-call-delta"):
    """A fragment of a tool call's JSON arguments, as it streams."""

    tool_call_id: str
    tool_name: str
    args_delta: str


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class ToolCall(msgspec.Struct, frozen=True, gc=False, tag="tool-call"):
    """A complete tool call with parsed arguments."""

    tool_call_id: str
    tool_name: str
    args: JsonObject


class ServerToolCall(msgspec.Struct, frozen=True, tag="server-tool-call"):
    """A tool the provider ran on its side (a code interpreter, a web search: the AI
    SDK's provider-executed tool call), with the input the model gave it. Kept in the
    answer and streamed; the agent never runs it and never answers it."""

    tool_call_id: str
    tool_name: str
    args: JsonObject


class ServerToolResult(msgspec.Struct, frozen=True, tag="server-tool-result"):
    """What a provider's own tool returned, as the server sent it (its call is the
    `ServerToolCall` with the same id)."""

    tool_call_id: str
    tool_name: str
    result: object
    is_error: bool = False


class ToolResult(msgspec.Struct, frozen=True, tag="tool-result"):
    tool_call_id: str
    tool_name: str
    result: object


class ToolError(msgspec.Struct, frozen=True, tag="tool-error"):
    tool_call_id: str
    tool_name: str
    error: str


class ToolApprovalRequest(msgspec.Struct, frozen=True, tag="tool-approval-request"):
    """A call waits for a person's decision (the run suspends): what to show them.
    `approval_id` is the digest a decision is bound to (`pipeline.approval`)."""

    tool_call_id: str
    tool_name: str
    args: JsonObject
    message: str
    approval_id: str


class ToolApprovalResponse(msgspec.Struct, frozen=True, tag="tool-approval-response"):
    """The decision a resumed run goes on with, for one call that waited: whether it
    was approved (an edit is), why, and who decided (`Approve.by`)."""

    approval_id: str
    tool_call_id: str
    approved: bool
    reason: str | None = None
    decided_by: str | None = None


class SourceChunk(msgspec.Struct, frozen=True, tag="source"):
    source_id: str
    url: str
    title: str | None = None


class StepStart(msgspec.Struct, frozen=True, tag="step-start"):
    step_number: int


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class ModelFinish(msgspec.Struct, frozen=True, gc=False, tag="model-finish"):
    """The model's last event for one call: why it stopped and what it cost.

    A model stream that ends without it broke: it is never a complete answer.
    """

    finish_reason: FinishReason
    usage: Usage = Usage()
    response_id: str | None = None
    model_id: str | None = None


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class StepFinish(msgspec.Struct, frozen=True, gc=False, tag="step-finish"):
    step_number: int
    finish_reason: FinishReason
    usage: Usage


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class Finish(msgspec.Struct, frozen=True, gc=False, tag="finish"):
    """The run's last chunk (unless it tripped or failed)."""

    finish_reason: FinishReason
    usage: Usage


class StepReset(msgspec.Struct, frozen=True, tag="step-reset"):
    """The step's model failed after part of its answer reached the caller, and the step
    starts over on its next fallback model (`FailoverPolicy.after_output`): drop what
    this step streamed so far. Made by the loop (no stream processor sees it)."""

    step_number: int
    model: str
    """The model that failed."""
    next_model: str
    reason: str


class OutputPartial(msgspec.Struct, frozen=True, tag="output-partial"):
    """The typed output as far as the reply has streamed (`TypedOutput(partial=True)`):
    `value` is the output type, validated, made from the text the stream processors
    released; `data` is the JSON object it was made from. The step's last one equals
    the run's `output` when the step's reply is the final answer."""

    step_number: int
    value: object
    data: JsonObject


class ErrorChunk(msgspec.Struct, frozen=True, tag="error"):
    kind: str
    message: str


class Tripwire(msgspec.Struct, frozen=True, tag="tripwire"):
    """A processor aborted the run; carried by the result and, last, by the stream."""

    reason: str
    retry: bool
    processor_id: str
    metadata: JsonObject | None = None


class DataChunk(msgspec.Struct, frozen=True, tag="data"):
    """A custom `data-*` chunk. `name` includes the prefix; a transient one is not kept."""

    name: str
    data: object
    transient: bool = False

    def __post_init__(self) -> None:
        if not self.name.startswith("data-"):
            raise ValueError(f"DataChunk name must start with 'data-', got {self.name!r}")


_Content = (
    TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolCallDelta
    | ToolCall
    | ServerToolCall
    | ServerToolResult
)
"""What a model's answer is made of, as it streams (in a model stream and a run's)."""

ModelEvent = _Content | SourceChunk | DataChunk | ModelFinish
"""What a model stream yields (a provider adapter or the simulator)."""

Chunk = (
    _Content
    | ToolResult
    | ToolError
    | ToolApprovalRequest
    | ToolApprovalResponse
    | SourceChunk
    | StepStart
    | StepFinish
    | StepReset
    | OutputPartial
    | Finish
    | ErrorChunk
    | Tripwire
    | DataChunk
)
"""What a run streams to its caller."""

chunk_encoder = msgspec.json.Encoder()
chunk_decoder: msgspec.json.Decoder[Chunk] = msgspec.json.Decoder(Chunk)
