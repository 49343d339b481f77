"""The AWS Bedrock Converse wire format (`/model/{id}/converse`, `/converse-stream`).

Encoding: system, messages with text/image/document/video/toolUse/toolResult/reasoningContent
blocks (turns of one role merged, tool results first), toolConfig (schemas inlined, as
Bedrock wants them self-contained) and toolChoice, inferenceConfig, namespaced provider
options (`additionalModelRequestFields`, `guardrailConfig`...), structured output as a
forced tool. Decoding: the AWS event-stream framing (`application/vnd.amazon.eventstream`,
parsed by botocore, a sound whole frame of string headers read with the same checks by a
faster path) of messageStart, contentBlockStart/Delta/Stop, messageStop and
metadata events, exception frames (throttlingException...) as typed errors; and the
non-streaming body into the same events. A tool the server runs itself (a toolUse of type
`server_tool_use`, Nova's code interpreter) and its toolResult come out as
`ServerToolCall` / `ServerToolResult`, never as a call for the agent to run; they are
not sent back. Signing: SigV4 over the exact bytes sent, with
credentials from botocore's chain (`sigv4_signer`), or a Bedrock API key as a bearer
token. botocore is the optional extra `bedrock`, imported when a route uses it.
"""

from __future__ import annotations

import itertools
import re
import struct
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote, urlsplit

import msgspec

from interpreters.providers import codec
from interpreters.providers.codec import (
    Encoded,
    ForcedToolCodec,
    ForcedToolDecoder,
    Framer,
    Framing,
    JsonDict,
    RequestSigner,
    SignerFactory,
)
from interpreters.providers.provider import ProviderError
from interpreters.providers.sse import FrameError, SseEvent, SseLimitError
from pipeline.values import chunks  # the events; those made per event are imported by name
from pipeline.values.chunks import (
    FinishReason,
    ModelEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from pipeline.values.messages import FilePart, ToolCallPart, ToolResultPart
from pipeline.values.model import (
    ApiError,
    ModelRequest,
    PromptCache,
    ToolChoiceTool,
    is_retryable_status,
)
from pipeline.values.output_type import inline_refs
from pipeline.values.sanitize import BEDROCK, SanitizeProfile

if TYPE_CHECKING:
    from botocore.credentials import Credentials, ReadOnlyCredentials

EXTRA = "pipeline-agents[bedrock]"


class BedrockOptions(msgspec.Struct, frozen=True):
    default_max_tokens: int | None = None
    """Sent as inferenceConfig.maxTokens when the request sets none (None: the model's)."""
    option_sections: tuple[str, ...] = ("bedrock",)
    profile: SanitizeProfile = BEDROCK


def _botocore_missing(e: ImportError) -> ApiError:
    return ApiError(
        status=None, error_type="configuration", retryable=False,
        message=f"the Bedrock route needs botocore (SigV4 and the event-stream framing): "
        f"pip install '{EXTRA}' ({e})",
    )


# --- encoding -------------------------------------------------------------------------

_IMAGE = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
_DOCUMENT = {
    "application/pdf": "pdf", "text/plain": "txt", "text/csv": "csv", "text/html": "html",
    "text/markdown": "md",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
}
_VIDEO = {
    "video/mp4": "mp4", "video/quicktime": "mov", "video/webm": "webm",
    "video/x-matroska": "mkv", "video/x-flv": "flv", "video/mpeg": "mpeg",
    "video/x-ms-wmv": "wmv", "video/3gpp": "three_gp",
}
_DOC_NAME = re.compile(r"[^a-zA-Z0-9 ()\[\]-]+")


def _file_block(part: FilePart, n: int) -> JsonDict:
    mt = part.media_type
    if part.is_url:
        # Converse takes bytes or an s3:// location, never an https URL.
        if not part.data.startswith("s3://"):
            raise codec.unsupported_file("Bedrock Converse", mt, " by URL (only s3:// locations)")
        source: JsonDict = {"s3Location": {"uri": part.data}}
    else:
        source = {"bytes": part.data}  # base64, as the JSON protocol carries blobs
    if mt in _IMAGE:
        return {"image": {"format": _IMAGE[mt], "source": source}}
    if mt in _VIDEO:
        return {"video": {"format": _VIDEO[mt], "source": source}}
    if mt in _DOCUMENT:
        # A document name: letters, digits, spaces, ()[]- only, unique in the request.
        name = " ".join(_DOC_NAME.sub(" ", part.filename or "").split())[:180]
        return {"document": {"format": _DOCUMENT[mt], "name": name or f"document {n}",
                             "source": source}}
    raise codec.unsupported_file("Bedrock Converse", mt)


_WIRE = codec.BlockWire(
    text=lambda text: {"text": text},
    tool_result=lambda p: {"toolResult": {
        "toolUseId": p.tool_call_id,
        "content": [{"text": codec.json_text(p.result)}],
        "status": "error" if p.is_error else "success",
    }},
    tool_call=lambda p: {
        "toolUse": {"toolUseId": p.tool_call_id, "name": p.tool_name, "input": dict(p.args)}
    },
    thinking=lambda text, signature: {
        "reasoningContent": {"reasoningText": {"text": text, "signature": signature}}
    },
    redacted=lambda data: {"reasoningContent": {"redactedContent": data}},
)


def _is_result(block: JsonDict) -> bool:
    return "toolResult" in block


def _messages(request: ModelRequest, route: str) -> tuple[list[JsonDict], list[str]]:
    """Wire messages (turns of one role merged) and hoisted system texts."""
    files = itertools.count(1)  # numbers unnamed documents: names are unique in a request

    def file_block(part: FilePart) -> JsonDict:
        return _file_block(part, next(files))

    return codec.merge_turns(
        request, lambda m: codec.content_blocks(m, route, _WIRE, file_block), _is_result
    )


def _schema(schema: Mapping[str, object]) -> JsonDict:
    # Self-contained ($refs inlined) and an object at the top, as toolSpec wants it.
    out = inline_refs(schema)
    out.setdefault("type", "object")
    return {"json": out}


def _spec(name: str, description: str, schema: Mapping[str, object]) -> JsonDict:
    spec: JsonDict = {"name": name, "inputSchema": _schema(schema)}
    if description:
        spec["description"] = description  # Converse rejects an empty one
    return {"toolSpec": spec}


def encode_request(
    request: ModelRequest, *, options: BedrockOptions
) -> tuple[JsonDict, str | None]:
    """The JSON body (as a dict) and the structured-output tool name, if any. The model
    and the streaming are in the URL, not the body."""
    messages, system = _messages(request, options.option_sections[0])
    has_tool_blocks = any(isinstance(p, ToolCallPart | ToolResultPart)
                          for m in request.messages for p in m.parts)
    s = request.model_settings
    body: JsonDict = {"messages": messages}
    system = [t for t in system if t]  # Converse rejects empty text
    if system:
        body["system"] = [{"text": t} for t in system]
    inference: JsonDict = {}
    codec.put_given(inference, (
        ("maxTokens", s.max_tokens if s.max_tokens is not None else options.default_max_tokens),
        ("temperature", s.temperature), ("topP", s.top_p),
        ("stopSequences", list(s.stop) if s.stop is not None else None),
    ))
    if inference:
        body["inferenceConfig"] = inference
    tc = request.tool_choice
    # Converse has no "none": the tools go only where the conversation needs them
    # (toolConfig is required once toolUse/toolResult blocks are in it), unforced.
    tools = [_spec(t.name, t.description, t.parameters) for t in request.tools
             if tc != "none" or has_tool_blocks]
    choice: JsonDict | None = None
    if tools and tc != "none":
        choice = (
            {"tool": {"name": tc.tool_name}} if isinstance(tc, ToolChoiceTool)
            else {"any": {}} if tc == "required" else {"auto": {}}
        )
    json_tool: str | None = None
    so = request.structured_output
    if so is not None:
        # The answer rides on a forced tool whose input schema is the output schema.
        json_tool = codec.output_tool_name(so.name)
        tools.append(_spec(json_tool, codec.OUTPUT_TOOL_DESCRIPTION, so.schema))
        choice = (
            {"any": {}} if request.tools and tc in ("auto", "required")
            else choice if request.tools and isinstance(tc, ToolChoiceTool)
            else {"tool": {"name": json_tool}}
        )
    if tools:
        config: JsonDict = {"tools": tools}
        if choice is not None:
            config["toolChoice"] = choice
        body["toolConfig"] = config
    if s.prompt_cache is not None:
        _cache_points(body, s.prompt_cache)
    codec.merge_options(body, request.provider_options, options.option_sections)
    return body, json_tool


def _cache_points(body: JsonDict, cache: PromptCache) -> None:
    """A cachePoint block after the tools, the system prompt and the last messages, as
    Anthropic's breakpoints (Converse marks a point with a block of its own)."""
    point: JsonDict = {"cachePoint": {"type": "default"} if cache.ttl == "5m" else {
        "type": "default", "ttl": cache.ttl}}
    config = body.get("toolConfig")
    if cache.tools and isinstance(config, dict) and isinstance(config.get("tools"), list):
        config["tools"].append(point)
    system = body.get("system")
    if cache.system and isinstance(system, list):
        system.append(point)
    messages = body["messages"]
    assert isinstance(messages, list)
    for m in messages[len(messages) - cache.messages :] if cache.messages else ():
        m["content"].append(point)


# --- the event-stream framing ---------------------------------------------------------


def _frame(headers: Mapping[str, str], payload: bytes) -> SseEvent:
    """One frame as an SseEvent: an event's `:event-type` and JSON payload; an exception
    as event "exception" with its `:exception-type` as `id`; an error as event "error"
    with its `:error-code` as `id` and its `:error-message` as data."""
    h = headers  # (string headers: what Converse sends)
    text = payload.decode("utf-8", "replace")
    kind = h.get(":message-type", "event")
    if kind == "event":
        return SseEvent(text, h.get(":event-type", ""))
    if kind == "exception":
        return SseEvent(text, "exception", h.get(":exception-type", ""))
    return SseEvent(h.get(":error-message", text), "error", h.get(":error-code", ""))


_MAX_HEADERS = 128 << 10
_MAX_PAYLOAD = 24 << 20
"""botocore's caps on one frame's headers and payload (`EventStreamBuffer`)."""

_prelude = struct.Struct(">III").unpack_from


def _whole_frame(chunk: bytes) -> SseEvent | None:
    """A chunk that is exactly one frame (its length said so), parsed here when it is
    sound and its headers are all strings, as every frame of Converse is; None for
    anything else, which botocore's parser then reads (and says what is wrong with it).
    The same checks as botocore's (both CRCs, the caps, no header twice) in one pass
    over the bytes: its parser makes a dozen Python calls per frame, more than all the
    rest of a streamed chunk's decoding."""
    n = len(chunk)
    _, size, crc = _prelude(chunk)
    end = 12 + size
    if (size > _MAX_HEADERS or end > n - 4 or n - 4 - end > _MAX_PAYLOAD
            or zlib.crc32(chunk[:8]) != crc or zlib.crc32(chunk[:-4]) != _u32(chunk, n - 4)[0]):
        return None
    headers: dict[str, str] = {}
    at = 12
    try:
        while at < end:
            name_end = at + 1 + chunk[at]
            if name_end + 3 > end or chunk[name_end] != 7:  # 7: a string value
                return None
            value_end = name_end + 3 + int.from_bytes(chunk[name_end + 1 : name_end + 3], "big")
            if value_end > end:
                return None
            name = chunk[at + 1 : name_end].decode()
            if name in headers:
                return None
            headers[name] = chunk[name_end + 3 : value_end].decode()
            at = value_end
    except UnicodeDecodeError:
        return None
    return _frame(headers, chunk[end:-4])


_u32 = struct.Struct(">I").unpack_from


class EventStreamFramer:
    """AWS event-stream frames (prelude, headers, payload, CRCs) by botocore's parser.
    Each frame's declared length is read as its bytes arrive and refused over
    `max_event`, before the frame is buffered whole."""

    __slots__ = ("_buffer", "_failure", "_head", "_left", "_max", "_parser_error")

    def __init__(self, max_event: int) -> None:
        try:
            from botocore.eventstream import EventStreamBuffer, ParserError
        except ImportError as e:
            raise ProviderError(_botocore_missing(e)) from None
        self._buffer = EventStreamBuffer()
        self._parser_error = ParserError
        self._max = max_event
        self._head = b""
        """The first bytes of the next frame's 4-byte length, while it is incomplete."""
        self._left = 0
        """Bytes of the current frame still to come (0: the next byte starts a frame)."""
        self._failure: Exception | None = None

    def _measure(self, chunk: bytes) -> None:
        i, n = 0, len(chunk)
        while i < n:
            if self._left:
                step = min(self._left, n - i)
                self._left -= step
                i += step
                continue
            need = 4 - len(self._head)
            self._head += chunk[i : i + need]
            i += need
            if len(self._head) == 4:
                total = int.from_bytes(self._head, "big")
                self._head = b""
                self._check(total)
                self._left = total - 4

    def _check(self, total: int) -> None:
        if total > self._max:
            raise SseLimitError(f"a stream frame of {total} bytes is over its cap of {self._max}")
        if total < 16:
            raise FrameError(f"a frame cannot be {total} bytes long")

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if self._failure is not None:
            raise self._failure
        failure: Exception | None = None
        n = len(chunk)
        if self._left or self._head or n < 16 or n > self._max or _u32(chunk)[0] != n:
            # Not one whole frame of a size within the cap, as servers write them.
            try:
                self._measure(chunk)
            except (SseLimitError, FrameError) as e:
                failure = e
        elif (event := _whole_frame(chunk)) is not None:
            return [event]  # (nothing else is buffered: no frame was under way)
        self._buffer.add_data(chunk)
        out: list[SseEvent] = []
        try:
            for message in self._buffer:
                fields = vars(message)  # (botocore's stubs mistype `headers`)
                out.append(_frame(fields["headers"], fields["payload"]))
        except (self._parser_error, UnicodeDecodeError) as e:  # (a header not UTF-8)
            failure = failure or FrameError(f"{type(e).__name__}: {e}")
        if failure is not None:
            if not out:
                raise failure
            # The frames before the bad one are handed over first; the next read fails
            # (and an answer that ended among them never reads on).
            self._failure = failure
        return out

    def close(self) -> list[SseEvent]:
        # A frame cut short is never an event (the stream did not finish); a bad frame
        # whose predecessors were handed over is the stream's failure now.
        if self._failure is not None:
            raise self._failure
        return []


def _event_stream(max_event: int) -> Framer:
    return EventStreamFramer(max_event)


EVENT_STREAM = Framing("application/vnd.amazon.eventstream", "vnd.amazon.eventstream",
                       _event_stream)
"""The AWS event-stream framing of `converse-stream`."""


# --- wire types for decoding ----------------------------------------------------------


class _Usage(msgspec.Struct, frozen=True):
    inputTokens: int | None = None
    outputTokens: int | None = None
    cacheReadInputTokens: int | None = None
    cacheWriteInputTokens: int | None = None


class _ToolUse(msgspec.Struct, frozen=True):
    toolUseId: str | None = None
    name: str | None = None
    input: dict[str, object] | str | None = None
    type: str | None = None
    """`server_tool_use`: a tool the server runs itself (Nova's code interpreter)."""


class _ToolResult(msgspec.Struct, frozen=True):
    """The result of a tool the server ran (the start of its block, or the whole block)."""

    toolUseId: str | None = None
    type: str | None = None
    status: str | None = None
    content: list[dict[str, object]] | None = None


class _ReasoningText(msgspec.Struct, frozen=True):
    text: str | None = None
    signature: str | None = None


class _Reasoning(msgspec.Struct, frozen=True):
    text: str | None = None
    signature: str | None = None
    redactedContent: str | None = None
    reasoningText: _ReasoningText | None = None


class _Block(msgspec.Struct, frozen=True):
    """A content block of a response, a delta or the start of one (one flat shape:
    block kinds this decoder does not know decode and are ignored)."""

    text: str | None = None
    toolUse: _ToolUse | None = None
    reasoningContent: _Reasoning | None = None
    toolResult: _ToolResult | list[dict[str, object]] | None = None
    """A server tool's result: its start or whole block, or (a delta) some of its blocks."""


class _Event(msgspec.Struct, frozen=True):
    contentBlockIndex: int = -1
    """-1: none given (never a block's)."""
    delta: _Block | None = None
    start: _Block | None = None
    stopReason: str | None = None
    usage: _Usage | None = None


class _Message(msgspec.Struct, frozen=True):
    content: list[_Block] = []


class _Output(msgspec.Struct, frozen=True):
    message: _Message | None = None


class _Response(msgspec.Struct, frozen=True):
    output: _Output | None = None
    stopReason: str | None = None
    usage: _Usage | None = None


class _Exception(msgspec.Struct, frozen=True):
    message: str | None = None
    Message: str | None = None


_event = msgspec.json.Decoder(_Event)
_response = msgspec.json.Decoder(_Response)
_exception = msgspec.json.Decoder(_Exception)

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool-calls",
    "guardrail_intervened": "content-filter",
    "content_filtered": "content-filter",
    "malformed_model_output": "error",
    "malformed_tool_use": "error",
}

# The status each exception stands for (AWS's documentation of Converse's errors).
_EXCEPTION_STATUS = {
    "ThrottlingException": 429,
    "ModelNotReadyException": 429,
    "ValidationException": 400,
    "AccessDeniedException": 403,
    "ResourceNotFoundException": 404,
    "ModelTimeoutException": 408,
    "ModelErrorException": 424,
    "ModelStreamErrorException": 424,
    "InternalServerException": 500,
    "ServiceUnavailableException": 503,
}
_TRANSIENT = frozenset({"ModelStreamErrorException"})
"""Retryable besides what its status says (AWS: "retry your request")."""


def exception_error(
    kind: str, payload: str, *, started: bool, status: int, request_id: str | None
) -> ApiError:
    """An exception frame of a stream (`throttlingException`...) as an ApiError named as
    the HTTP error would be (`ThrottlingException`); retryable only before any event."""
    name = kind[:1].upper() + kind[1:]
    try:
        e = _exception.decode(payload)
        message = e.message or e.Message or payload
    except (msgspec.DecodeError, msgspec.ValidationError):
        message = payload
    frame_status = _EXCEPTION_STATUS.get(name, 500)
    transient = is_retryable_status(frame_status) or name in _TRANSIENT
    return ApiError(
        status=status if started else frame_status,
        message=message.strip()[:2000] or name,
        error_type=name,
        request_id=request_id,
        retryable=transient and not started,
        body=payload[:8192],
    )


_BlockKind = Literal["text", "reasoning", "tool", "json", "server", "result"]
"""What an open block is: "server" a tool the server runs, "result" what it returned."""


class _Open:
    __slots__ = ("args", "failed", "id", "kind", "name", "redacted", "result", "signature",
                 "text_id")

    def __init__(self, kind: _BlockKind, i: int) -> None:
        self.kind = kind
        self.text_id = f"text-{i}"  # made once per block, not per delta
        self.id = ""
        self.name = ""
        self.args: list[str] = []
        self.signature: list[str] = []
        self.redacted: str | None = None
        self.result: list[dict[str, object]] = []
        self.failed = False


def _result_value(blocks: list[dict[str, object]]) -> object:
    """A server tool's result from its blocks: its text when they are all text (the
    pieces joined), its one JSON value, else the blocks as the server sent them."""
    if all(len(b) == 1 and isinstance(b.get("text"), str) for b in blocks):
        return "".join(str(b["text"]) for b in blocks)
    if len(blocks) == 1 and len(blocks[0]) == 1 and "json" in blocks[0]:
        return blocks[0]["json"]
    return blocks


class ConverseStreamDecoder(ForcedToolDecoder):
    """converse-stream frames -> ModelEvents. Text and reasoning blocks start with their
    first delta (Converse sends contentBlockStart only for toolUse); the call ends at the
    later of messageStop and metadata (which carries the usage)."""

    def __init__(
        self, *, json_tool: str | None = None, status: int = 200, request_id: str | None = None
    ) -> None:
        super().__init__(json_tool=json_tool, status=status, request_id=request_id)
        self._blocks: dict[int, _Open] = {}
        self._usage: _Usage | None = None
        self._stopped = False
        self._server_tools: dict[str, str] = {}
        """The names of the tools the server ran, by their ids (their results name none)."""

    def feed(self, event: SseEvent) -> list[ModelEvent]:
        if event.event == "contentBlockDelta":
            # The hot path, once per chunk: a text delta to an open text block, inline.
            try:
                ev = _event.decode(event.data)
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise self._bad_frame("Converse event", e, event.data) from None
            d, b = ev.delta, self._blocks.get(ev.contentBlockIndex)
            if b is not None and b.kind == "text" and d is not None and d.text:
                return [TextDelta(b.text_id, d.text)]
            out = self._delta(ev)
        else:
            out = self._feed(event)
        if out:
            self._started = True
        return out

    def _feed(self, sse: SseEvent) -> list[ModelEvent]:
        kind = sse.event
        if kind == "exception" or kind == "error":
            raise ProviderError(exception_error(
                sse.id or "InternalServerException", sse.data, started=self._started,
                status=self._status, request_id=self._request_id,
            ))
        try:
            ev = _event.decode(sse.data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise self._bad_frame("Converse event", e, sse.data) from None
        if kind == "contentBlockDelta":
            return self._delta(ev)
        if kind == "contentBlockStart":
            return self._start(ev)
        if kind == "contentBlockStop":
            i = ev.contentBlockIndex
            block = self._blocks.pop(i, None)
            return self._end(i, block) if block is not None else []
        if kind == "messageStop":
            self._stop_reason, self._stopped = ev.stopReason, True
            return self._finish() if self._usage is not None else []
        if kind == "metadata":
            self._usage = ev.usage or _Usage()
            return self._finish() if self._stopped else []
        return []  # messageStart, and event types this decoder does not know

    def _start(self, ev: _Event) -> list[ModelEvent]:
        i, start = ev.contentBlockIndex, ev.start
        if i < 0 or start is None:
            return []
        tool = start.toolUse
        if tool is None:
            if isinstance(start.toolResult, _ToolResult):
                self._server_result(i, start.toolResult)
            return []  # starts of other block kinds carry nothing to keep
        if tool.type == "server_tool_use":
            # The server runs it (Nova's code interpreter): a record, never a call to run.
            b = self._blocks[i] = _Open("server", i)
            b.id, b.name = tool.toolUseId or f"tooluse_{i}", tool.name or ""
            self._server_tools[b.id] = b.name
            return []
        is_json = self._json_tool is not None and tool.name == self._json_tool
        b = _Open("json" if is_json else "tool", i)
        b.id, b.name = tool.toolUseId or f"tooluse_{i}", tool.name or ""
        self._blocks[i] = b
        if is_json:
            self._json_used = True
            return [chunks.TextStart(b.text_id)]
        return [ToolCallDelta(b.id, b.name, "")]

    def _server_result(self, i: int, r: _ToolResult) -> None:
        b = self._blocks[i] = _Open("result", i)
        b.id = r.toolUseId or ""
        b.name = self._server_tools.get(b.id) or r.type or ""
        b.failed = r.status == "error"

    def _delta(self, ev: _Event) -> list[ModelEvent]:
        i, d = ev.contentBlockIndex, ev.delta
        if i < 0 or d is None:
            raise self._invalid("contentBlockDelta without an index or a delta")
        b = self._blocks.get(i)
        out: list[ModelEvent] = []
        if b is None:
            if d.toolUse is not None or d.toolResult is not None:
                kind = "toolUse" if d.toolUse is not None else "toolResult"
                raise self._invalid(f"a {kind} delta for block {i}, which was not started")
            b = self._blocks[i] = _Open(
                "text" if d.reasoningContent is None else "reasoning", i)
            out.append(chunks.TextStart(b.text_id) if b.kind == "text"
                       else chunks.ReasoningStart(f"reasoning-{i}"))
        if b.kind == "text":
            if d.text:
                out.append(TextDelta(b.text_id, d.text))
        elif b.kind == "reasoning":
            r = d.reasoningContent
            if r is not None:
                if r.signature:
                    b.signature.append(r.signature)
                if r.redactedContent:
                    b.redacted = r.redactedContent
                if r.text:
                    out.append(ReasoningDelta(f"reasoning-{i}", r.text))
        elif b.kind == "result":
            if isinstance(d.toolResult, list):
                b.result += d.toolResult
        elif d.toolUse is not None and isinstance(d.toolUse.input, str) and d.toolUse.input:
            piece = d.toolUse.input
            b.args.append(piece)
            if b.kind != "server":  # the server's own call is whole at its end
                out.append(TextDelta(b.text_id, piece) if b.kind == "json"
                           else ToolCallDelta(b.id, b.name, piece))
        return out

    def _end(self, i: int, b: _Open) -> list[ModelEvent]:
        if b.kind == "text" or b.kind == "json":
            return [chunks.TextEnd(b.text_id)]
        if b.kind == "reasoning":
            return [self._reasoning_end(f"reasoning-{i}", "".join(b.signature) or None, b.redacted)]
        if b.kind == "result":
            return [chunks.ServerToolResult(b.id, b.name, _result_value(b.result), b.failed)]
        raw = "".join(b.args)
        if b.kind == "server":
            # It ran already: input that does not parse is kept as it came, not refused.
            ran = codec.parse_tool_args(raw)
            return [chunks.ServerToolCall(b.id, b.name, {"input": raw} if ran is None else ran)]
        args = codec.parse_tool_args(raw)
        if args is None:
            # Maybe cut by maxTokens: messageStop says so; decided at the finish.
            self._truncated.append((b.name, raw))
            return []
        return [chunks.ToolCall(b.id, b.name, args)]

    def _finish(self) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        for i in sorted(self._blocks):  # blocks the server never stopped
            out.extend(self._end(i, self._blocks.pop(i)))
        self._check_truncated()
        used = self._json_used
        reason = codec.forced_tool_reason(_FINISH, self._stop_reason, json_tool_used=used)
        out.append(chunks.ModelFinish(reason, usage_of(self._usage)))
        self.done = True
        return out


def usage_of(u: _Usage | None) -> chunks.Usage:
    """inputTokens counts uncached input only; the total is reported, as OpenAI does."""
    if u is None:
        return chunks.Usage()
    read, write = u.cacheReadInputTokens or 0, u.cacheWriteInputTokens or 0
    return chunks.Usage(
        input_tokens=(u.inputTokens or 0) + read + write,
        output_tokens=u.outputTokens or 0,
        cached_input_tokens=read,
        cache_write_tokens=write,
    )


def decode_converse(
    body: bytes, *, json_tool: str | None = None, status: int = 200,
    request_id: str | None = None,
) -> list[ModelEvent]:
    """A non-streaming Converse response as the same events a stream gives."""
    resp = codec.decode_response(
        _response, body, "Converse response", lambda r: False,
        status=status, request_id=request_id,
    )
    if resp.output is None or resp.output.message is None:
        raise codec.invalid_response(
            status, "the response has no output message", started=False,
            request_id=request_id, body=body[:2000].decode("utf-8", "replace"),
        )
    # Replay the blocks through the stream decoder: one set of rules for both paths.
    dec = ConverseStreamDecoder(json_tool=json_tool, status=status, request_id=request_id)
    out: list[ModelEvent] = []
    for i, block in enumerate(resp.output.message.content):
        tool, r, result = block.toolUse, block.reasoningContent, block.toolResult
        if tool is not None:
            start = _Block(toolUse=_ToolUse(tool.toolUseId, tool.name, type=tool.type))
            out += dec._start(_Event(i, start=start))
            args = tool.input if isinstance(tool.input, str) else codec.json_text(tool.input or {})
            out += dec._delta(_Event(i, delta=_Block(toolUse=_ToolUse(input=args))))
        elif isinstance(result, _ToolResult):
            out += dec._start(_Event(i, start=_Block(toolResult=result)))
            out += dec._delta(_Event(i, delta=_Block(toolResult=result.content or [])))
        elif r is not None:
            rt = r.reasoningText or _ReasoningText()
            delta = _Reasoning(rt.text, rt.signature, r.redactedContent)
            out += dec._delta(_Event(i, delta=_Block(reasoningContent=delta)))
        elif block.text is not None:
            out += dec._delta(_Event(i, delta=_Block(text=block.text)))
        b = dec._blocks.pop(i, None)
        if b is not None:
            out += dec._end(i, b)
    dec._stop_reason, dec._usage = resp.stopReason, resp.usage or _Usage()
    out += dec._finish()
    return out


class BedrockCodec(ForcedToolCodec[BedrockOptions]):
    """The Codec for `/model/{id}/converse` and `/model/{id}/converse-stream`. A Bedrock
    API key is a bearer token; without one, the route's signer signs."""

    options_type = BedrockOptions
    tool_decoder = ConverseStreamDecoder
    decode_tool_whole = staticmethod(decode_converse)

    def path(self, model: str, *, stream: bool) -> str:
        # A model id or ARN in one path segment (`us.amazon.nova-micro-v1%3A0`).
        return f"/model/{quote(model, safe='')}/{'converse-stream' if stream else 'converse'}"

    def encode(self, request: ModelRequest, *, model: str, stream: bool) -> Encoded:
        encoded = super().encode(request, model=model, stream=stream)
        return msgspec.structs.replace(encoded, framing=EVENT_STREAM) if stream else encoded

    def body(
        self, request: ModelRequest, *, model: str, stream: bool
    ) -> tuple[JsonDict, str | None]:
        return encode_request(request, options=self.options)


CONVERSE = codec.wire_format("bedrock-converse", BedrockCodec, BedrockOptions)
"""The Bedrock Converse wire format, for the table of wire formats (providers/table.py)."""


# --- SigV4 ----------------------------------------------------------------------------

_HOST_REGION = re.compile(r"^[a-z0-9-]+\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_SIGNED_OUT = ("Authorization", "X-Amz-Date", "X-Amz-Security-Token")


class SigV4Signer:
    """Signs a request with AWS SigV4 (botocore's `SigV4Auth`) for one service and
    region. Credentials: the environment given when the route was configured
    (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), else botocore's
    chain (profiles, SSO, the instance role...), looked up at the first request and
    refreshed by botocore. They are never in its repr or in an error."""

    __slots__ = ("_credentials", "_region", "_service")

    def __init__(self, service: str, region: str, env: Mapping[str, str]) -> None:
        from botocore.credentials import Credentials

        self._service = service
        self._region = region
        key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
        self._credentials: Credentials | None = (
            Credentials(key, secret, env.get("AWS_SESSION_TOKEN") or None)
            if key and secret else None
        )

    def __repr__(self) -> str:
        return f"SigV4Signer(service={self._service!r}, region={self._region!r})"

    def _frozen(self) -> ReadOnlyCredentials:
        creds = self._credentials
        if creds is None:
            import botocore.session

            found = botocore.session.get_session().get_credentials()
            if found is None:
                raise ProviderError(ApiError(
                    status=None, error_type="configuration", retryable=False,
                    message="no AWS credentials found for Bedrock: set AWS_ACCESS_KEY_ID "
                    "and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or AWS_BEARER_TOKEN_BEDROCK "
                    "(a Bedrock API key)",
                ))
            creds = self._credentials = found
        return creds.get_frozen_credentials()

    def __call__(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> Mapping[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=url, data=body, headers=dict(headers))
        SigV4Auth(self._frozen(), self._service, self._region).add_auth(request)
        return {k: str(request.headers[k]) for k in _SIGNED_OUT if k in request.headers}


def region_of(base_url: str) -> str | None:
    """The region an AWS endpoint's host names (`bedrock-runtime.eu-west-1.amazonaws.com`)."""
    m = _HOST_REGION.match(urlsplit(base_url).hostname or "")
    return m.group(1) if m else None


def sigv4_signer(
    service: str, region_env: tuple[str, ...] = ("AWS_REGION", "AWS_DEFAULT_REGION")
) -> SignerFactory:
    """A route's signer factory: SigV4 for `service`, in the region of the base URL's
    host, else of the first of `region_env` set. Raises ValueError when the route is
    configured without botocore or a region."""

    def make(base_url: str, env: Mapping[str, str]) -> RequestSigner:
        try:
            import botocore.auth  # noqa: F401
        except ImportError as e:
            raise ValueError(_botocore_missing(e).message) from None
        region = region_of(base_url) or next((env[v] for v in region_env if env.get(v)), None)
        if not region:
            raise ValueError(f"signing for {service} needs a region: set "
                             f"{' or '.join(region_env)}")
        return SigV4Signer(service, region, env)

    return make
