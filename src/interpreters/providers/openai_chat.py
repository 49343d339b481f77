"""The OpenAI Chat Completions wire format (OpenAI, OpenRouter, Groq, Ollama, vLLM, ...).

Encoding: system/developer messages, user text and files, assistant text and tool calls,
tool results, tools and tool_choice, response_format json_schema, model settings,
namespaced provider options, `stream_options.include_usage`.
Decoding: text, refusal (as text, finishing as content-filter), the reasoning fields of
compatible servers (`reasoning`, `reasoning_content`), tool calls whose arguments arrive
in fragments by index (a new id at an index already used is a new call: Ollama gives
every parallel call index 0), usage, finish reasons, `[DONE]`, and error frames or chunks.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Literal

import msgspec

from interpreters.providers import codec
from interpreters.providers.codec import DecoderBase, JsonCodec, JsonDict
from interpreters.providers.errors import broken_stream
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
from pipeline.values.ids import unique_id
from pipeline.values.messages import FilePart, Message, TextPart, ToolCallPart, ToolResultPart
from pipeline.values.model import ModelRequest, ToolChoiceTool
from pipeline.values.output_type import strict_schema
from pipeline.values.sanitize import OPENAI, SanitizeProfile


class OpenAIChatOptions(msgspec.Struct, frozen=True):
    """How one OpenAI-compatible server wants its requests."""

    system_role: Literal["system", "developer"] = "system"
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    stream_usage: bool = True
    """Send `stream_options.include_usage` so the stream reports token usage."""
    option_sections: tuple[str, ...] = ("openai",)
    """Which `provider_options` sections are merged into the body."""
    profile: SanitizeProfile = OPENAI
    """What this server accepts as tool-call ids and tool names."""


# --- encoding -------------------------------------------------------------------------


def _file_content(part: FilePart) -> JsonDict:
    mt = part.media_type
    url = part.data if part.is_url else f"data:{mt};base64,{part.data}"
    if mt.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": url}}
    if mt == "application/pdf" and not part.is_url:
        return {
            "type": "file",
            "file": {"filename": part.filename or "document.pdf", "file_data": url},
        }
    if mt in ("audio/wav", "audio/x-wav", "audio/mpeg", "audio/mp3") and not part.is_url:
        fmt = "wav" if "wav" in mt else "mp3"
        return {"type": "input_audio", "input_audio": {"data": part.data, "format": fmt}}
    if mt.startswith("text/") and not part.is_url:
        return {"type": "text", "text": base64.b64decode(part.data).decode("utf-8", "replace")}
    raise codec.unsupported_file("OpenAI chat", mt, " by URL" if part.is_url else "")


def user_message(
    m: Message, text_type: str, file_content: Callable[[FilePart], JsonDict]
) -> JsonDict | None:
    """A user message of the OpenAI formats (`text_type`: `text` here, `input_text` in
    Responses): a lone text as a plain string, else its text and file parts; None when it
    has neither."""
    content = [
        {"type": text_type, "text": p.text} if isinstance(p, TextPart) else file_content(p)
        for p in m.parts
        if isinstance(p, TextPart | FilePart)
    ]
    if len(content) == 1 and content[0]["type"] == text_type:
        return {"role": "user", "content": content[0]["text"]}
    return {"role": "user", "content": content} if content else None


def _encode_message(m: Message, system_role: str) -> list[JsonDict]:
    out: list[JsonDict] = []
    # Tool results are messages of their own in this format, whatever role carried them.
    for p in m.parts:
        if isinstance(p, ToolResultPart):
            out.append(
                {"role": "tool", "tool_call_id": p.tool_call_id,
                 "content": codec.json_text(p.result)}
            )
    if m.role == "tool":
        return out
    texts = [p.text for p in m.parts if isinstance(p, TextPart)]
    if m.role == "system":
        out.append({"role": system_role, "content": "".join(texts)})
    elif m.role == "user":
        user = user_message(m, "text", _file_content)
        if user is not None:
            out.append(user)
    else:  # assistant: reasoning is not accepted back by this format and is dropped
        calls = [
            {
                "id": p.tool_call_id,
                "type": "function",
                "function": {"name": p.tool_name, "arguments": codec.json_text(dict(p.args))},
            }
            for p in m.parts
            if isinstance(p, ToolCallPart)
        ]
        msg: JsonDict = {"role": "assistant"}
        if texts:
            msg["content"] = "".join(texts)
        if calls:
            msg["tool_calls"] = calls
        if texts or calls:
            out.append(msg)
    return out


def encode_request(
    request: ModelRequest, *, model: str, stream: bool, options: OpenAIChatOptions
) -> JsonDict:
    """The JSON body (as a dict) for one Chat Completions call."""
    messages: list[JsonDict] = [
        {"role": options.system_role, "content": s.content} for s in request.system
    ]
    for m in request.messages:
        messages.extend(_encode_message(m, options.system_role))
    body: JsonDict = {"model": model, "messages": messages}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                },
            }
            for t in request.tools
        ]
        tc = request.tool_choice
        body["tool_choice"] = (
            {"type": "function", "function": {"name": tc.tool_name}}
            if isinstance(tc, ToolChoiceTool)
            else tc
        )
    so = request.structured_output
    if so is not None:
        schema: JsonDict = {"name": so.name, "schema": dict(so.schema)}
        if so.strict:
            schema["strict"] = True
            schema["schema"] = strict_schema(so.schema)  # refs inlined, objects closed
        body["response_format"] = {"type": "json_schema", "json_schema": schema}
    s = request.model_settings
    codec.put_given(body, (
        ("temperature", s.temperature), ("top_p", s.top_p),
        (options.max_tokens_field, s.max_tokens),
        ("stop", list(s.stop) if s.stop is not None else None), ("seed", s.seed),
    ))
    body["stream"] = stream
    if stream and options.stream_usage:
        body["stream_options"] = {"include_usage": True}
    codec.merge_options(body, request.provider_options, options.option_sections)
    return body


# --- wire types for decoding ----------------------------------------------------------


class _Function(msgspec.Struct, frozen=True):
    name: str | None = None
    # Some compatible servers send the arguments as an object rather than a string.
    arguments: str | dict[str, object] | None = None


class _ToolCallDelta(msgspec.Struct, frozen=True):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct, frozen=True):
    """A stream chunk's delta, and a whole response's message (the same fields)."""

    content: str | None = None
    refusal: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None


class TokenDetails(msgspec.Struct, frozen=True):
    """What the OpenAI formats' usage says of its input (cached) and output (reasoning)."""

    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


def token_usage(
    inputs: int | None, outputs: int | None, of_input: TokenDetails | None,
    of_output: TokenDetails | None,
) -> chunks.Usage:
    """The usage an OpenAI format reports (Chat's prompt and completion, Responses' input
    and output)."""
    return chunks.Usage(
        input_tokens=inputs or 0,
        output_tokens=outputs or 0,
        reasoning_tokens=(of_output.reasoning_tokens or 0) if of_output else 0,
        cached_input_tokens=(of_input.cached_tokens or 0) if of_input else 0,
    )


class _Usage(msgspec.Struct, frozen=True):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: TokenDetails | None = None
    completion_tokens_details: TokenDetails | None = None

    def to_usage(self) -> chunks.Usage:
        return token_usage(self.prompt_tokens, self.completion_tokens,
                           self.prompt_tokens_details, self.completion_tokens_details)


class _XGroq(msgspec.Struct, frozen=True):
    usage: _Usage | None = None


class _StreamChoice(msgspec.Struct, frozen=True):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Head(msgspec.Struct, frozen=True):
    """What a stream chunk and a whole response both carry."""

    id: str | None = None
    model: str | None = None
    usage: _Usage | None = None
    error: dict[str, object] | str | None = None


class _Chunk(_Head, frozen=True):
    choices: list[_StreamChoice] | None = None
    x_groq: _XGroq | None = None


class _Choice(msgspec.Struct, frozen=True):
    index: int = 0
    message: _Delta | None = None
    finish_reason: str | None = None


class _Completion(_Head, frozen=True):
    choices: list[_Choice] | None = None


_chunk = msgspec.json.Decoder(_Chunk)
_completion = msgspec.json.Decoder(_Completion)

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}


def finish_reason(raw: str | None, *, refused: bool) -> FinishReason:
    reason = _FINISH.get(raw or "", "other")
    # A refusal is a complete answer, but not the one asked for (structured output).
    return "content-filter" if refused and reason == "stop" else reason


def _args_text(args: str | dict[str, object] | None) -> str:
    if args is None:
        return ""
    return args if isinstance(args, str) else codec.json_text(args)


# --- decoding -------------------------------------------------------------------------


class _Call:
    __slots__ = ("args", "emitted", "id", "name", "order", "wire")

    def __init__(
        self, id: str, name: str, *, order: tuple[int, int] = (0, 0), wire: str | None = None
    ) -> None:
        self.id = id
        self.name = name
        self.order = order
        """(wire index, arrival): calls complete in index order, then arrival order."""
        self.wire = wire
        """The id the server sent (None: it sent none and `id` was made up); `id` differs
        when the server reused an id for another call."""
        self.args: list[str] = []
        self.emitted = False


class OpenAIStreamDecoder(DecoderBase):
    """Chat Completions chunks -> ModelEvents. Only choice 0 is decoded."""

    def __init__(self, *, status: int = 200, request_id: str | None = None) -> None:
        super().__init__(status=status, request_id=request_id)
        self._open: tuple[Literal["text", "reasoning", "refusal"], str] | None = None
        self._blocks = 0
        self._calls: list[_Call] = []
        self._at: dict[int, _Call] = {}
        """The call open at each wire index (the latest one, when a server reuses it)."""
        self._ids: dict[str, _Call] = {}
        self._used: set[str] = set()
        self._last_index = -1
        self._finish_raw: str | None = None
        self._refused = False
        self._usage: chunks.Usage | None = None

    def feed(self, event: SseEvent) -> list[ModelEvent]:
        # `started` is set where events are returned (no wrapper call per chunk).
        data = event.data
        if event.event == "error":
            raise self._error(data.encode())
        if len(data) < 32 and data.strip() == "[DONE]":
            if self._finish_raw is None:
                # The end marker without a finish reason: the model never said it was
                # done (a proxy cut it short), so what came is not a complete answer.
                raise ProviderError(
                    broken_stream(
                        self._status,
                        "the stream ended ([DONE]) before the model gave a finish reason",
                        started=self._started,
                        error_type="incomplete_stream",
                        request_id=self._request_id,
                    )
                )
            final = self._finish_blocks()
            final.append(
                chunks.ModelFinish(
                    finish_reason(self._finish_raw, refused=self._refused),
                    self._usage or chunks.Usage(),
                    self._response_id,
                    self._model_id,
                )
            )
            self.done = True
            self._started = True
            return final
        try:
            chunk = _chunk.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise self._bad_frame("chat completion chunk", e, data) from None
        if chunk.error is not None:
            raise self._error(data.encode())
        if not self._response_id:
            self._response_id = chunk.id
        if not self._model_id:
            self._model_id = chunk.model
        if chunk.usage is not None:
            self._usage = chunk.usage.to_usage()
        elif chunk.x_groq is not None and chunk.x_groq.usage is not None:
            self._usage = chunk.x_groq.usage.to_usage()
        out: list[ModelEvent] = []
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            d = choice.delta
            if d is not None:
                o = self._open
                if (
                    d.content and o is not None and o[0] == "text" and d.tool_calls is None
                    and not (d.reasoning or d.reasoning_content or d.refusal)
                ):
                    out.append(TextDelta(o[1], d.content))  # more text: most chunks
                else:
                    self._delta(d, out)
            if choice.finish_reason is not None:
                self._finish_raw = choice.finish_reason
                out.extend(self._finish_blocks())
        if out:
            self._started = True
        return out

    def _switch(
        self, kind: Literal["text", "reasoning", "refusal"], out: list[ModelEvent]
    ) -> str:
        if self._open is not None and self._open[0] == kind:
            return self._open[1]
        self._close(out)
        block_id = f"{kind}-{self._blocks}"
        self._blocks += 1
        self._open = (kind, block_id)
        start = chunks.ReasoningStart if kind == "reasoning" else chunks.TextStart
        out.append(start(block_id))
        return block_id

    def _close(self, out: list[ModelEvent]) -> None:
        if self._open is None:
            return
        kind, block_id = self._open
        end = chunks.ReasoningEnd if kind == "reasoning" else chunks.TextEnd
        out.append(end(block_id))
        self._open = None

    def _delta(self, d: _Delta, out: list[ModelEvent]) -> None:
        reasoning = d.reasoning or d.reasoning_content
        if reasoning:
            out.append(ReasoningDelta(self._switch("reasoning", out), reasoning))
        if d.content:
            o = self._open  # a text block already open: the common case, inline
            block = o[1] if o is not None and o[0] == "text" else self._switch("text", out)
            out.append(TextDelta(block, d.content))
        if d.refusal:
            self._refused = True
            out.append(TextDelta(self._switch("refusal", out), d.refusal))
        for tc in d.tool_calls or ():
            self._tool_delta(tc, out)

    def _tool_delta(self, tc: _ToolCallDelta, out: list[ModelEvent]) -> None:
        fn = tc.function or _Function()
        call = self._ids.get(tc.id) if tc.id else None
        if call is not None and tc.index is not None and call.order[0] != tc.index:
            # The same id at another index: another call (a server that reuses ids), not
            # more arguments for the first one.
            at = self._at.get(tc.index)
            call = at if at is not None and at.wire == tc.id else None
        if call is None:
            index = tc.index
            if index is None:
                # Servers that omit the index: a new id starts a new call, else the last one.
                index = self._last_index + 1 if tc.id else max(self._last_index, 0)
            call = self._at.get(index)
            # A new id at an index already taken is a new call: Ollama's /v1 stream gives
            # every parallel call index 0 (ollama/ollama#15457).
            if call is None or (tc.id and call.wire is not None and tc.id != call.wire):
                call = _Call(
                    self._fresh_id(tc.id), fn.name or "", order=(index, len(self._calls)),
                    wire=tc.id,
                )
                self._calls.append(call)
                self._at[index] = call
                if tc.id:
                    self._ids[tc.id] = call
                self._last_index = max(self._last_index, index)
                out.append(ToolCallDelta(call.id, call.name, ""))
        if fn.name and not call.name:
            call.name = fn.name
        fragment = _args_text(fn.arguments)
        if fragment:
            call.args.append(fragment)
            out.append(ToolCallDelta(call.id, call.name, fragment))

    def _fresh_id(self, wire: str | None) -> str:
        """The id of a new call: the server's, unless an earlier call of this response
        has it (then `<id>_2`, `<id>_3`...), or a made-up one when it sent none."""
        base = wire or f"call_{self._response_id or 'x'}_{len(self._calls)}"
        return unique_id(base, self._used)

    def _finish_blocks(self) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        self._close(out)
        out.extend(
            complete_calls(
                sorted(self._calls, key=lambda c: c.order),
                truncated_ok=self._finish_raw == "length",
                status=self._status,
                request_id=self._request_id,
            )
        )
        return out


def complete_calls(
    calls: list[_Call], *, truncated_ok: bool, status: int, request_id: str | None
) -> list[ModelEvent]:
    """ToolCalls for the calls not yet emitted, in index order. A call cut off by the
    token limit is dropped (its deltas were only ever deltas); any other invalid JSON
    fails the call rather than run a tool on half its arguments."""
    out: list[ModelEvent] = []
    for call in calls:
        if call.emitted:
            continue
        call.emitted = True
        raw = "".join(call.args)
        args = codec.parse_tool_args(raw)
        if args is None:
            if truncated_ok:
                continue
            raise codec.invalid_tool_args(status, call.name, raw, request_id=request_id)
        out.append(chunks.ToolCall(call.id, call.name, args))
    return out


def decode_completion(
    body: bytes, *, status: int = 200, request_id: str | None = None
) -> list[ModelEvent]:
    """A non-streaming Chat Completions response as the same events a stream gives."""
    resp = codec.decode_response(
        _completion, body, "chat completion", lambda r: r.error is not None,
        status=status, request_id=request_id,
    )
    choice = next((c for c in resp.choices or () if c.index == 0), None)
    if choice is None or choice.message is None:
        raise codec.invalid_response(
            status, "the response has no choices", started=False, request_id=request_id
        )
    m = choice.message
    out: list[ModelEvent] = []
    reasoning = m.reasoning or m.reasoning_content
    if reasoning:
        out += [chunks.ReasoningStart("reasoning-0"),
                ReasoningDelta("reasoning-0", reasoning), chunks.ReasoningEnd("reasoning-0")]
    if m.content:
        out += [chunks.TextStart("text-0"), TextDelta("text-0", m.content),
                chunks.TextEnd("text-0")]
    if m.refusal:
        out += [chunks.TextStart("refusal-0"), TextDelta("refusal-0", m.refusal)]
        out.append(chunks.TextEnd("refusal-0"))
    calls: list[_Call] = []
    for i, tc in enumerate(m.tool_calls or ()):
        fn = tc.function or _Function()
        call = _Call(tc.id or f"call_{resp.id or 'x'}_{i}", fn.name or "")
        call.args.append(_args_text(fn.arguments))
        calls.append(call)
    out.extend(
        complete_calls(
            calls,
            truncated_ok=choice.finish_reason == "length",
            status=status,
            request_id=request_id,
        )
    )
    out.append(
        chunks.ModelFinish(
            finish_reason(choice.finish_reason, refused=bool(m.refusal)),
            resp.usage.to_usage() if resp.usage else chunks.Usage(),
            resp.id,
            resp.model,
        )
    )
    return out


class OpenAIChatCodec(JsonCodec[OpenAIChatOptions]):
    """The Codec for `/chat/completions`."""

    options_type = OpenAIChatOptions
    url_path = "/chat/completions"
    request_body = staticmethod(encode_request)
    decoder = OpenAIStreamDecoder
    decode_whole = staticmethod(decode_completion)


CHAT_COMPLETIONS = codec.wire_format("openai-chat", OpenAIChatCodec, OpenAIChatOptions)
"""The Chat Completions wire format, for the table of wire formats (providers/table.py)."""
