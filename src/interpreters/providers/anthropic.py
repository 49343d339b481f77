"""The Anthropic Messages wire format.

Encoding: system, messages with text/image/document/tool_use/tool_result blocks (turns of
one role merged, tool results first, as the API requires), thinking and redacted_thinking
blocks sent back with their signatures, tools and tool_choice, max_tokens (required: a
default), settings, namespaced provider options, structured output as a forced tool.
Decoding: message_start, content_block_start/delta/stop (text_delta, input_json_delta,
thinking_delta, signature_delta), message_delta, message_stop, ping, error; and the
non-streaming message body into the same events. A tool the server runs itself
(`server_tool_use`, `mcp_tool_use`) and its `*_tool_result` block come out as
`ServerToolCall` / `ServerToolResult`, never as a call for the agent to run; they are
not sent back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

from interpreters.providers import codec
from interpreters.providers.codec import ForcedToolCodec, ForcedToolDecoder, JsonDict
from interpreters.providers.sse import SseEvent
from pipeline.values import chunks  # the events; those made per event are imported by name
from pipeline.values.chunks import (
    FinishReason,
    ModelEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from pipeline.values.messages import FilePart, ToolResultPart
from pipeline.values.model import ModelRequest, PromptCache, ToolChoiceTool
from pipeline.values.sanitize import ANTHROPIC, SanitizeProfile

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicOptions(msgspec.Struct, frozen=True):
    default_max_tokens: int = 4096
    """Anthropic requires max_tokens; this is sent when the request sets none."""
    version: str = ANTHROPIC_VERSION
    option_sections: tuple[str, ...] = ("anthropic",)
    profile: SanitizeProfile = ANTHROPIC


# --- encoding -------------------------------------------------------------------------


def _file_block(part: FilePart) -> JsonDict:
    mt = part.media_type
    source: JsonDict = (
        {"type": "url", "url": part.data}
        if part.is_url
        else {"type": "base64", "media_type": mt, "data": part.data}
    )
    if mt.startswith("image/"):
        return {"type": "image", "source": source}
    if mt == "application/pdf":
        return {"type": "document", "source": source}
    raise codec.unsupported_file("Anthropic", mt)


def _tool_result(p: ToolResultPart) -> JsonDict:
    block: JsonDict = {
        "type": "tool_result",
        "tool_use_id": p.tool_call_id,
        "content": codec.json_text(p.result),
    }
    if p.is_error:
        block["is_error"] = True
    return block


_WIRE = codec.BlockWire(
    text=lambda text: {"type": "text", "text": text},
    tool_result=_tool_result,
    tool_call=lambda p: {
        "type": "tool_use", "id": p.tool_call_id, "name": p.tool_name, "input": dict(p.args)
    },
    thinking=lambda text, signature: {
        "type": "thinking", "thinking": text, "signature": signature
    },
    redacted=lambda data: {"type": "redacted_thinking", "data": data},
)


def _is_result(block: JsonDict) -> bool:
    return block["type"] == "tool_result"


def _messages(request: ModelRequest, route: str) -> tuple[list[JsonDict], list[str]]:
    """Wire messages (consecutive turns of one role merged) and hoisted system texts."""
    return codec.merge_turns(
        request, lambda m: codec.content_blocks(m, route, _WIRE, _file_block), _is_result
    )


def _default_max_tokens(request: ModelRequest, options: AnthropicOptions) -> int:
    """The default, raised above a thinking budget (the API wants max_tokens > budget)."""
    budget: object = None
    for section in options.option_sections:
        opts = (request.provider_options or {}).get(section)
        thinking = opts.get("thinking") if isinstance(opts, Mapping) else None
        if isinstance(thinking, Mapping):
            budget = thinking.get("budget_tokens")
    if isinstance(budget, int) and budget >= options.default_max_tokens:
        return budget + options.default_max_tokens
    return options.default_max_tokens


def encode_request(
    request: ModelRequest, *, model: str, stream: bool, options: AnthropicOptions
) -> tuple[JsonDict, str | None]:
    """The JSON body (as a dict) and the structured-output tool name, if any."""
    messages, system = _messages(request, options.option_sections[0])
    s = request.model_settings
    body: JsonDict = {"model": model, "messages": messages}
    body["max_tokens"] = (
        s.max_tokens if s.max_tokens is not None else _default_max_tokens(request, options)
    )
    if system:
        body["system"] = (
            system[0] if len(system) == 1 else [{"type": "text", "text": t} for t in system]
        )
    tools: list[JsonDict] = [
        {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
        for t in request.tools
    ]
    tool_choice: JsonDict | None = None
    if tools:
        tc = request.tool_choice
        tool_choice = (
            {"type": "tool", "name": tc.tool_name}
            if isinstance(tc, ToolChoiceTool)
            else {"type": {"auto": "auto", "required": "any", "none": "none"}[tc]}
        )
    json_tool: str | None = None
    so = request.structured_output
    if so is not None:
        # No JSON mode in this API: a tool whose input schema is the output schema,
        # forced, and decoded back into text.
        json_tool = codec.output_tool_name(so.name)
        tools.append(
            {
                "name": json_tool,
                "description": codec.OUTPUT_TOOL_DESCRIPTION,
                "input_schema": dict(so.schema),
            }
        )
        # With tools of its own the model must call one: those, or the output tool.
        tool_choice = (
            {"type": "any"}
            if request.tools and request.tool_choice in ("auto", "required")
            else tool_choice
            if request.tools and isinstance(request.tool_choice, ToolChoiceTool)
            else {"type": "tool", "name": json_tool}
        )
    if tools:
        body["tools"] = tools
        body["tool_choice"] = tool_choice
    if s.prompt_cache is not None:
        _cache_breakpoints(body, s.prompt_cache)
    codec.put_given(body, (
        ("temperature", s.temperature), ("top_p", s.top_p),
        ("stop_sequences", list(s.stop) if s.stop is not None else None),
    ))
    body["stream"] = stream
    codec.merge_options(body, request.provider_options, options.option_sections)
    return body, json_tool


_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})


def _cache_breakpoints(body: JsonDict, cache: PromptCache) -> None:
    """`cache_control` after the tools, the system prompt and the last messages, so the
    prefix up to each is read from the cache by the next call that shares it (a retry's
    feedback and the next turn go after the conversation, which stays as it was)."""
    mark: JsonDict = {"type": "ephemeral"} if cache.ttl == "5m" else {
        "type": "ephemeral", "ttl": cache.ttl,
    }
    tools = body.get("tools")
    if cache.tools and isinstance(tools, list) and tools:
        tools[-1] = {**tools[-1], "cache_control": mark}
    system = body.get("system")
    if cache.system and system:
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
        assert isinstance(blocks, list)
        blocks[-1] = {**blocks[-1], "cache_control": mark}
        body["system"] = blocks
    messages = body["messages"]
    assert isinstance(messages, list)
    for m in messages[len(messages) - cache.messages :] if cache.messages else ():
        content = m["content"]
        for i in range(len(content) - 1, -1, -1):
            if content[i]["type"] not in _UNCACHEABLE:
                content[i] = {**content[i], "cache_control": mark}
                break


# --- wire types for decoding ----------------------------------------------------------


class _OutputDetails(msgspec.Struct, frozen=True):
    thinking_tokens: int | None = None


class _Usage(msgspec.Struct, frozen=True):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    output_tokens_details: _OutputDetails | None = None


class _Block(msgspec.Struct, frozen=True):
    type: str
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, object] | None = None
    tool_use_id: str | None = None
    """A server tool's result block: the id of the call it answers."""
    content: object = None
    is_error: bool | None = None


_SERVER_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})
"""Blocks of a tool the server runs itself (web search, code execution, MCP)."""


class _Delta(msgspec.Struct, frozen=True):
    type: str | None = None
    text: str | None = None
    partial_json: str | None = None
    thinking: str | None = None
    signature: str | None = None
    stop_reason: str | None = None


class _MessageHead(msgspec.Struct, frozen=True):
    id: str | None = None
    model: str | None = None
    usage: _Usage | None = None


class _Event(msgspec.Struct, frozen=True):
    # One flat shape for every event type: unknown types and fields decode and are
    # ignored, where a tagged union would reject the API's future additions.
    type: str
    index: int | None = None
    message: _MessageHead | None = None
    content_block: _Block | None = None
    delta: _Delta | None = None
    usage: _Usage | None = None


class _Response(msgspec.Struct, frozen=True):
    type: str | None = None
    id: str | None = None
    model: str | None = None
    content: list[_Block] | None = None
    stop_reason: str | None = None
    usage: _Usage | None = None


_event = msgspec.json.Decoder(_Event)
_response = msgspec.json.Decoder(_Response)

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "refusal": "content-filter",
}


def finish_reason(raw: str | None, *, json_tool_used: bool) -> FinishReason:
    return codec.forced_tool_reason(_FINISH, raw, json_tool_used=json_tool_used)


class _UsageAcc:
    __slots__ = ("cache_creation", "cache_read", "input", "output", "thinking")

    def __init__(self) -> None:
        self.input = self.output = self.cache_read = self.cache_creation = self.thinking = 0

    def update(self, u: _Usage | None) -> None:
        if u is None:
            return
        # message_delta carries cumulative counts; a field it lacks keeps its value.
        if u.input_tokens is not None:
            self.input = u.input_tokens
        if u.output_tokens is not None:
            self.output = u.output_tokens
        if u.cache_read_input_tokens is not None:
            self.cache_read = u.cache_read_input_tokens
        if u.cache_creation_input_tokens is not None:
            self.cache_creation = u.cache_creation_input_tokens
        details = u.output_tokens_details
        if details is not None and details.thinking_tokens is not None:
            self.thinking = details.thinking_tokens  # part of output_tokens, as on OpenAI

    def usage(self) -> chunks.Usage:
        # input_tokens counts uncached input only; report the total, as OpenAI does.
        return chunks.Usage(
            input_tokens=self.input + self.cache_read + self.cache_creation,
            output_tokens=self.output,
            reasoning_tokens=self.thinking,
            cached_input_tokens=self.cache_read,
            cache_write_tokens=self.cache_creation,
        )


class _Open:
    __slots__ = ("args", "id", "initial", "kind", "name", "redacted", "signature", "text_id")

    def __init__(
        self, kind: Literal["text", "reasoning", "tool", "json", "server", "other"]
    ) -> None:
        self.kind = kind
        self.id = ""
        self.name = ""
        self.args: list[str] = []
        self.initial: dict[str, object] = {}
        self.signature: list[str] = []
        self.redacted: str | None = None
        self.text_id: str | None = None


class AnthropicStreamDecoder(ForcedToolDecoder):
    """Messages stream events -> ModelEvents."""

    def __init__(
        self, *, json_tool: str | None = None, status: int = 200, request_id: str | None = None
    ) -> None:
        super().__init__(json_tool=json_tool, status=status, request_id=request_id)
        self._blocks: dict[int, _Open] = {}
        self._usage = _UsageAcc()
        self._server_tools: dict[str, str] = {}
        """The names of the tools the server ran, by their ids (their results name none)."""

    def feed(self, event: SseEvent) -> list[ModelEvent]:
        out = self._feed(event)
        if out:
            self._started = True
        return out

    def _feed(self, sse: SseEvent) -> list[ModelEvent]:
        try:
            ev = _event.decode(sse.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            if sse.event == "error":
                raise self._error(sse.data.encode()) from None
            raise self._bad_frame("Messages event", e, sse.data) from None
        t = ev.type
        if t == "content_block_delta":
            return self._block_delta(ev)
        if t == "content_block_start":
            return self._block_start(ev)
        if t == "content_block_stop":
            return self._block_stop(ev)
        if t == "message_start":
            if ev.message is not None:
                self._response_id = ev.message.id
                self._model_id = ev.message.model
                self._usage.update(ev.message.usage)
            return []
        if t == "message_delta":
            if ev.delta is not None and ev.delta.stop_reason is not None:
                self._stop_reason = ev.delta.stop_reason
            self._usage.update(ev.usage)
            return []
        if t == "message_stop":
            return self._message_stop()
        if t == "error" or sse.event == "error":
            raise self._error(sse.data.encode())
        return []  # ping, and event types this decoder does not know

    def _need(self, ev: _Event) -> tuple[int, _Open]:
        block = self._blocks.get(ev.index if ev.index is not None else -1)
        if block is None or ev.index is None:
            raise self._invalid(f"{ev.type} for content block {ev.index}, which was not started")
        return ev.index, block

    def _block_start(self, ev: _Event) -> list[ModelEvent]:
        cb = ev.content_block
        if cb is None or ev.index is None:
            raise self._invalid("content_block_start without a block")
        i = ev.index
        out: list[ModelEvent] = []
        if cb.type == "text":
            self._blocks[i] = _Open("text")
            out.append(chunks.TextStart(f"text-{i}"))
            if cb.text:
                out.append(TextDelta(f"text-{i}", cb.text))
        elif cb.type in ("thinking", "redacted_thinking"):
            b = _Open("reasoning")
            b.redacted = cb.data if cb.type == "redacted_thinking" else None
            if cb.signature:
                b.signature.append(cb.signature)
            self._blocks[i] = b
            out.append(chunks.ReasoningStart(f"reasoning-{i}"))
            if cb.thinking:
                out.append(ReasoningDelta(f"reasoning-{i}", cb.thinking))
        elif cb.type == "tool_use":
            is_json = self._json_tool is not None and cb.name == self._json_tool
            b = _Open("json" if is_json else "tool")
            b.id, b.name, b.initial = cb.id or f"toolu_{i}", cb.name or "", cb.input or {}
            self._blocks[i] = b
            if is_json:
                self._json_used = True
                out.append(chunks.TextStart(f"text-{i}"))
            else:
                out.append(ToolCallDelta(b.id, b.name, ""))
        elif cb.type in _SERVER_CALLS:
            # The server runs it: a record, whole at its end, never a call to run.
            b = _Open("server")
            b.id, b.name, b.initial = cb.id or f"srvtoolu_{i}", cb.name or "", cb.input or {}
            self._server_tools[b.id] = b.name
            self._blocks[i] = b
        else:
            if cb.type.endswith("_tool_result") and cb.tool_use_id is not None:
                # What a server tool returned, whole (web_search_tool_result...); an
                # error is a `*_error` content or, for MCP, `is_error`.
                cid, content = cb.tool_use_id, cb.content
                name = self._server_tools.get(cid) or cb.type.removesuffix("_tool_result")
                failed = bool(cb.is_error) or (
                    isinstance(content, dict) and str(content.get("type", "")).endswith("_error"))
                out.append(chunks.ServerToolResult(cid, name, content, failed))
            self._blocks[i] = _Open("other")  # and future block types
        return out

    def _block_delta(self, ev: _Event) -> list[ModelEvent]:
        i = ev.index
        b = self._blocks.get(i) if i is not None else None
        if b is None:
            i, b = self._need(ev)  # raises: no such block
        d = ev.delta or _Delta()
        if b.kind == "text":
            if d.text:
                if b.text_id is None:
                    b.text_id = f"text-{i}"  # made once per block, not per delta
                return [TextDelta(b.text_id, d.text)]
            return []
        if b.kind == "reasoning":
            if d.signature:
                b.signature.append(d.signature)
            if d.thinking:
                return [ReasoningDelta(f"reasoning-{i}", d.thinking)]
        elif b.kind in ("tool", "json", "server") and d.partial_json:
            b.args.append(d.partial_json)
            if b.kind == "server":
                return []
            if b.kind == "json":
                return [TextDelta(f"text-{i}", d.partial_json)]
            return [ToolCallDelta(b.id, b.name, d.partial_json)]
        return []

    def _block_stop(self, ev: _Event) -> list[ModelEvent]:
        i, b = self._need(ev)
        del self._blocks[i]
        return self._end_block(i, b)

    def _end_block(self, i: int, b: _Open) -> list[ModelEvent]:
        if b.kind == "text":
            return [chunks.TextEnd(f"text-{i}")]
        if b.kind == "reasoning":
            return [self._reasoning_end(f"reasoning-{i}", "".join(b.signature) or None, b.redacted)]
        if b.kind == "json":
            if not b.args and b.initial:  # a whole input with no deltas (non-streamed)
                text = codec.json_text(b.initial)
                return [TextDelta(f"text-{i}", text), chunks.TextEnd(f"text-{i}")]
            return [chunks.TextEnd(f"text-{i}")]
        if b.kind == "tool":
            raw = "".join(b.args)
            args = codec.parse_tool_args(raw) if raw else dict(b.initial)
            if args is None:
                # Maybe cut by max_tokens: message_delta says so; decided at message_stop.
                self._truncated.append((b.name, raw))
                return []
            return [chunks.ToolCall(b.id, b.name, args)]
        if b.kind == "server":
            # It ran already: input that does not parse is kept as it came, not refused.
            raw = "".join(b.args)
            ran = codec.parse_tool_args(raw) if raw else dict(b.initial)
            return [chunks.ServerToolCall(b.id, b.name, {"input": raw} if ran is None else ran)]
        return []

    def _message_stop(self) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        for i in sorted(self._blocks):  # blocks the server never stopped
            out.extend(self._end_block(i, self._blocks.pop(i)))
        self._check_truncated()
        out.append(
            chunks.ModelFinish(
                finish_reason(self._stop_reason, json_tool_used=self._json_used),
                self._usage.usage(),
                self._response_id,
                self._model_id,
            )
        )
        self.done = True
        return out


def decode_message(
    body: bytes,
    *,
    json_tool: str | None = None,
    status: int = 200,
    request_id: str | None = None,
) -> list[ModelEvent]:
    """A non-streaming Messages response as the same events a stream gives."""
    resp = codec.decode_response(
        _response, body, "message", lambda r: r.type == "error",
        status=status, request_id=request_id,
    )
    if resp.content is None:
        raise codec.invalid_response(
            status, "the response has no content", started=False, request_id=request_id
        )
    # Replay the blocks through the stream decoder: one set of rules for both paths.
    dec = AnthropicStreamDecoder(json_tool=json_tool, status=status, request_id=request_id)
    dec._response_id, dec._model_id = resp.id, resp.model
    dec._usage.update(resp.usage)
    dec._stop_reason = resp.stop_reason
    out: list[ModelEvent] = []
    for i, block in enumerate(resp.content):
        out += dec._block_start(_Event("content_block_start", index=i, content_block=block))
        out += dec._block_stop(_Event("content_block_stop", index=i))
    out += dec._message_stop()
    return out


class AnthropicCodec(ForcedToolCodec[AnthropicOptions]):
    """The Codec for `/messages`."""

    options_type = AnthropicOptions
    url_path = "/messages"
    key_header, key_prefix = "x-api-key", ""
    tool_decoder = AnthropicStreamDecoder
    decode_tool_whole = staticmethod(decode_message)

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {"anthropic-version": self.options.version, **super().headers(api_key)}

    def body(
        self, request: ModelRequest, *, model: str, stream: bool
    ) -> tuple[JsonDict, str | None]:
        return encode_request(request, model=model, stream=stream, options=self.options)


MESSAGES = codec.wire_format("anthropic", AnthropicCodec, AnthropicOptions)
"""The Anthropic Messages wire format, for the table of wire formats (providers/table.py)."""
