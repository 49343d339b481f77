"""What every wire format provides, and the pure pipeline from bytes to ModelEvents.

A codec encodes a `ModelRequest` into a request body and decodes a response (an SSE
stream or one JSON body) into `ModelEvent`s. It performs no I/O: the transport in
`http.py` hands it bytes, and the tests and the property checks do the same without a
socket. Failures are raised as `ProviderError` with a typed `ApiError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Generic, Protocol, TypeVar

import msgspec

from interpreters.providers.errors import broken_stream, stream_error
from interpreters.providers.limits import limit_exceeded
from interpreters.providers.provider import ProviderError
from interpreters.providers.sse import (
    DEFAULT_MAX_EVENT,
    FrameError,
    SseEvent,
    SseLimitError,
    SseParser,
)
from pipeline.values.bounds import json_too_deep
from pipeline.values.chunks import (
    FinishReason,
    ModelEvent,
    ModelFinish,
    ReasoningEnd,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
)
from pipeline.values.messages import (
    FilePart,
    JsonObject,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.model import (
    ApiError,
    ModelRequest,
    StructuredOutput,
    ToolChoice,
    ToolChoiceTool,
    ToolSpec,
)
from pipeline.values.sanitize import SanitizeProfile, prepare_request, restore_event

EventMap = Callable[[ModelEvent], ModelEvent]
"""Applied to every decoded event (restores sanitized tool-call ids and names)."""


def _identity(event: ModelEvent) -> ModelEvent:
    return event


class Framer(Protocol):
    """Bytes of one stream in, its frames out, whatever the split (SSE: `SseParser`).
    Raises `SseLimitError` for a frame over its cap, `FrameError` for a malformed one."""

    def feed(self, chunk: bytes) -> list[SseEvent]: ...

    def close(self) -> list[SseEvent]: ...


def _sse_parser(max_event: int) -> Framer:
    return SseParser(max_event=max_event)


class Framing(msgspec.Struct, frozen=True):
    """How a wire format frames its streamed responses."""

    media_type: str
    """Its content type (sent as `accept` on a streamed call)."""
    marker: str
    """What a response's content type holds when it is this framing."""
    parser: Callable[[int], Framer]
    """A parser for one stream, given the cap on one frame (`Limits.max_event`)."""


SSE_FRAMING = Framing("text/event-stream", "event-stream", _sse_parser)
"""Server-sent events, the framing of the JSON formats."""


class RequestSigner(Protocol):
    """Signs one request: the headers to add, for exactly this method, URL, headers and
    body (AWS SigV4). Raises `ProviderError` when it has no credentials."""

    def __call__(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes
    ) -> Mapping[str, str]: ...


SignerFactory = Callable[[str, Mapping[str, str]], RequestSigner]
"""A route's signer for its base URL and environment (`Route.signer`)."""


class Encoded(msgspec.Struct, frozen=True):
    """A request ready for the wire, and how to map its events back."""

    body: bytes
    restore: EventMap = _identity
    json_tool: str | None = None
    """Anthropic structured output rides on a forced tool; its input is the answer text."""
    framing: Framing = SSE_FRAMING
    """How its streamed response is framed."""


class StreamDecoder(Protocol):
    """Turns the events of one SSE stream into ModelEvents."""

    @property
    def done(self) -> bool:
        """True once the stream really completed ([DONE], message_stop, a finishReason)."""
        ...

    @property
    def started(self) -> bool:
        """True once any ModelEvent was produced (a retry would then duplicate output)."""
        ...

    def feed(self, event: SseEvent) -> list[ModelEvent]: ...


class Codec(Protocol):
    """One wire format (OpenAI Chat Completions, Anthropic Messages)."""

    def path(self, model: str, *, stream: bool) -> str:
        """The URL path of a call, after the route's base URL (`/chat/completions`); a
        format that names the model or the streaming in its URL says so here."""
        ...

    def headers(self, api_key: str | None) -> dict[str, str]: ...

    def encode(self, request: ModelRequest, *, model: str, stream: bool) -> Encoded: ...

    def stream_decoder(
        self, encoded: Encoded, *, status: int, request_id: str | None
    ) -> StreamDecoder: ...

    def decode_body(
        self, encoded: Encoded, body: bytes, *, status: int, request_id: str | None
    ) -> list[ModelEvent]: ...


class WireRoute(msgspec.Struct, frozen=True):
    """The route a codec is made for (a row of `providers/table.py`'s `ROUTES`)."""

    name: str
    """The route's name (`openai`, `groq`...): the `provider_options` section it reads."""
    options: msgspec.Struct | None = None
    """The route's settings for its wire format (of that format's `WireFormat.options`
    type); None: the format's defaults."""


class WireFormat(msgspec.Struct, frozen=True):
    """One wire format as data: its name and how to make its codec for a route.

    A module defines its `Codec` and one of these; `register_wire_format` (or the
    built-in table in `providers/table.py`) makes it known, and a route row names it."""

    name: str
    codec: Callable[[WireRoute], Codec]
    options: type[msgspec.Struct] | None = None
    """The type of `Route.options` this format reads; None: it takes none."""


RouteOptions = TypeVar("RouteOptions", bound=msgspec.Struct)


def route_options(route: WireRoute, kind: type[RouteOptions]) -> RouteOptions:
    """The route's options for a codec that reads `kind` (its defaults when it has none);
    `register_route` has already refused options of another type."""
    options = route.options
    if options is None:
        return kind()
    if not isinstance(options, kind):
        raise TypeError(
            f"route {route.name!r} gives {type(options).__name__}, not {kind.__name__}"
        )
    return options


Made = TypeVar("Made")


def route_codec(
    kind: type[RouteOptions], make: Callable[[RouteOptions], Made]
) -> Callable[[WireRoute], Made]:
    """A `WireFormat.codec` over options of `kind` (which have `option_sections`): the
    route's options, or the defaults, with the route reading its own `provider_options`
    section."""

    def codec(route: WireRoute) -> Made:
        options = route_options(route, kind)
        return make(msgspec.structs.replace(options, option_sections=(route.name,)))

    return codec


def wire_format(
    name: str, codec: Callable[[RouteOptions], Codec], options: type[RouteOptions]
) -> WireFormat:
    """A `WireFormat` whose codec is made from the route's options of this type
    (`route_codec`)."""
    return WireFormat(name, route_codec(options, codec), options)


class ByteStreamDecoder:
    """SSE framing + a codec's stream decoder + the event map: bytes in, events out.

    Decoding does not depend on how the bytes are split (see properties/).
    """

    def __init__(
        self,
        decoder: StreamDecoder,
        restore: EventMap,
        *,
        status: int,
        request_id: str | None,
        max_event: int = DEFAULT_MAX_EVENT,
        max_stream: int | None = None,
        framing: Framing = SSE_FRAMING,
    ) -> None:
        self._sse = framing.parser(max_event)
        self._max_stream = max_stream
        self._left: float = math.inf if max_stream is None else max_stream
        """Bytes the stream may still take (`Limits.max_stream`)."""
        self._decoder = decoder
        self._restore: EventMap | None = None if restore is _identity else restore
        self._status = status
        self._request_id = request_id
        self._failure: ProviderError | None = None

    @property
    def done(self) -> bool:
        return self._decoder.done

    @property
    def started(self) -> bool:
        return self._decoder.started

    def feed(self, chunk: bytes) -> list[ModelEvent]:
        if self._failure is not None:
            raise self._failure
        self._left -= len(chunk)
        if self._left < 0:
            raise self._stream_too_large()
        try:
            events = self._sse.feed(chunk)
        except SseLimitError as e:
            raise self._too_large(e) from None
        except FrameError as e:
            if self._decoder.done:
                return []  # what follows the end of the answer is not part of it
            raise self._malformed(e) from None
        decoder = self._decoder
        if len(events) == 1 and self._restore is None and not decoder.done:
            # One event per read, nothing to rename: `_run` for that case, inline.
            try:
                return decoder.feed(events[0])
            except ProviderError as e:
                self._failure = e
                raise
        return self._run(events)

    def close(self) -> list[ModelEvent]:
        """The byte stream ended: flush, and fail unless the stream completed."""
        self._raise_pending()
        try:
            events = self._sse.close()
        except SseLimitError as e:
            raise self._too_large(e) from None
        except FrameError as e:
            if not self._decoder.done:
                raise self._malformed(e) from None
            events = []  # what follows the end of the answer is not part of it
        out = self._run(events)
        if out and self._failure is not None:
            return out  # hand these over first; the next call raises
        if not self._decoder.done:
            raise ProviderError(
                broken_stream(
                    self._status,
                    "the stream ended before the model finished "
                    "(no [DONE] / message_stop / response.completed / finishReason)",
                    started=self._decoder.started,
                    error_type="incomplete_stream",
                    request_id=self._request_id,
                )
            )
        return out

    def _stream_too_large(self) -> ProviderError:
        self._failure = limit_exceeded(
            self._status,
            f"the streamed response is larger than its cap of {self._max_stream} bytes "
            "(Limits)",
            started=self._decoder.started, request_id=self._request_id,
        )
        return self._failure

    def _malformed(self, e: FrameError) -> ProviderError:
        self._failure = invalid_response(
            self._status, f"a stream frame is malformed: {e}", started=self._decoder.started,
            request_id=self._request_id,
        )
        return self._failure

    def _too_large(self, e: SseLimitError) -> ProviderError:
        self._failure = limit_exceeded(
            self._status, str(e), started=self._decoder.started, request_id=self._request_id
        )
        return self._failure

    @property
    def failure(self) -> ProviderError | None:
        return self._failure

    def check(self) -> None:
        """Raise a failure whose preceding events were returned first (call after close)."""
        self._raise_pending()

    def _raise_pending(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _run(self, events: list[SseEvent]) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        decoder, restore = self._decoder, self._restore
        for sse in events:
            if decoder.done:
                break  # whatever follows the end marker is not part of the answer
            try:
                decoded = decoder.feed(sse)
            except ProviderError as e:
                # Events decoded from earlier frames of the same read are delivered
                # first (the caller keeps partial output); the failure comes next.
                self._failure = e
                if not out:
                    raise
                return out
            if restore is not None:
                out.extend([restore(e) for e in decoded])
            elif out:
                out.extend(decoded)
            else:
                out = decoded  # one frame per read is the common case: no copy
        return out


# --- helpers shared by the codecs -------------------------------------------------------

_json_object = msgspec.json.Decoder(dict[str, object])
_encoder = msgspec.json.Encoder()


def parse_tool_args(raw: str) -> dict[str, object] | None:
    """A tool call's arguments as a JSON object; None when truncated or not an object.

    Arguments nested deeper than `MAX_JSON_DEPTH` are refused (None) as well.
    Empty arguments mean "no arguments" (Anthropic streams "" for a tool without input,
    and some compatible servers do the same).
    """
    if not raw.strip():
        return {}
    if json_too_deep(raw):  # what the decoder would descend into past the recursion limit
        return None
    try:
        return _json_object.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def signed_for(part: ReasoningPart, route: str) -> bool:
    """Whether a reasoning part's signature may go to `route`: the route that signed it,
    or an unknown one (a part recorded before routes were). A step that switched provider
    never sends another provider's signature (or its redacted reasoning)."""
    return part.provider is None or part.provider == route


def json_text(value: object) -> str:
    """A tool result for the wire: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        return _encoder.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return str(value)


def encode_body(body: Mapping[str, object]) -> bytes:
    return _encoder.encode(body)


def merge_options(
    body: dict[str, object], options: JsonObject | None, sections: tuple[str, ...]
) -> None:
    """Merge `provider_options[section]` into the body, for each section this codec reads.

    Options are namespaced (`{"openai": {...}, "anthropic": {...}}`) so one request can
    carry settings for several providers when a step switches models.
    """
    if not options:
        return
    for section in sections:
        extra = options.get(section)
        if isinstance(extra, Mapping):
            for k, v in extra.items():
                body[str(k)] = v
    n = body.get("n")
    if n is not None and n != 1:
        # The loop reads one choice: more would be billed (and counted) but never seen.
        raise ProviderError(
            ApiError(
                status=None,
                message=f"provider option n={n!r} asks for several choices; the agent loop "
                "uses exactly one (leave n out, or set it to 1)",
                error_type="configuration",
                retryable=False,
            )
        )


def invalid_response(
    status: int, message: str, *, started: bool, request_id: str | None, body: str | None = None
) -> ProviderError:
    return ProviderError(
        broken_stream(
            status,
            message,
            started=started,
            error_type="invalid_response",
            request_id=request_id,
            body=body,
        )
    )


def invalid_tool_args(
    status: int, tool_name: str, raw: str, *, request_id: str | None
) -> ProviderError:
    # Never handed on as a ToolCall: running a tool on half its arguments is worse than
    # failing the call. Not retryable here: deltas were already delivered.
    return ProviderError(
        ApiError(
            status=status,
            message=f"the model sent invalid JSON arguments for tool {tool_name!r}",
            error_type="invalid_tool_arguments",
            request_id=request_id,
            retryable=False,
            body=raw[:2000],
        )
    )


def merge_turns(
    request: ModelRequest,
    blocks: Callable[[Message], list[JsonDict]],
    is_result: Callable[[JsonDict], bool],
    *,
    assistant: str = "assistant",
    content: str = "content",
) -> tuple[list[JsonDict], list[str]]:
    """Wire messages for the formats whose turns alternate between user and assistant
    (Anthropic, Bedrock; Gemini, whose assistant is `model` and whose blocks are its
    `parts`): system messages hoisted out (returned after the request's own system
    texts), tool results sent as the user, turns of one role merged, empty ones dropped,
    and a user turn's tool results first (they answer the calls before it)."""
    system: list[str] = [s.content for s in request.system]
    turns: list[tuple[str, list[JsonDict]]] = []
    for m in request.messages:
        if m.role == "system":
            system.append(m.text)
            continue
        role = assistant if m.role == "assistant" else "user"
        wire = blocks(m)
        if not wire:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(wire)
        else:
            turns.append((role, wire))
    messages: list[JsonDict] = []
    for role, wire in turns:
        if role == "user":
            wire = [b for b in wire if is_result(b)] + [b for b in wire if not is_result(b)]
        messages.append({"role": role, content: wire})
    return messages, system


class BlockWire(msgspec.Struct, frozen=True, kw_only=True):
    """How a format that sends a turn as typed content blocks (Anthropic, Bedrock) writes
    each kind of block; `content_blocks` says which parts are sent."""

    text: Callable[[str], JsonDict]
    tool_result: Callable[[ToolResultPart], JsonDict]
    tool_call: Callable[[ToolCallPart], JsonDict]
    thinking: Callable[[str, str], JsonDict]
    """Reasoning sent back: its text and its signature."""
    redacted: Callable[[str], JsonDict]
    """Redacted reasoning sent back: its opaque data."""


def content_blocks(
    m: Message, route: str, wire: BlockWire, file_block: Callable[[FilePart], JsonDict]
) -> list[JsonDict]:
    """The blocks of `m` to send on `route`, written by `wire` (files by `file_block`).

    Text when not empty (the APIs reject empty text blocks); a tool result always; a file
    from the user side only, a tool call from the assistant only; reasoning from the
    assistant only, with its signature or as the redacted data it came as (the model
    verifies it), never another provider's (`signed_for`)."""
    out: list[JsonDict] = []
    assistant = m.role == "assistant"
    for p in m.parts:
        if isinstance(p, TextPart):
            if p.text:
                out.append(wire.text(p.text))
        elif isinstance(p, ToolResultPart):
            out.append(wire.tool_result(p))
        elif isinstance(p, FilePart):
            if not assistant:
                out.append(file_block(p))
        elif isinstance(p, ToolCallPart):
            if assistant:
                out.append(wire.tool_call(p))
        elif isinstance(p, ReasoningPart) and assistant and signed_for(p, route):
            if p.redacted is not None:
                out.append(wire.redacted(p.redacted))
            elif p.signature:
                out.append(wire.thinking(p.text, p.signature))
    return out


def unsupported_file(wire: str, media_type: str, how: str = "") -> ProviderError:
    """A file part this wire format cannot carry (`how`: " by URL", say)."""
    return ProviderError(
        ApiError(
            status=None,
            message=f"the {wire} format cannot send a {media_type} file{how}",
            error_type="unsupported_content",
        )
    )


V = TypeVar("V")


def put_given(target: MutableMapping[str, V], items: Iterable[tuple[str, V | None]]) -> None:
    """Set each item whose value is given (not None): settings into a body or attributes."""
    for key, value in items:
        if value is not None:
            target[key] = value


Response = TypeVar("Response")


def decode_response(
    decoder: msgspec.json.Decoder[Response],
    body: bytes,
    what: str,
    failed: Callable[[Response], bool],
    *,
    status: int,
    request_id: str | None,
) -> Response:
    """A non-streaming response body decoded; raises for one that is not `what` or that
    `failed` says is an error object instead."""
    try:
        response = decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise invalid_response(
            status, f"the response is not a valid {what}: {e}", started=False,
            request_id=request_id, body=body[:2000].decode("utf-8", "replace"),
        ) from None
    if failed(response):
        raise ProviderError(stream_error(status, body, started=False, request_id=request_id))
    return response


class _Profiled(Protocol):
    @property
    def profile(self) -> SanitizeProfile: ...


CodecOptions = TypeVar("CodecOptions", bound=_Profiled)
CodecOptions_contra = TypeVar("CodecOptions_contra", bound=_Profiled, contravariant=True)

JsonDict = dict[str, object]


class BodyEncoder(Protocol[CodecOptions_contra]):
    """A format's `encode_request`: the JSON body of one call, as a dict."""

    def __call__(
        self, request: ModelRequest, *, model: str, stream: bool, options: CodecOptions_contra
    ) -> JsonDict: ...


class DecoderType(Protocol):
    """A format's stream decoder class, made for one response."""

    def __call__(self, *, status: int, request_id: str | None) -> StreamDecoder: ...


class BodyDecoder(Protocol):
    """A format's decoding of one non-streamed response body into the stream's events."""

    def __call__(
        self, body: bytes, *, status: int, request_id: str | None
    ) -> list[ModelEvent]: ...


class JsonCodec(Generic[CodecOptions]):
    """What the JSON wire formats' codecs share: their options and repr, the encoding
    step that fits tool-call ids and names to the server (`Encoded.restore` maps the
    events back), and the parts that differ between formats only by data, given as class
    attributes: the options' type, the URL path, the header that carries the key, the
    body encoder and the decoders. A format whose URL, headers or body need more
    overrides `path`, `headers` or `body`."""

    options_type: type[CodecOptions]
    """Its options' type; a codec made without options takes its defaults."""
    url_path = ""
    """The URL path of every call, after the route's base URL (`/chat/completions`)."""
    key_header = "authorization"
    """The header that carries the API key, after `key_prefix` (none without a key)."""
    key_prefix = "Bearer "
    request_body: BodyEncoder[CodecOptions]
    decoder: DecoderType
    decode_whole: BodyDecoder

    def __init__(self, options: CodecOptions | None = None) -> None:
        self.options = self.options_type() if options is None else options

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options!r})"

    def path(self, model: str, *, stream: bool) -> str:
        return self.url_path

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {self.key_header: self.key_prefix + api_key} if api_key else {}

    output_modes: frozenset[str] = frozenset({"auto", "native", "tool", "prompted"})
    """The `StructuredOutput.mode`s it can send (`prompted` never reaches a codec: the
    loop puts the schema in the instructions)."""

    @property
    def route(self) -> str:
        """The route it is made for (the `provider_options` section it reads)."""
        sections: tuple[str, ...] = getattr(self.options, "option_sections", ())
        return sections[0] if sections else ""

    def check_output(self, so: StructuredOutput) -> None:
        """Raise (a configuration error) for structured output in a mode it cannot send."""
        if so.mode not in self.output_modes:
            can = ", ".join(sorted(self.output_modes - {"auto"}))
            raise ProviderError(ApiError(
                status=None, error_type="configuration", retryable=False,
                message=f"route {self.route!r} cannot send typed output in mode "
                        f"{so.mode!r} (it can: {can})",
            ))

    def encode(self, request: ModelRequest, *, model: str, stream: bool) -> Encoded:
        so = request.structured_output
        output_tool: str | None = None
        if so is not None:
            self.check_output(so)
            if so.mode == "tool" and not isinstance(self, ForcedToolCodec):
                request, output_tool = output_tool_request(request, so)
        # Pairing repaired and ids/names fitted to the server; events are mapped back.
        request, names = prepare_request(request, self.options.profile)
        body, json_tool = self.body(request, model=model, stream=stream)
        json_tool = json_tool or output_tool
        if names.is_identity:
            return Encoded(encode_body(body), json_tool=json_tool)
        return Encoded(encode_body(body), lambda e: restore_event(e, names), json_tool=json_tool)

    def body(
        self, request: ModelRequest, *, model: str, stream: bool
    ) -> tuple[JsonDict, str | None]:
        """The request body, and the name of the tool structured output rides on, if any."""
        return self.request_body(request, model=model, stream=stream, options=self.options), None

    def stream_decoder(
        self, encoded: Encoded, *, status: int, request_id: str | None
    ) -> StreamDecoder:
        dec = self.decoder(status=status, request_id=request_id)
        if isinstance(dec, DecoderBase):
            dec.provider = self.route
        if encoded.json_tool is not None:  # the forced output tool of `tool` mode
            return OutputToolDecoder(dec, encoded.json_tool)
        return dec

    def decode_body(
        self, encoded: Encoded, body: bytes, *, status: int, request_id: str | None
    ) -> list[ModelEvent]:
        events = signed_by(
            self.decode_whole(body, status=status, request_id=request_id), self.route)
        if encoded.json_tool is not None:
            return OutputToolEvents(encoded.json_tool).map(events)
        return events


class ToolDecoderType(Protocol):
    """`DecoderType` of a format whose structured output rides on a forced tool."""

    def __call__(
        self, *, json_tool: str | None, status: int, request_id: str | None
    ) -> StreamDecoder: ...


class ToolBodyDecoder(Protocol):
    """`BodyDecoder` of a format whose structured output rides on a forced tool."""

    def __call__(
        self, body: bytes, *, json_tool: str | None, status: int, request_id: str | None
    ) -> list[ModelEvent]: ...


class ForcedToolCodec(JsonCodec[CodecOptions]):
    """A JSON codec whose structured output rides on a forced tool (Anthropic, Bedrock):
    its `body` names that tool, and its decoders are told the name (the tool's input is
    the answer text). It has no native mode."""

    tool_decoder: ToolDecoderType
    decode_tool_whole: ToolBodyDecoder
    output_modes = frozenset({"auto", "tool", "prompted"})

    def stream_decoder(
        self, encoded: Encoded, *, status: int, request_id: str | None
    ) -> StreamDecoder:
        dec = self.tool_decoder(json_tool=encoded.json_tool, status=status,
                                request_id=request_id)
        if isinstance(dec, DecoderBase):
            dec.provider = self.route
        return dec

    def decode_body(
        self, encoded: Encoded, body: bytes, *, status: int, request_id: str | None
    ) -> list[ModelEvent]:
        return signed_by(self.decode_tool_whole(
            body, json_tool=encoded.json_tool, status=status, request_id=request_id
        ), self.route)


def signed_by(events: list[ModelEvent], route: str) -> list[ModelEvent]:
    """A whole body's events with what its reasoning carries tagged with `route`."""
    return [
        msgspec.structs.replace(e, provider=route)
        if type(e) is ReasoningEnd and (e.signature is not None or e.redacted is not None)
        and e.provider is None else e
        for e in events
    ]


def output_tool_request(request: ModelRequest, so: StructuredOutput) -> tuple[ModelRequest, str]:
    """`tool` mode on a format with a native one: the request with a forced tool whose
    input schema is the output's (with the agent's own tools, the model must call one:
    those or the output tool), and that tool's name."""
    name = output_tool_name(so.name)
    tc = request.tool_choice
    choice: ToolChoice = (
        "required" if request.tools and tc in ("auto", "required")
        else tc if request.tools and isinstance(tc, ToolChoiceTool)
        else ToolChoiceTool(name)
    )
    spec = ToolSpec(name, OUTPUT_TOOL_DESCRIPTION, dict(so.schema))
    return msgspec.structs.replace(
        request, tools=(*request.tools, spec), tool_choice=choice, structured_output=None
    ), name


class OutputToolEvents:
    """The forced output tool's call as the answer's text: its argument deltas as text
    deltas (its whole arguments when none streamed), and the finish a stop."""

    __slots__ = ("_name", "_open", "_used")

    TEXT_ID = "text-output"

    def __init__(self, name: str) -> None:
        self._name = name
        self._open = False
        self._used = False

    def map(self, events: list[ModelEvent]) -> list[ModelEvent]:
        out: list[ModelEvent] = []
        name = self._name
        for e in events:
            t = type(e)
            if t is ToolCallDelta and e.tool_name == name:  # type: ignore[union-attr]
                assert isinstance(e, ToolCallDelta)
                if not self._open:
                    self._open = True
                    out.append(TextStart(self.TEXT_ID))
                if e.args_delta:
                    out.append(TextDelta(self.TEXT_ID, e.args_delta))
            elif t is ToolCall and e.tool_name == name:  # type: ignore[union-attr]
                assert isinstance(e, ToolCall)
                if not self._open:
                    out += (TextStart(self.TEXT_ID), TextDelta(self.TEXT_ID, json_text(e.args)))
                out.append(TextEnd(self.TEXT_ID))
                self._open, self._used = False, True
            elif t is ModelFinish and self._used:
                assert isinstance(e, ModelFinish)
                out.append(e if e.finish_reason != "tool-calls"
                           else msgspec.structs.replace(e, finish_reason="stop"))
            else:
                out.append(e)
        return out


class OutputToolDecoder:
    """A stream decoder whose forced output tool's call comes out as text
    (`OutputToolEvents`)."""

    __slots__ = ("_events", "_inner")

    def __init__(self, inner: StreamDecoder, name: str) -> None:
        self._inner = inner
        self._events = OutputToolEvents(name)

    @property
    def done(self) -> bool:
        return self._inner.done

    @property
    def started(self) -> bool:
        return self._inner.started

    def feed(self, event: SseEvent) -> list[ModelEvent]:
        return self._events.map(self._inner.feed(event))


class DecoderBase:
    """What the stream decoders share: the response's status and request id, whether
    the stream is done or started, what the server said it was, and the errors."""

    def __init__(self, *, status: int, request_id: str | None) -> None:
        self._status = status
        self._request_id = request_id
        self.done = False
        """True once the stream really completed (a plain attribute: read per chunk)."""
        self._started = False
        self._response_id: str | None = None
        self._model_id: str | None = None
        self.provider: str | None = None
        """The route whose model this is (set by its codec): what it signs is its."""

    @property
    def started(self) -> bool:
        return self._started

    def _reasoning_end(
        self, block: str, signature: str | None, redacted: str | None = None
    ) -> ReasoningEnd:
        """The end of a reasoning block; what it carries to send back is tagged with the
        route that signed it (`codec.signed_for`)."""
        signed = signature is not None or redacted is not None
        return ReasoningEnd(block, signature, redacted, self.provider if signed else None)

    def _error(self, body: bytes) -> ProviderError:
        """An error the server sent in the stream."""
        return ProviderError(
            stream_error(self._status, body, started=self._started, request_id=self._request_id)
        )

    def _invalid(self, message: str, body: str | None = None) -> ProviderError:
        return invalid_response(
            self._status, message, started=self._started, request_id=self._request_id,
            body=body,
        )

    def _bad_frame(self, what: str, e: Exception, data: str) -> ProviderError:
        return self._invalid(f"a stream data frame is not a valid {what}: {e}", data[:2000])


# --- the formats whose structured output rides on a forced tool (Anthropic, Bedrock) ----

OUTPUT_TOOL_DESCRIPTION = "Respond with a JSON object that matches this schema."
"""The forced output tool's description (its input schema is the output schema)."""

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def output_tool_name(name: str) -> str:
    """The forced output tool's name: the output type's, when it is a valid tool name."""
    return name if _TOOL_NAME.match(name) else "output"


def forced_tool_reason(
    reasons: Mapping[str, FinishReason], raw: str | None, *, json_tool_used: bool
) -> FinishReason:
    """The finish reason for the server's `raw` one (`other` when unknown)."""
    reason = reasons.get(raw or "", "other")
    # The forced output tool is the answer, not a call to run.
    return "stop" if json_tool_used and reason == "tool-calls" else reason


class ForcedToolDecoder(DecoderBase):
    """What the forced-tool formats' stream decoders share: the output tool's name and
    whether the model called it, the stop reason, and the tool calls whose arguments did
    not parse (held until the stop: max tokens may have cut them)."""

    def __init__(self, *, json_tool: str | None, status: int, request_id: str | None) -> None:
        super().__init__(status=status, request_id=request_id)
        self._json_tool = json_tool
        self._json_used = False
        self._stop_reason: str | None = None
        self._truncated: list[tuple[str, str]] = []

    def _check_truncated(self) -> None:
        """Fail for a call whose arguments did not parse, unless max tokens cut it short."""
        if self._truncated and self._stop_reason != "max_tokens":
            name, raw = self._truncated[0]
            raise invalid_tool_args(self._status, name, raw, request_id=self._request_id)
