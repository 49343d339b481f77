"""One model response as the loop collects it, and the run's response text.

`StepContent` gathers what a response delivered (after the stream processors) into the
parts of its assistant message; `response_text` is the text a run's result reports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.values.chunks import (
    Chunk,
    DataChunk,
    ModelFinish,
    ReasoningDelta,
    ReasoningEnd,
    ServerToolCall,
    ServerToolResult,
    SourceChunk,
    TextDelta,
    ToolCall,
)
from pipeline.values.fallback import ModelAttempt
from pipeline.values.messages import (
    DataPart,
    MessageList,
    Part,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolResultPart,
    SourcePart,
    TextPart,
    ToolCallPart,
)


class StepContent:
    """What one model response has delivered so far (after the stream processors)."""

    __slots__ = (
        "attempts", "call_ids", "calls", "finish", "leaving", "made", "parts", "reasoning",
        "renamed", "sources", "texts", "tool_calls",
    )

    def __init__(self) -> None:
        # Parts in arrival order; text/reasoning accumulate in lists joined at the end.
        self.parts: list[list[str] | Part] = []
        self.texts: dict[str, list[str]] = {}
        self.reasoning: dict[str, tuple[int, list[str]]] = {}
        self.tool_calls: list[ToolCallPart] = []
        """The calls to run, as the model made them (their chunks as the stream
        processors passed them on, with the model's name and arguments)."""
        self.call_ids: set[str] = set()  # the ids of `tool_calls`: looked up, never scanned
        self.calls = 0  # the tool calls the model sent (before the stream processors)
        # The model's calls by id (with stream hooks: `made_call`), and the calls the
        # stream processors passed on other than the model made them (what leaves the run).
        self.made: dict[str, ToolCall] | None = None
        self.leaving: dict[str, ToolCallPart] | None = None
        # Ids the model reused within this response -> the fresh id its open call got.
        self.renamed: dict[str, str] | None = None  # (made at the first reuse: rare)
        self.sources = 0
        self.finish: ModelFinish | None = None
        self.attempts: tuple[ModelAttempt, ...] = ()
        """The fallback models that failed before this response's (`loop.fallback`)."""

    def made_call(self, c: ToolCall) -> None:
        """The model made this call (before the stream processors): it runs as made."""
        if self.made is None:
            self.made = {}
        self.made[c.tool_call_id] = c

    def add(self, c: Chunk) -> None:
        t = type(c)
        if t is TextDelta:
            if TYPE_CHECKING:  # (the type test just made: no isinstance call per chunk)
                assert isinstance(c, TextDelta)
            buf = self.texts.get(c.id)
            if buf is None:
                buf = self.texts[c.id] = []
                self.parts.append(buf)
            buf.append(c.text)
        elif t is ReasoningDelta or t is ReasoningEnd:
            assert isinstance(c, ReasoningDelta | ReasoningEnd)
            entry = self.reasoning.get(c.id)
            if entry is None:
                entry = self.reasoning[c.id] = (len(self.parts), [])
                self.parts.append(ReasoningPart(""))
            if isinstance(c, ReasoningDelta):
                entry[1].append(c.text)
            else:
                self.parts[entry[0]] = ReasoningPart("", c.signature, c.redacted, c.provider)
        elif t is ToolCall:
            if TYPE_CHECKING:
                assert isinstance(c, ToolCall)
            part = ToolCallPart(c.tool_call_id, c.tool_name, c.args)
            made = self.made.get(c.tool_call_id) if self.made is not None else None
            if made is not None and made is not c:
                # A stream processor changed what leaves the run; the call runs (and the
                # model reads it back) as the model made it.
                if self.leaving is None:
                    self.leaving = {}
                self.leaving[c.tool_call_id] = part
                part = ToolCallPart(made.tool_call_id, made.tool_name, made.args)
            self.tool_calls.append(part)
            self.call_ids.add(c.tool_call_id)
            self.parts.append(part)
        elif t is SourceChunk:
            assert isinstance(c, SourceChunk)
            self.parts.append(SourcePart(c.source_id, c.url, c.title))
            self.sources += 1
        elif t is DataChunk:
            assert isinstance(c, DataChunk)
            if not c.transient:
                self.parts.append(DataPart(c.name, c.data))
        elif t is ServerToolCall:
            assert isinstance(c, ServerToolCall)
            self.parts.append(ServerToolCallPart(c.tool_call_id, c.tool_name, c.args))
        elif t is ServerToolResult:
            assert isinstance(c, ServerToolResult)
            self.parts.append(
                ServerToolResultPart(c.tool_call_id, c.tool_name, c.result, c.is_error))

    def message_parts(self, *, complete: bool) -> tuple[Part, ...]:
        """The assistant message's parts; a broken stream keeps no tool call (the
        server's own tools it keeps: they ran)."""
        reasoning_at = (
            {idx: "".join(buf) for idx, buf in self.reasoning.values()} if self.reasoning else {}
        )
        out: list[Part] = []
        for i, p in enumerate(self.parts):
            # Exact types (this class made every part): `type(p) is` costs less than a
            # failing isinstance against a Struct class (its metaclass is asked).
            if isinstance(p, list):
                out.append(TextPart("".join(p)))
            elif type(p) is ReasoningPart:
                assert isinstance(p, ReasoningPart)
                out.append(ReasoningPart(reasoning_at[i], p.signature, p.redacted, p.provider))
            elif type(p) is ToolCallPart and not complete:
                continue
            else:
                out.append(p)
        return tuple(out)

    @property
    def text(self) -> str:
        # `texts` holds the same buffers as `parts`, in the same (arrival) order.
        return "".join("".join(buf) for buf in self.texts.values()) if self.texts else ""

    @property
    def reasoning_text(self) -> str:
        if not self.reasoning:
            return ""
        return "".join("".join(buf) for _, buf in self.reasoning.values())


def response_text(ml: MessageList) -> str:
    """The text of the response's assistant messages, in order.

    Counting the response messages is a C-level scan; they are then looked for from the
    end, where the loop adds them, so a long prior history costs next to nothing.
    """
    msgs, sources = ml.messages, ml.sources
    left = sources.count("response")
    texts: list[str] = []
    i = len(sources)
    while left:
        i -= 1
        if sources[i] == "response":
            left -= 1
            m = msgs[i]
            if m.role == "assistant":
                texts.append(m.text)
    return "".join(reversed(texts))
