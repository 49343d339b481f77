"""A run's chunks for the web: the AI SDK UI message stream, and NDJSON. Pure, no I/O.

The UI message stream (protocol v1, as the AI SDK's `useChat` reads it) is server-sent
events, one JSON part per `data:` line, ending with `data: [DONE]`; the response carries
the header `x-vercel-ai-ui-message-stream: v1` (`UI_MESSAGE_STREAM_HEADERS`).

    for frame in ui_message_sse(stream):          # a sync run stream, or
    async for frame in ui_message_sse_async(s):   # an async one
        send(frame)                               # bytes, ready for the response body

`ui_start` / `ui_parts` / `ui_end` are the pure steps underneath: a frozen state and a
chunk in, the new state and the parts to send out. How the run's chunks map:

- step-start / step-finish: `start-step` / `finish-step`; text-* and reasoning-*: the
  same; a tool call's argument deltas: `tool-input-start` then `tool-input-delta`; the
  call: `tool-input-available`; its result or error: `tool-output-available` /
  `tool-output-error`; a source: `source-url`; `data-*` chunks: data parts. A tool the
  provider ran (`server-tool-call`, `server-tool-result`) is the same parts with
  `providerExecuted: true`, as the AI SDK streams one.
- A call waiting for approval (the run suspends): `tool-approval-request` (its
  `approvalId` the digest a decision is bound to), not closed with an error; the
  decision a resumed run goes on with: `tool-approval-response`, and a denied call's
  result `tool-output-denied` (the AI SDK's tool-approval parts, for `useChat`).
- A step whose model failed mid-answer and that a fallback model takes over
  (`StepReset`): a `data-step-reset` part naming the parts it streamed (`part_ids`, to
  drop), the step closed and opened again for the next model's answer. The typed
  output as it grows (`OutputPartial`): a transient `data-output-partial` part with the
  partial JSON object.
- A step a processor discarded for a retry is marked, never merged into the answer: the
  loop's `data-step-discarded` chunk goes out as a data part kept in the message (not
  transient), with `part_ids` naming the text, reasoning and tool parts of that step,
  and the step is closed, so the retried answer becomes new parts.
- An error chunk (a failed or cancelled run): `error`; a processor's tripwire: a
  `data-tripwire` part (its reason, retry flag and processor id: never its metadata,
  where a guard keeps its scores and categories, server-side), then an `error` part with
  its reason (what `useChat` shows).
  Before either, every part still open is closed: text and reasoning get their end, a
  tool call without its output gets a `tool-output-error` with the reason. The stream
  always ends with `finish` (parts left open closed first), so the client settles.

Only the fields the protocol defines are sent: AI SDK checks parts against strict
schemas, so an extra key would fail the client's stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from contextlib import aclosing
from typing import Literal

import msgspec

from pipeline.values import chunks as c
from pipeline.values.chunks import Chunk, chunk_encoder
from pipeline.values.messages import Message, TextPart
from pipeline.values.sse import SSEFold, sse_data

Headers = tuple[tuple[bytes, bytes], ...]

UI_MESSAGE_STREAM_HEADERS: Headers = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-vercel-ai-ui-message-stream", b"v1"),
    (b"x-accel-buffering", b"no"),  # proxies (nginx) must not buffer the stream
)
NDJSON_HEADERS: Headers = ((b"content-type", b"application/x-ndjson"),)
SSE_DONE = b"data: [DONE]\n\n"
DISCARDED = "data-step-discarded"
RESET = "data-step-reset"
PARTIAL_OUTPUT = "data-output-partial"


class _Part(
    msgspec.Struct, frozen=True, tag_field="type", rename="camel", omit_defaults=True
):
    """One part of the UI message stream; `type` is its tag."""


class UIStart(_Part, frozen=True, tag="start"):
    message_id: str | None = None


class UIStartStep(_Part, frozen=True, tag="start-step"):
    pass


class UIFinishStep(_Part, frozen=True, tag="finish-step"):
    pass


class UIFinish(_Part, frozen=True, tag="finish"):
    pass


class UITextStart(_Part, frozen=True, tag="text-start"):
    id: str


class UITextDelta(_Part, frozen=True, tag="text-delta"):
    id: str
    delta: str


class UITextEnd(_Part, frozen=True, tag="text-end"):
    id: str


class UIReasoningStart(_Part, frozen=True, tag="reasoning-start"):
    id: str


class UIReasoningDelta(_Part, frozen=True, tag="reasoning-delta"):
    id: str
    delta: str


class UIReasoningEnd(_Part, frozen=True, tag="reasoning-end"):
    id: str


class UIToolInputStart(_Part, frozen=True, tag="tool-input-start"):
    tool_call_id: str
    tool_name: str


class UIToolInputDelta(_Part, frozen=True, tag="tool-input-delta"):
    tool_call_id: str
    input_text_delta: str


class UIToolInputAvailable(_Part, frozen=True, tag="tool-input-available"):
    tool_call_id: str
    tool_name: str
    input: object
    provider_executed: bool | None = None


class UIToolOutputAvailable(_Part, frozen=True, tag="tool-output-available"):
    tool_call_id: str
    output: object
    provider_executed: bool | None = None


class UIToolOutputError(_Part, frozen=True, tag="tool-output-error"):
    tool_call_id: str
    error_text: str
    provider_executed: bool | None = None


class UIToolApprovalRequest(_Part, frozen=True, tag="tool-approval-request"):
    approval_id: str
    tool_call_id: str


class UIToolApprovalResponse(_Part, frozen=True, tag="tool-approval-response"):
    approval_id: str
    approved: bool
    reason: str | None = None
    decided_by: str | None = None
    """Who decided (`decidedBy`; left out when the decision named no one)."""


class UIToolOutputDenied(_Part, frozen=True, tag="tool-output-denied"):
    tool_call_id: str


class UISourceUrl(_Part, frozen=True, tag="source-url"):
    source_id: str
    url: str
    title: str | None = None


class UIError(_Part, frozen=True, tag="error"):
    error_text: str


class UIData(msgspec.Struct, frozen=True, omit_defaults=True):
    """A `data-*` part: its `type` is the chunk's name (so it cannot be a fixed tag)."""

    type: str
    data: object
    id: str | None = None
    transient: bool = False


UIPart = (
    UIStart
    | UIStartStep
    | UIFinishStep
    | UIFinish
    | UITextStart
    | UITextDelta
    | UITextEnd
    | UIReasoningStart
    | UIReasoningDelta
    | UIReasoningEnd
    | UIToolInputStart
    | UIToolInputDelta
    | UIToolInputAvailable
    | UIToolOutputAvailable
    | UIToolOutputError
    | UIToolApprovalRequest
    | UIToolApprovalResponse
    | UIToolOutputDenied
    | UISourceUrl
    | UIError
    | UIData
)


class UIStreamState(msgspec.Struct, frozen=True):
    """Where the UI stream is: what is open, and what the open step streamed."""

    step_open: bool = False
    step_parts: tuple[str, ...] = ()
    """Ids of the text, reasoning and tool parts of the open step (for a discard)."""
    tool_inputs: tuple[str, ...] = ()
    """Tool calls of the open step whose `tool-input-start` went out."""
    finished: bool = False
    open_text: tuple[str, ...] = ()
    """Text parts started and not ended (closed when the run stops short)."""
    open_reasoning: tuple[str, ...] = ()
    inputs_open: tuple[str, ...] = ()
    """Tool calls whose input is streaming (started, not yet available)."""
    awaiting: tuple[str, ...] = ()
    """Tool calls of the open step whose input is available and output not yet sent."""
    denied: tuple[str, ...] = ()
    """Tool calls an approver denied: their error result is `tool-output-denied`."""


def ui_start(message_id: str | None = None) -> tuple[UIStreamState, tuple[UIPart, ...]]:
    """The first part; without `message_id` the client makes one up."""
    return UIStreamState(), (UIStart(message_id),)


def ui_parts(state: UIStreamState, chunk: Chunk) -> tuple[UIStreamState, tuple[UIPart, ...]]:
    """The parts one chunk becomes, and the state after it."""
    if state.finished:
        return state, ()  # nothing follows `finish` but `[DONE]`
    t = type(chunk)
    if t is c.TextDelta:
        assert isinstance(chunk, c.TextDelta)
        return state, (UITextDelta(chunk.id, chunk.text),)
    if t is c.ReasoningDelta:
        assert isinstance(chunk, c.ReasoningDelta)
        return state, (UIReasoningDelta(chunk.id, chunk.text),)
    if isinstance(chunk, c.TextStart):
        state = msgspec.structs.replace(state, open_text=(*state.open_text, chunk.id))
        return _with_part(state, chunk.id), (UITextStart(chunk.id),)
    if isinstance(chunk, c.TextEnd):
        open_text = _without(state.open_text, chunk.id)
        return msgspec.structs.replace(state, open_text=open_text), (UITextEnd(chunk.id),)
    if isinstance(chunk, c.ReasoningStart):
        state = msgspec.structs.replace(
            state, open_reasoning=(*state.open_reasoning, chunk.id))
        return _with_part(state, chunk.id), (UIReasoningStart(chunk.id),)
    if isinstance(chunk, c.ReasoningEnd):
        state = msgspec.structs.replace(
            state, open_reasoning=_without(state.open_reasoning, chunk.id))
        return state, (UIReasoningEnd(chunk.id),)
    if isinstance(chunk, c.ToolCallDelta):
        delta = UIToolInputDelta(chunk.tool_call_id, chunk.args_delta)
        if chunk.tool_call_id in state.tool_inputs:
            return state, (delta,)
        state = msgspec.structs.replace(
            _with_part(state, chunk.tool_call_id),
            tool_inputs=(*state.tool_inputs, chunk.tool_call_id),
            inputs_open=(*state.inputs_open, chunk.tool_call_id),
        )
        return state, (UIToolInputStart(chunk.tool_call_id, chunk.tool_name), delta)
    if isinstance(chunk, c.ToolCall):
        available = UIToolInputAvailable(chunk.tool_call_id, chunk.tool_name, chunk.args)
        cid = chunk.tool_call_id
        if cid not in state.tool_inputs:  # no delta named it yet
            state = _with_part(state, cid)
        return msgspec.structs.replace(
            state, inputs_open=_without(state.inputs_open, cid),
            awaiting=(*state.awaiting, cid),
        ), (available,)
    if isinstance(chunk, c.ServerToolCall):
        # A tool the provider ran: shown as the AI SDK shows one (`providerExecuted`);
        # until its result comes it is awaited, so a run stopped short closes it.
        cid = chunk.tool_call_id
        state = msgspec.structs.replace(_with_part(state, cid), awaiting=(*state.awaiting, cid))
        return state, (UIToolInputAvailable(cid, chunk.tool_name, chunk.args, True),)
    if isinstance(chunk, c.ServerToolResult):
        cid = chunk.tool_call_id
        state = msgspec.structs.replace(state, awaiting=_without(state.awaiting, cid))
        if chunk.is_error:
            return state, (UIToolOutputError(cid, _error_text(chunk.result), True),)
        return state, (UIToolOutputAvailable(cid, chunk.result, True),)
    if isinstance(chunk, c.ToolResult):
        state = msgspec.structs.replace(
            state, awaiting=_without(state.awaiting, chunk.tool_call_id))
        return state, (UIToolOutputAvailable(chunk.tool_call_id, chunk.result),)
    if isinstance(chunk, c.ToolError):
        cid = chunk.tool_call_id
        state = msgspec.structs.replace(state, awaiting=_without(state.awaiting, cid))
        if cid in state.denied:
            state = msgspec.structs.replace(state, denied=_without(state.denied, cid))
            return state, (UIToolOutputDenied(cid),)
        return state, (UIToolOutputError(cid, chunk.error),)
    if isinstance(chunk, c.ToolApprovalRequest):
        # the call waits for a person (the run suspends): not an output that never came
        state = msgspec.structs.replace(
            state, awaiting=_without(state.awaiting, chunk.tool_call_id))
        return state, (UIToolApprovalRequest(chunk.approval_id, chunk.tool_call_id),)
    if isinstance(chunk, c.ToolApprovalResponse):
        if not chunk.approved:
            state = msgspec.structs.replace(state, denied=(*state.denied, chunk.tool_call_id))
        return state, (UIToolApprovalResponse(chunk.approval_id, chunk.approved, chunk.reason,
                                              chunk.decided_by),)
    if isinstance(chunk, c.SourceChunk):
        return state, (UISourceUrl(chunk.source_id, chunk.url, chunk.title),)
    if isinstance(chunk, c.StepStart):
        state, closing = _close_step(state)
        return msgspec.structs.replace(state, step_open=True), (*closing, UIStartStep())
    if isinstance(chunk, c.StepFinish):
        return _close_step(state)
    if isinstance(chunk, c.Finish):
        state, closing = _close_step(state)
        return msgspec.structs.replace(state, finished=True), (*closing, UIFinish())
    if isinstance(chunk, c.OutputPartial):
        return state, (UIData(PARTIAL_OUTPUT, chunk.data, transient=True),)
    if isinstance(chunk, c.StepReset):
        return _reset(state, chunk)
    if isinstance(chunk, c.DataChunk):
        if chunk.name == DISCARDED:
            return _discarded(state, chunk)
        return state, (UIData(chunk.name, chunk.data, transient=chunk.transient),)
    if isinstance(chunk, c.ErrorChunk):
        text = f"{chunk.kind}: {chunk.message}"
        state, closing = _close_parts(state, text)
        return state, (*closing, UIError(text))
    if isinstance(chunk, c.Tripwire):
        # The run stopped short: what is open is closed, and the reason goes out as the
        # `error` part `useChat` shows. The data part carries the reason, retry flag and
        # processor id; a guard's metadata (scores, categories) stays server-side.
        text = f"blocked by {chunk.processor_id}: {chunk.reason}"
        state, closing = _close_parts(state, text)
        data = {"reason": chunk.reason, "retry": chunk.retry,
                "processor_id": chunk.processor_id}
        return state, (*closing, UIData("data-tripwire", data), UIError(text))
    return state, ()


def ui_end(state: UIStreamState) -> tuple[UIPart, ...]:
    """The parts that close the stream when the run's chunks ran out (`finish`)."""
    if state.finished:
        return ()
    return (*_close_step(state)[1], UIFinish())


def sse_frame(part: UIPart) -> bytes:
    """One server-sent event: `data: {json}` and a blank line."""
    return sse_data(_encoder.encode(part))


_FOLD = SSEFold(ui_parts, ui_end, sse_frame)


def ui_message_sse(chunks: Iterable[Chunk], *, message_id: str | None = None) -> Iterator[bytes]:
    """A run's chunks as the UI message stream's SSE frames, up to `data: [DONE]`."""
    yield from _FOLD.frames(ui_start(message_id), chunks)
    yield SSE_DONE


async def ui_message_sse_async(
    chunks: AsyncIterable[Chunk], *, message_id: str | None = None
) -> AsyncIterator[bytes]:
    """`ui_message_sse` over an async run stream."""
    # (closed with this generator, not left to the collector, when a client goes away)
    async with aclosing(_FOLD.frames_async(ui_start(message_id), chunks)) as frames:
        async for frame in frames:
            yield frame
    yield SSE_DONE


def ndjson_line(chunk: Chunk) -> bytes:
    """A chunk as one JSON line (decode it with `pipeline.values.chunks.chunk_decoder`);
    a tripwire without its metadata, which stays server-side (as on the UI stream)."""
    if type(chunk) is c.Tripwire and chunk.metadata is not None:
        chunk = msgspec.structs.replace(chunk, metadata=None)
    elif type(chunk) is c.OutputPartial:  # its JSON (the value may be a pydantic model)
        chunk = msgspec.structs.replace(chunk, value=chunk.data)
    return chunk_encoder.encode(chunk) + b"\n"


def ndjson(chunks: Iterable[Chunk]) -> Iterator[bytes]:
    """A run's chunks as NDJSON lines."""
    for chunk in chunks:
        yield ndjson_line(chunk)


async def ndjson_async(chunks: AsyncIterable[Chunk]) -> AsyncIterator[bytes]:
    """`ndjson` over an async run stream."""
    async for chunk in chunks:
        yield ndjson_line(chunk)


# --- what `useChat` posts ------------------------------------------------------------------


class UIMessagePartIn(msgspec.Struct, frozen=True):
    """A part of a UI message the client sends; only text parts reach the model."""

    type: str
    text: str | None = None


class UIMessageIn(msgspec.Struct, frozen=True):
    id: str
    role: Literal["user", "assistant", "system"]
    parts: tuple[UIMessagePartIn, ...] = ()


class UIChatRequest(msgspec.Struct, frozen=True):
    """The body `useChat`'s default transport posts (other keys are ignored)."""

    messages: tuple[UIMessageIn, ...]
    id: str | None = None


def ui_chat_messages(request: UIChatRequest) -> tuple[Message, ...]:
    """The conversation a `useChat` request carries, as the run's input messages.

    Text parts are kept (joined per message); a message without text is left out.
    System messages from the client are left out too: the agent's instructions apply.
    """
    out: list[Message] = []
    for m in request.messages:
        text = "".join(p.text or "" for p in m.parts if p.type == "text")
        if text and m.role != "system":
            out.append(Message(id=m.id, role=m.role, parts=(TextPart(text),)))
    return tuple(out)


# --- helpers -----------------------------------------------------------------------------


def _error_text(value: object) -> str:
    """A server tool's failure as the `errorText` the client shows."""
    return value if isinstance(value, str) else _encoder.encode(value).decode()


def _as_text(value: object) -> str:
    # A tool result the encoder does not know goes out as its text, not as a failure of
    # the whole response (the model already saw it in its own encoding).
    return str(value)


_encoder = msgspec.json.Encoder(enc_hook=_as_text)


def _with_part(state: UIStreamState, part_id: str) -> UIStreamState:
    return msgspec.structs.replace(state, step_parts=(*state.step_parts, part_id))


def _without(ids: tuple[str, ...], part_id: str) -> tuple[str, ...]:
    return tuple(i for i in ids if i != part_id) if part_id in ids else ids


def _close_parts(
    state: UIStreamState, reason: str | None = None
) -> tuple[UIStreamState, tuple[UIPart, ...]]:
    """End every text and reasoning part still open, and answer every tool input still
    streaming with an output error; with a `reason` (the run stopped short), the calls
    whose output never came too. A client then shows no part as still streaming."""
    calls = (*state.inputs_open, *state.awaiting) if reason is not None else state.inputs_open
    if not (state.open_text or state.open_reasoning or calls):
        return state, ()
    why = reason if reason is not None else "the stream ended before the tool call did"
    parts: tuple[UIPart, ...] = (
        *(UITextEnd(i) for i in state.open_text),
        *(UIReasoningEnd(i) for i in state.open_reasoning),
        *(UIToolOutputError(c, why) for c in calls),
    )
    return msgspec.structs.replace(
        state, open_text=(), open_reasoning=(), inputs_open=(),
        awaiting=() if reason is not None else state.awaiting,
    ), parts


def _close_step(state: UIStreamState) -> tuple[UIStreamState, tuple[UIPart, ...]]:
    state, closing = _close_parts(state)
    if not state.step_open:
        return state, closing
    closed = UIStreamState(finished=state.finished)
    return closed, (*closing, UIFinishStep())


def _reset(
    state: UIStreamState, chunk: c.StepReset
) -> tuple[UIStreamState, tuple[UIPart, ...]]:
    """A fallback model takes the step over: what the step streamed is named (to drop),
    its parts are closed, and the step opens again for the next model's answer."""
    data = {"step_number": chunk.step_number, "model": chunk.model,
            "next_model": chunk.next_model, "reason": chunk.reason,
            "part_ids": list(state.step_parts)}
    state, closing = _close_step(state)
    reopened = msgspec.structs.replace(state, step_open=True)
    return reopened, (UIData(RESET, data), *closing, UIStartStep())


def _discarded(
    state: UIStreamState, chunk: c.DataChunk
) -> tuple[UIStreamState, tuple[UIPart, ...]]:
    base = dict(chunk.data) if isinstance(chunk.data, Mapping) else {"value": chunk.data}
    data = {**base, "part_ids": list(state.step_parts)}
    part = UIData(DISCARDED, data)  # no id: a second discard of the step is a new part
    state, closing = _close_step(state)
    return state, (part, *closing)
