"""What one model call is: its settings, its request, and how it can fail."""

from __future__ import annotations

from typing import Literal

import msgspec

from pipeline.values.messages import JsonObject, Message, SystemMessage


class ToolSpec(msgspec.Struct, frozen=True):
    """What a provider is told about a tool."""

    name: str
    description: str
    parameters: JsonObject


class ToolChoiceTool(msgspec.Struct, frozen=True, tag="tool"):
    """Force a call of one named tool."""

    tool_name: str


ToolChoice = Literal["auto", "none", "required"] | ToolChoiceTool


class PromptCache(msgspec.Struct, frozen=True, omit_defaults=True):
    """Ask the provider to cache the request's stable prefix, where it takes hints.

    Anthropic (and Bedrock) cache up to explicit breakpoints: one after the tools, one
    after the system prompt, one on each of the last `messages` messages, so a
    conversation's history is read from the cache turn after turn. OpenAI and Gemini
    cache long prefixes by themselves and ignore this; every provider reports what it
    read from (and wrote to) the cache in `Usage`.
    """

    tools: bool = True
    system: bool = True
    messages: int = 1
    """Breakpoints on the last this many messages (0 to 2: the API allows four in all)."""
    ttl: Literal["5m", "1h"] = "5m"

    def __post_init__(self) -> None:
        for name in ("tools", "system"):
            if type(getattr(self, name)) is not bool:
                raise ValueError(f"PromptCache.{name} must be True or False")
        if type(self.messages) is not int or not 0 <= self.messages <= 2:
            raise ValueError(f"PromptCache.messages must be 0, 1 or 2, got {self.messages!r}")
        if self.ttl not in ("5m", "1h"):
            raise ValueError(f"PromptCache.ttl must be '5m' or '1h', got {self.ttl!r}")


class ModelSettings(msgspec.Struct, frozen=True, omit_defaults=True):
    """The sampling settings of a call; each is checked here, when it is made."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    prompt_cache: PromptCache | None = None

    def __post_init__(self) -> None:
        for name, low, high in (("temperature", 0.0, 2.0), ("top_p", 0.0, 1.0)):
            v = getattr(self, name)
            if v is not None and (type(v) not in (int, float) or not low <= v <= high):
                raise ValueError(f"ModelSettings.{name} must be a number from {low:g} to "
                                 f"{high:g}, got {v!r}")
        for name in ("max_tokens", "seed"):
            v = getattr(self, name)
            if v is not None and type(v) is not int:
                raise ValueError(f"ModelSettings.{name} must be an int, got {v!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"ModelSettings.max_tokens must be at least 1, got {self.max_tokens}")
        stop = self.stop
        if stop is not None and not (
            type(stop) is tuple and all(type(x) is str and x for x in stop)
        ):
            raise ValueError(f"ModelSettings.stop must be a tuple of non-empty strings, "
                             f"got {stop!r}")
        if self.prompt_cache is not None and type(self.prompt_cache) is not PromptCache:
            raise ValueError("ModelSettings.prompt_cache must be a PromptCache")


OutputMode = Literal["auto", "native", "tool", "prompted"]
"""How structured output is asked for:

- `native`: the provider's own JSON-schema output (OpenAI's `response_format` and
  `text.format`, Gemini's `responseSchema`); a route without one refuses it;
- `tool`: a forced final-answer tool whose input schema is the output's, its input
  decoded back as the answer (every built-in wire format);
- `prompted`: the schema in the instructions and the JSON parsed from the reply's text
  (any model, the simulator's too);
- `auto`: each wire format's choice (native where there is one, else the tool)."""

OUTPUT_MODES: tuple[OutputMode, ...] = ("auto", "native", "tool", "prompted")


class StructuredOutput(msgspec.Struct, frozen=True):
    """Ask the model for JSON matching `schema`, in `mode` (`OutputMode`)."""

    schema: JsonObject
    name: str = "output"
    strict: bool = True
    mode: OutputMode = "auto"

    def __post_init__(self) -> None:
        if self.mode not in OUTPUT_MODES:
            raise ValueError(f"structured output mode must be one of {OUTPUT_MODES}, "
                             f"got {self.mode!r}")


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
