"""What one model call is: its settings, its request, and how it can fail."""

from __future__ import annotations

from typing import Literal

import msgspec

from pipeline.messages import JsonObject, Message, SystemMessage
from pipeline.tools import ToolSpec


class ToolChoiceTool(msgspec.Struct, frozen=True, tag="tool"):
    """Force a call of one named tool."""

    tool_name: str


ToolChoice = Literal["auto", "none", "required"] | ToolChoiceTool


class ModelSettings(msgspec.Struct, frozen=True, omit_defaults=True):
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None


class StructuredOutput(msgspec.Struct, frozen=True):
    """Ask the model for JSON matching `schema` (response_format / a forced tool)."""

    schema: JsonObject
    name: str = "output"
    strict: bool = True


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class ModelRequest(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """Everything one model call needs; what the provider codecs encode."""

    model: str
    system: tuple[SystemMessage, ...]
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    model_settings: ModelSettings = ModelSettings()
    provider_options: JsonObject | None = None
    structured_output: StructuredOutput | None = None


class ApiError(msgspec.Struct, frozen=True, kw_only=True):
    """A provider refused or failed a call.

    `retryable` errors (429, 5xx, connection failures before the first byte) are retried
    by the loop's backoff policy and never reach `process_api_error`; the others do.
    """

    status: int | None
    message: str
    error_type: str | None = None
    code: str | None = None
    request_id: str | None = None
    retryable: bool = False
    retry_after: float | None = None
    body: str | None = None

    def __str__(self) -> str:
        if self.status is None and self.error_type == "configuration":
            return f"configuration: {self.message}"  # no call was made
        where = f"HTTP {self.status}" if self.status is not None else "connection"
        kind = f" {self.error_type}" if self.error_type else ""
        return f"{where}{kind}: {self.message}"


class ModelFailed(msgspec.Struct, frozen=True, tag="model-failed"):
    """An interpreter's reply when a model call or stream fails."""

    error: ApiError
    started: bool = False
    """True when the stream had already delivered events: it broke mid-way."""


class ModelEnded(msgspec.Struct, frozen=True, tag="model-ended"):
    """An interpreter's reply when the model stream ended (with or without ModelFinish)."""


RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUSES or status >= 500
