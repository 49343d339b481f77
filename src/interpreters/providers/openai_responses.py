"""The OpenAI Responses wire format (`/responses`).

Encoding: system/developer messages, user text and files (`input_text`, `input_image`,
`input_file`), assistant text, `function_call` and `function_call_output` items, reasoning
items sent back (by id, with their encrypted content when the response carried it),
function tools and tool_choice, `text.format` json_schema, `reasoning` (effort, summary),
`max_output_tokens`, namespaced provider options.
Decoding: the stream's events (`response.output_text.delta`, refusal deltas, function-call
argument deltas, reasoning summary and reasoning text deltas, `response.output_item.*`,
`response.completed` / `response.incomplete` / `response.failed`, `error`), a whole
response body, usage with reasoning and cached tokens. An event is tied to its item by
`output_index` when the ids disagree (servers that give each event a new `item_id`).
Event types this decoder does not know (server tools' progress, annotations...) are
skipped, as the other decoders skip what they do not know; a frame that is not JSON, or
a known event missing what it needs, fails the call. The items of tools the server ran
(web search, code interpreter, file search, image generation, MCP) come out as
`ServerToolCall` / `ServerToolResult`, never as calls to run; an item the client would
have to run or answer (a `custom_tool_call`, `computer_call`, shell or patch call, an MCP
approval request) fails the call with an `unsupported_tool_call` error naming it.

A reasoning item reaches the conversation as a reasoning block whose `signature` is the
item's id, followed by a space and its `encrypted_content` when there is one
(`include=["reasoning.encrypted_content"]`, `encrypted_reasoning=True`): that is what the
next request must send back. Reasoning without such a signature (another provider's) is
not sent.
"""

from __future__ import annotations

import base64
from typing import Literal, get_args

import msgspec

from interpreters.providers import codec
from interpreters.providers.codec import DecoderBase, JsonCodec, JsonDict
from interpreters.providers.errors import stream_error
from interpreters.providers.openai_chat import TokenDetails, token_usage, user_message
from interpreters.providers.provider import ProviderError
from interpreters.providers.sse import SseEvent
from pipeline.values import chunks  # the events; those made per event are imported by name
from pipeline.values.chunks import (
    FinishReason,
    ModelEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from pipeline.values.messages import (
    FilePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.model import ApiError, ModelRequest, ToolChoiceTool
from pipeline.values.output_type import strict_schema
from pipeline.values.sanitize import SanitizeProfile

RESPONSES_PROFILE = SanitizeProfile.custom("openai-responses", id_max_len=64)
"""Responses: names as Chat Completions (``^[a-zA-Z0-9_-]{1,64}$``); `call_id`s up to 64
characters (its recorded traffic sends back 51-character item ids as call ids)."""

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
ReasoningSummary = Literal["auto", "concise", "detailed"]


def _check_choice(name: str, value: object, kind: object) -> None:
    allowed = get_args(kind)
    if value is not None and value not in allowed:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(map(repr, allowed))}")


class OpenAIResponsesOptions(msgspec.Struct, frozen=True):
    """How a Responses server wants its requests (checked when made)."""

    system_role: Literal["system", "developer"] = "system"
    reasoning_effort: ReasoningEffort | None = None
    """`reasoning.effort` (reasoning models); None: the model's default."""
    reasoning_summary: ReasoningSummary | None = None
    """`reasoning.summary`: ask for reasoning summaries (streamed as reasoning)."""
    encrypted_reasoning: bool = False
    """Ask for `reasoning.encrypted_content`, so reasoning can be sent back without the
    server storing it (with `store=False`)."""
    store: bool | None = None
    """`store`; None: the server's default (it stores responses)."""
    strict_tools: bool = False
    """Send function tools with `strict: true` (the server then requires closed schemas
    with every property required); the API's own default is strict, so it is always sent."""
    option_sections: tuple[str, ...] = ("openai",)
    """Which `provider_options` sections are merged into the body."""
    profile: SanitizeProfile = RESPONSES_PROFILE
    """What this server accepts as tool-call ids and tool names."""

    def __post_init__(self) -> None:
        _check_choice("system_role", self.system_role, Literal["system", "developer"])
        _check_choice("reasoning_effort", self.reasoning_effort, ReasoningEffort)
        _check_choice("reasoning_summary", self.reasoning_summary, ReasoningSummary)
        for flag in ("encrypted_reasoning", "strict_tools"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} is a bool, not {getattr(self, flag)!r}")
        if self.store is not None and not isinstance(self.store, bool):
            raise TypeError(f"store is a bool or None, not {self.store!r}")


# --- encoding -------------------------------------------------------------------------

_WIRE = "OpenAI Responses"


def _file_content(part: FilePart) -> JsonDict:
    mt = part.media_type
    url = part.data if part.is_url else f"data:{mt};base64,{part.data}"
    if mt.startswith("image/"):
        return {"type": "input_image", "image_url": url}
    if mt == "application/pdf":
        if part.is_url:
            return {"type": "input_file", "file_url": url}
        return {"type": "input_file", "filename": part.filename or "document.pdf",
                "file_data": url}
    if mt.startswith("text/") and not part.is_url:
        text = base64.b64decode(part.data).decode("utf-8", "replace")
        return {"type": "input_text", "text": text}
    raise codec.unsupported_file(_WIRE, mt, " by URL" if part.is_url else "")


def reasoning_signature(item_id: str, encrypted: str | None) -> str:
    """What a reasoning block carries so that its item can be sent back."""
    return f"{item_id} {encrypted}" if encrypted else item_id


def _reasoning_item(p: ReasoningPart, *, stored: bool) -> JsonDict | None:
    sig = p.signature
    if not sig or not sig.startswith("rs_"):
        return None  # not a Responses reasoning item (another provider's, or none)
    item_id, _, encrypted = sig.partition(" ")
    if not encrypted and not stored:
        return None  # by id alone: a server that stores nothing cannot find it
    item: JsonDict = {
        "type": "reasoning", "id": item_id,
        "summary": [{"type": "summary_text", "text": p.text}] if p.text else [],
    }
    if encrypted:
        item["encrypted_content"] = encrypted
    return item


def _encode_message(m: Message, options: OpenAIResponsesOptions, out: list[JsonDict]) -> None:
    system_role = options.system_role
    # Tool results are items of their own, whatever role carried them.
    for p in m.parts:
        if isinstance(p, ToolResultPart):
            out.append({"type": "function_call_output", "call_id": p.tool_call_id,
                        "output": codec.json_text(p.result)})
    if m.role == "tool":
        return
    if m.role == "system":
        text = "".join(p.text for p in m.parts if isinstance(p, TextPart))
        out.append({"role": system_role, "content": text})
    elif m.role == "user":
        user = user_message(m, "input_text", _file_content)
        if user is not None:
            out.append(user)
    else:
        # Items in the order the model gave them: a reasoning item must come right
        # before the output that followed it.
        texts: list[str] = []
        for p in m.parts:
            if isinstance(p, TextPart):
                texts.append(p.text)
                continue
            item: JsonDict | None = None
            if isinstance(p, ToolCallPart):
                item = {"type": "function_call", "call_id": p.tool_call_id,
                        "name": p.tool_name, "arguments": codec.json_text(dict(p.args))}
            elif isinstance(p, ReasoningPart) and codec.signed_for(p, options.option_sections[0]):
                item = _reasoning_item(p, stored=options.store is not False)
            if item is None:
                continue
            if texts:
                out.append({"role": "assistant", "content": "".join(texts)})
                texts = []
            out.append(item)
        if texts:
            out.append({"role": "assistant", "content": "".join(texts)})


def _unsupported_setting(name: str) -> ProviderError:
    return ProviderError(ApiError(
        status=None, error_type="configuration", retryable=False,
        message=f"the {_WIRE} format has no {name} setting: leave it out for this model",
    ))


def encode_request(
    request: ModelRequest, *, model: str, stream: bool, options: OpenAIResponsesOptions
) -> JsonDict:
    """The JSON body (as a dict) for one Responses call."""
    items: list[JsonDict] = [
        {"role": options.system_role, "content": s.content} for s in request.system
    ]
    for m in request.messages:
        _encode_message(m, options, items)
    body: JsonDict = {"model": model, "input": items}
    if request.tools:
        body["tools"] = [
            {"type": "function", "name": t.name, "description": t.description,
             "parameters": strict_schema(t.parameters) if options.strict_tools
             else dict(t.parameters),
             "strict": options.strict_tools}
            for t in request.tools
        ]
        tc = request.tool_choice
        body["tool_choice"] = (
            {"type": "function", "name": tc.tool_name} if isinstance(tc, ToolChoiceTool) else tc
        )
    so = request.structured_output
    if so is not None:
        fmt: JsonDict = {"type": "json_schema", "name": so.name, "schema": dict(so.schema)}
        if so.strict:
            fmt["strict"] = True
            fmt["schema"] = strict_schema(so.schema)  # refs inlined, objects closed
        body["text"] = {"format": fmt}
    s = request.model_settings
    if s.stop is not None:
        raise _unsupported_setting("stop")
    if s.seed is not None:
        raise _unsupported_setting("seed")
    codec.put_given(body, (("temperature", s.temperature), ("top_p", s.top_p),
                           ("max_output_tokens", s.max_tokens)))
    reasoning: JsonDict = {}
    codec.put_given(reasoning, (("effort", options.reasoning_effort),
                                ("summary", options.reasoning_summary)))
    if reasoning:
        body["reasoning"] = reasoning
    if options.encrypted_reasoning:
        body["include"] = ["reasoning.encrypted_content"]
    codec.put_given(body, (("store", options.store),))
    body["stream"] = stream
    codec.merge_options(body, request.provider_options, options.option_sections)
    return body


# --- wire types for decoding ----------------------------------------------------------


class _Content(msgspec.Struct, frozen=True):
    type: str = ""
    text: str | None = None
    refusal: str | None = None


class _Summary(msgspec.Struct, frozen=True):
    text: str = ""


class _Item(msgspec.Struct, frozen=True):
    type: str = ""
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    status: str | None = None
    content: list[_Content] | None = None
    summary: list[_Summary] | None = None
    encrypted_content: str | None = None
    # the input and output fields of the tools the server runs (`SERVER_TOOLS`)
    action: object = None
    code: object = None
    container_id: object = None
    outputs: object = None
    queries: object = None
    results: object = None
    result: object = None
    server_label: object = None
    output: object = None
    error: object = None
    tools: object = None


class _Usage(msgspec.Struct, frozen=True):
    input_tokens: int | None = None
    output_tokens: int | None = None
    input_tokens_details: TokenDetails | None = None
    output_tokens_details: TokenDetails | None = None

    def to_usage(self) -> chunks.Usage:
        return token_usage(self.input_tokens, self.output_tokens,
                           self.input_tokens_details, self.output_tokens_details)


class _Error(msgspec.Struct, frozen=True):
    code: str | None = None
    message: str | None = None
    type: str | None = None


class _Incomplete(msgspec.Struct, frozen=True):
    reason: str | None = None


class _Head(msgspec.Struct, frozen=True):
    """A response as the stream's events carry it (its output came as events)."""

    id: str | None = None
    model: str | None = None
    status: str | None = None
    usage: _Usage | None = None
    error: _Error | None = None
    incomplete_details: _Incomplete | None = None


class _Response(_Head, frozen=True):
    output: list[_Item] | None = None


class _Event(msgspec.Struct, frozen=True):
    type: str = ""
    delta: str | None = None
    item_id: str | None = None
    output_index: int | None = None
    content_index: int | None = None
    summary_index: int | None = None
    arguments: str | None = None
    item: _Item | None = None
    response: _Head | None = None
    # the `error` event's fields, flat or (some servers) under `error`
    code: str | None = None
    message: str | None = None
    error: _Error | None = None


class _Type(msgspec.Struct, frozen=True):
    type: str = ""


_event = msgspec.json.Decoder(_Event)
_type_only = msgspec.json.Decoder(_Type)
_response = msgspec.json.Decoder(_Response)
_error_body = msgspec.json.Encoder()

TEXT_DELTA = "response.output_text.delta"
_KNOWN = frozenset({
    TEXT_DELTA, "response.refusal.delta", "response.function_call_arguments.delta",
    "response.function_call_arguments.done", "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta", "response.output_item.added",
    "response.output_item.done", "response.content_part.done", "response.output_text.done",
    "response.refusal.done", "response.created", "response.in_progress", "response.queued",
    "response.completed", "response.incomplete", "response.failed", "error",
})
"""The event types decoded; a frame of one of these that does not fit is an error."""

SERVER_TOOLS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "web_search_call": ("web_search", ("action",), ("status",)),
    "file_search_call": ("file_search", ("queries",), ("results", "status")),
    "code_interpreter_call": ("code_interpreter", ("code", "container_id"),
                              ("outputs", "status")),
    "image_generation_call": ("image_generation", (), ("result", "status")),
    "mcp_call": ("", ("server_label", "arguments"), ("output", "error")),
    "mcp_list_tools": ("mcp_list_tools", ("server_label",), ("tools", "error")),
}
"""The items of tools the server runs: the tool's name ("": the item's own `name`), the
item's fields that are its input and those that are its result. Each comes out as a
`ServerToolCall` and its `ServerToolResult` when the item is done."""
CLIENT_TOOLS = frozenset({
    "custom_tool_call", "computer_call", "local_shell_call", "shell_call", "apply_patch_call",
    "mcp_approval_request",
})
"""The items of tool kinds the client must run or answer, which an agent cannot: it
declares function tools only. Each is an `unsupported_tool_call` error naming it."""
UNSUPPORTED_TOOL_CALL = "unsupported_tool_call"

_INCOMPLETE: dict[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content-filter",
}

# Error codes of `response.failed` / `error` that mean "try again" (before any output).
_TRANSIENT = {"server_error": 500, "rate_limit_exceeded": 429}


# --- decoding -------------------------------------------------------------------------


class _Call:
    __slots__ = ("args", "id", "name")

    def __init__(self, id: str, name: str) -> None:
        self.id = id
        self.name = name
        self.args: list[str] = []


class _Thought:
    __slots__ = ("block", "part", "text")

    def __init__(self, block: str) -> None:
        self.block = block
        self.part: int | None = None
        """The summary (or reasoning text) part the last delta belonged to."""
        self.text = False


class ResponsesStreamDecoder(DecoderBase):
    """Responses stream events -> ModelEvents."""

    def __init__(self, *, status: int = 200, request_id: str | None = None) -> None:
        super().__init__(status=status, request_id=request_id)
        self._text: tuple[str, int, str] | None = None
        """The open text block: (item id, content index, block id); one at a time."""
        self._refusal: tuple[str, int, str] | None = None
        self._blocks = 0
        self._calls: dict[str, _Call] = {}
        """Function calls in progress, by item id."""
        self._called = 0
        self._thoughts: dict[str, _Thought] = {}
        self._refused = False
        self._texted: set[str] = set()
        """The message items whose text streamed."""
        self._dropped: list[tuple[str, str]] = []
        """Calls whose arguments did not parse in an item the server marked incomplete."""
        self._at: dict[int, str] = {}
        """Each item's key (its id when added) by its `output_index`: some servers (GitHub
        Copilot's) give every event of one item a new id; its place ties them together."""

    def feed(self, event: SseEvent) -> list[ModelEvent]:
        data = event.data
        try:
            ev = _event.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            if event.event == "error":
                raise self._error(data.encode()) from None
            try:
                kind = _type_only.decode(data).type
            except (msgspec.DecodeError, msgspec.ValidationError):
                kind = TEXT_DELTA  # not even a typed JSON object
            if kind == "error":
                raise self._error(data.encode()) from None  # whatever its shape
            if kind in _KNOWN:
                raise self._bad_frame("Responses event", e, data) from None
            return []  # a shape this decoder does not know, of a type it does not read
        t = ev.type
        if t == TEXT_DELTA:
            o = self._text
            if o is not None and o[0] == ev.item_id and o[1] == ev.content_index and ev.delta:
                self._started = True
                return [TextDelta(o[2], ev.delta)]  # more of the open text: most events
            out = self._text_delta(ev, refusal=False)
        else:
            out = self._other(ev, event.event)
        if out:
            self._started = True
        return out

    # --- one event ---

    def _other(self, ev: _Event, sse_name: str | None) -> list[ModelEvent]:
        t = ev.type
        if t == "response.function_call_arguments.delta":
            call = self._call(ev)
            if not ev.delta:
                return []
            call.args.append(ev.delta)
            return [ToolCallDelta(call.id, call.name, ev.delta)]
        if t in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return self._thought_delta(ev)
        if t == "response.refusal.delta":
            return self._text_delta(ev, refusal=True)
        if t == "response.output_item.added":
            return self._item_added(self._item(ev), ev.output_index)
        if t == "response.output_item.done":
            return self._item_done(self._item(ev), ev.output_index)
        if t in ("response.content_part.done", "response.output_text.done",
                 "response.refusal.done"):
            return self._close_text(self._key(ev.item_id, ev.output_index), ev.content_index)
        if t == "response.function_call_arguments.done":
            if ev.arguments is not None:
                call = self._call(ev)
                call.args = [ev.arguments]  # the whole arguments: they win over the deltas
            return []
        if t in ("response.created", "response.in_progress", "response.queued"):
            r = ev.response
            if r is not None:
                self._response_id = self._response_id or r.id
                self._model_id = self._model_id or r.model
            return []
        if t in ("response.completed", "response.incomplete"):
            if ev.response is None:
                raise self._invalid(f"{t} without its response")
            return self.finish(ev.response)
        if t == "response.failed":
            r = ev.response
            raise self._failed(r.error if r is not None and r.error else _Error(),
                               "response_failed")
        if t == "error" or sse_name == "error":
            raise self._failed(ev.error or _Error(ev.code, ev.message), "stream_error")
        return []  # progress of server tools, annotations, and what this decoder does not know

    def _item(self, ev: _Event) -> _Item:
        if ev.item is None:
            raise self._invalid(f"{ev.type} without its item")
        return ev.item

    def _key(self, item_id: str | None, index: int | None) -> str:
        """The item an event is about: the one added at its `output_index` (its place
        ties its events together when a server gives each a new id, as other clients
        correlate them; with OpenAI's ids the two agree), else the id it names."""
        if index is not None:
            at = self._at.get(index)
            if at is not None:
                return at
        return item_id or ""

    def _call(self, ev: _Event) -> _Call:
        call = self._calls.get(self._key(ev.item_id, ev.output_index))
        if call is None:
            raise self._invalid(f"{ev.type} for item {ev.item_id!r}, which was not started")
        return call

    def _failed(self, e: _Error, default_type: str) -> ProviderError:
        body = _error_body.encode({"error": {"message": e.message, "type": e.type,
                                             "code": e.code}})
        err = stream_error(self._status, body, started=self._started,
                           request_id=self._request_id, default_type=default_type)
        transient = _TRANSIENT.get(e.code or "")
        if transient is not None and not self._started:
            err = msgspec.structs.replace(err, status=transient, retryable=True)
        return ProviderError(err)

    def _new_block(self, kind: str) -> str:
        block = f"{kind}-{self._blocks}"
        self._blocks += 1
        return block

    def _text_delta(self, ev: _Event, *, refusal: bool) -> list[ModelEvent]:
        if not ev.delta:
            return []
        key = (self._key(ev.item_id, ev.output_index), ev.content_index or 0)
        o = self._refusal if refusal else self._text
        out: list[ModelEvent] = []
        if o is None or o[:2] != key:
            if o is not None:
                out.append(chunks.TextEnd(o[2]))
            self._texted.add(key[0])
            block = self._new_block("refusal" if refusal else "text")
            o = (*key, block)
            out.append(chunks.TextStart(block))
            if refusal:
                self._refusal, self._refused = o, True
            else:
                self._text = o
        out.append(TextDelta(o[2], ev.delta))
        return out

    def _close_text(self, item_id: str | None, index: int | None) -> list[ModelEvent]:
        """End the open text and refusal blocks of this item (and part, when given)."""
        out: list[ModelEvent] = []
        for o in (self._text, self._refusal):
            if o is not None and o[0] == (item_id or "") and index in (None, o[1]):
                out.append(chunks.TextEnd(o[2]))
                if o is self._text:
                    self._text = None
                else:
                    self._refusal = None
        return out

    def _thought_delta(self, ev: _Event) -> list[ModelEvent]:
        th = self._thoughts.get(self._key(ev.item_id, ev.output_index))
        if th is None:
            raise self._invalid(f"{ev.type} for item {ev.item_id!r}, which was not started")
        if not ev.delta:
            return []
        part = ev.summary_index if ev.summary_index is not None else ev.content_index
        out: list[ModelEvent] = []
        if th.text and part != th.part:
            out.append(ReasoningDelta(th.block, "\n\n"))  # the next summary part
        th.part, th.text = part, True
        out.append(ReasoningDelta(th.block, ev.delta))
        return out

    def _item_added(self, item: _Item, index: int | None) -> list[ModelEvent]:
        if item.type in CLIENT_TOOLS:
            raise self._cannot_run(item)
        key = item.id
        if item.type == "function_call":
            call = self._new_call(item)
            key = key or call.id
            self._calls[key] = call
            out: list[ModelEvent] = [ToolCallDelta(call.id, call.name, "".join(call.args))]
        elif item.type == "reasoning":
            th = _Thought(self._new_block("reasoning"))
            key = key or th.block
            self._thoughts[key] = th
            out = [chunks.ReasoningStart(th.block)]
        else:
            out = []
        if index is not None and key is not None:
            self._at[index] = key
        return out

    def _new_call(self, item: _Item) -> _Call:
        call = _Call(item.call_id or item.id or f"call_{self._blocks}", item.name or "")
        self._blocks += 1
        if item.arguments:
            call.args.append(item.arguments)
        return call

    def _item_done(self, item: _Item, index: int | None = None) -> list[ModelEvent]:
        key = self._key(item.id, index)
        if item.type == "message":
            return self._message_done(item, key)
        if item.type == "function_call":
            return self._call_done(item, key)
        if item.type == "reasoning":
            return self._reasoning_done(item, key)
        if item.type in SERVER_TOOLS:
            return self._server_tool(item, key)
        if item.type in CLIENT_TOOLS:
            raise self._cannot_run(item)
        return []  # an item type this decoder does not know

    def _server_tool(self, item: _Item, key: str) -> list[ModelEvent]:
        """A tool the server ran, done: its call and result, never a call to run."""
        name, given, got = SERVER_TOOLS[item.type]
        name = name or item.name or item.type
        args: dict[str, object] = {}
        for field in given:
            value = getattr(item, field)
            if field == "arguments" and isinstance(value, str):
                value = codec.parse_tool_args(value) or value  # an MCP call's, as JSON
            if value is not None:
                args[field] = value
        result = {f: v for f in got if (v := getattr(item, f)) is not None}
        failed = item.status == "failed" or item.error is not None
        return [chunks.ServerToolCall(key, name, args),
                chunks.ServerToolResult(key, name, result, failed)]

    def _cannot_run(self, item: _Item) -> ProviderError:
        named = f" {item.name!r}" if item.name else ""
        return ProviderError(ApiError(
            status=self._status, error_type=UNSUPPORTED_TOOL_CALL, code=item.type,
            retryable=False, request_id=self._request_id,
            message=f"the model called a tool{named} the agent cannot run ({item.type} item "
            f"{item.id!r}, call {item.call_id!r}): an agent declares and runs function "
            "tools only",
        ))

    def _message_done(self, item: _Item, key: str) -> list[ModelEvent]:
        if key in self._texted:
            return self._close_text(key, None)
        # Its text never streamed (a whole body, or a server that sends items only).
        out: list[ModelEvent] = []
        for i, c in enumerate(item.content or ()):
            text = c.text if c.type == "output_text" else c.refusal
            if text:
                ev = _Event(delta=text, item_id=key, content_index=i)
                out += self._text_delta(ev, refusal=c.type == "refusal")
        return out + self._close_text(key, None)

    def _call_done(self, item: _Item, key: str) -> list[ModelEvent]:
        call = self._calls.pop(key, None) or self._calls.pop(item.call_id or "", None)
        if call is None:  # not announced (a whole body): whole here
            call = self._new_call(item)
        if item.arguments is not None:
            call.args = [item.arguments]
        raw = "".join(call.args)
        args = codec.parse_tool_args(raw)
        if args is None:
            if item.status == "incomplete":
                self._dropped.append((call.name, raw))  # cut by the token limit
                return []
            raise codec.invalid_tool_args(self._status, call.name, raw, request_id=self._request_id)
        self._called += 1
        return [chunks.ToolCall(call.id, call.name, args)]

    def _reasoning_done(self, item: _Item, key: str) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        th = self._thoughts.pop(key, None)
        if th is None:  # not announced (a whole body): started and done here
            th = _Thought(self._new_block("reasoning"))
            out.append(chunks.ReasoningStart(th.block))
        if not th.text:
            # Not streamed (a whole body, or a server that sends items only): its text.
            parts = [s.text for s in item.summary or () if s.text]
            parts += [c.text for c in item.content or () if c.text]
            if parts:
                out.append(ReasoningDelta(th.block, "\n\n".join(parts)))
        sig = reasoning_signature(item.id, item.encrypted_content) if item.id else None
        out.append(self._reasoning_end(th.block, sig))
        return out

    def finish(self, r: _Head) -> list[ModelEvent]:
        """`response.completed` / `response.incomplete`: close what is open, then finish."""
        self._response_id = r.id or self._response_id
        self._model_id = r.model or self._model_id
        out: list[ModelEvent] = []
        for o in (self._text, self._refusal):
            if o is not None:
                out.append(chunks.TextEnd(o[2]))
        self._text = self._refusal = None
        incomplete = r.status == "incomplete" or r.incomplete_details is not None
        for key in list(self._thoughts):
            out.append(chunks.ReasoningEnd(self._thoughts.pop(key).block))
        for key in list(self._calls):
            call = self._calls.pop(key)
            args = codec.parse_tool_args("".join(call.args))
            if args is None:
                if incomplete:
                    continue
                raise codec.invalid_tool_args(self._status, call.name, "".join(call.args),
                                              request_id=self._request_id)
            self._called += 1
            out.append(chunks.ToolCall(call.id, call.name, args))
        if self._dropped and not incomplete:
            name, raw = self._dropped[0]
            raise codec.invalid_tool_args(self._status, name, raw, request_id=self._request_id)
        reason: FinishReason
        if incomplete:
            why = r.incomplete_details.reason if r.incomplete_details else None
            reason = _INCOMPLETE.get(why or "", "other")
        elif self._called:
            reason = "tool-calls"
        else:
            reason = "content-filter" if self._refused else "stop"
        usage = r.usage.to_usage() if r.usage else chunks.Usage()
        out.append(chunks.ModelFinish(reason, usage, self._response_id, self._model_id))
        self.done = True
        self._started = True
        return out


def decode_body(
    body: bytes, *, status: int = 200, request_id: str | None = None
) -> list[ModelEvent]:
    """A non-streaming Responses body as the same events a stream gives."""
    resp = codec.decode_response(_response, body, "Responses response", lambda r: False,
                                 status=status, request_id=request_id)
    dec = ResponsesStreamDecoder(status=status, request_id=request_id)
    if resp.status == "failed" or resp.error is not None:
        raise dec._failed(resp.error or _Error(), "response_failed")
    if resp.output is None:
        raise dec._invalid("the response has no output")
    # The items go through the stream decoder's rules: one set of rules for both paths.
    out: list[ModelEvent] = []
    for n, item in enumerate(resp.output):
        if item.id is None:
            item = msgspec.structs.replace(item, id=f"item_{n}")
        out += dec._item_done(item)
    out += dec.finish(resp)
    return out


class OpenAIResponsesCodec(JsonCodec[OpenAIResponsesOptions]):
    """The Codec for `/responses`."""

    options_type = OpenAIResponsesOptions
    url_path = "/responses"
    request_body = staticmethod(encode_request)
    decoder = ResponsesStreamDecoder
    decode_whole = staticmethod(decode_body)


RESPONSES = codec.wire_format("openai-responses", OpenAIResponsesCodec, OpenAIResponsesOptions)
"""The Responses wire format, for the table of wire formats (providers/table.py)."""
