"""A run's chunks as AG-UI events (the Agent User Interaction protocol, 1.0), built with
the protocol's own types (`ag-ui-protocol`, the `agui` extra). Pure, no I/O.

AG-UI is the event stream CopilotKit and the other AG-UI clients read: server-sent
events, one JSON event per `data:` line (`AGUI_HEADERS`), from `RUN_STARTED` to
`RUN_FINISHED` or `RUN_ERROR`. Beside the AI SDK's UI message stream
(`pipeline.ui_stream`), from the same chunks:

    for frame in agui_sse(stream, thread_id=t, run_id=r):          # a sync run stream
    async for frame in agui_sse_async(s, thread_id=t, run_id=r):   # an async one
        send(frame)

`agui_start` / `agui_events` / `agui_end` are the pure steps underneath (a frozen state
and a chunk in, the new state and the events out). How the run's chunks map:

- text-*: `TEXT_MESSAGE_START` / `_CONTENT` / `_END` (role assistant); reasoning-*:
  `REASONING_START`, `REASONING_MESSAGE_START` / `_CONTENT` / `_END`, `REASONING_END`.
- a tool call: `TOOL_CALL_START` (its name), `TOOL_CALL_ARGS` (the argument deltas, or
  the whole arguments as JSON when none streamed), `TOOL_CALL_END`; its result or error:
  `TOOL_CALL_RESULT` (role tool; an error's content is `error: ...`). A tool the provider
  ran is the same events.
- steps: `STEP_STARTED` / `STEP_FINISHED` (`step-1`, `step-2`...).
- state: a `data-state` chunk (a tool's or a processor's `DataChunk`) is a
  `STATE_SNAPSHOT` of its data; a `data-state-delta` chunk a `STATE_DELTA` (its data a
  JSON Patch list). Any other data chunk is a `CUSTOM` event named as the chunk; a step a
  processor discarded for a retry is the `CUSTOM` event `step-discarded`, naming the
  message and tool call ids of that step, for a client to drop.
- a call waiting for approval (the run suspends): an interrupt. The run ends with
  `RUN_FINISHED` whose outcome is `interrupt`, one `Interrupt` per call (its `id` the
  approval id a decision is bound to, reason `tool_approval`, the call's id and the
  message shown to a person). The decision a resumed run goes on with is the `CUSTOM`
  event `tool-approval-response`.
- errors: a failed run's error chunk is `RUN_ERROR` (its code the error's kind); a
  cancelled run's is `RUN_FINISHED` with outcome `cancelled`. A processor's tripwire is
  `RUN_ERROR` with code `tripwire` and its reason: never its metadata, and never text a
  processor held back (the run's stream never carries it; nothing here adds any). Before
  it, every message, call and step still open is closed. Nothing follows the closing event.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from contextlib import aclosing

import msgspec

from pipeline.values import chunks as c
from pipeline.values.chunks import Chunk
from pipeline.values.messages import Message, TextPart
from pipeline.values.sse import SSEFold, sse_data

try:
    from ag_ui.core import (
        BaseEvent,
        CustomEvent,
        Interrupt,
        ReasoningEndEvent,
        ReasoningMessageContentEvent,
        ReasoningMessageEndEvent,
        ReasoningMessageStartEvent,
        ReasoningStartEvent,
        RunAgentInput,
        RunErrorEvent,
        RunFinishedCancelledOutcome,
        RunFinishedEvent,
        RunFinishedInterruptOutcome,
        RunStartedEvent,
        StateDeltaEvent,
        StateSnapshotEvent,
        StepFinishedEvent,
        StepStartedEvent,
        TextMessageContentEvent,
        TextMessageEndEvent,
        TextMessageStartEvent,
        ToolCallArgsEvent,
        ToolCallEndEvent,
        ToolCallResultEvent,
        ToolCallStartEvent,
    )
except ImportError as e:  # pragma: no cover - the extra's absence
    raise ImportError(
        "pipeline.agui needs the AG-UI protocol's package: pip install "
        "'pipeline-agents[agui]'"
    ) from e

AGUI_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # proxies (nginx) must not buffer the stream
)
PROTOCOL_VERSION = "1.0"
STATE = "data-state"
"""The data chunk whose data is the AG-UI shared state (a `STATE_SNAPSHOT`)."""
STATE_DELTA = "data-state-delta"
"""The data chunk whose data is a JSON Patch of the shared state (a `STATE_DELTA`)."""
DISCARDED = "data-step-discarded"
TRIPWIRE_CODE = "tripwire"


class AguiState(msgspec.Struct, frozen=True):
    """Where the AG-UI stream is: what is open, and what the run waits for."""

    thread_id: str
    run_id: str
    step: int | None = None
    """The open step's number."""
    step_ids: tuple[str, ...] = ()
    """Message and tool call ids of the open step (for a discard)."""
    open_text: tuple[str, ...] = ()
    open_reasoning: tuple[str, ...] = ()
    calls_open: tuple[str, ...] = ()
    """Tool calls started (`TOOL_CALL_START`) and not yet ended."""
    interrupts: tuple[tuple[str, str, str], ...] = ()
    """Calls waiting for approval: (approval id, tool call id, message)."""
    ended: bool = False


def agui_start(thread_id: str, run_id: str) -> tuple[AguiState, tuple[BaseEvent, ...]]:
    """The first event, `RUN_STARTED`."""
    started = RunStartedEvent(thread_id=thread_id, run_id=run_id,
                              protocol_version=PROTOCOL_VERSION)
    return AguiState(thread_id, run_id), (started,)


def agui_events(state: AguiState, chunk: Chunk) -> tuple[AguiState, tuple[BaseEvent, ...]]:
    """The events one chunk becomes, and the state after it."""
    if state.ended:
        return state, ()  # nothing follows RUN_FINISHED or RUN_ERROR
    if isinstance(chunk, c.TextDelta):
        if not chunk.text:
            return state, ()
        return state, (TextMessageContentEvent(message_id=chunk.id, delta=chunk.text),)
    if isinstance(chunk, c.TextStart):
        state = _with_id(_replace(state, open_text=(*state.open_text, chunk.id)), chunk.id)
        return state, (TextMessageStartEvent(message_id=chunk.id, role="assistant"),)
    if isinstance(chunk, c.TextEnd):
        if chunk.id not in state.open_text:
            return state, ()
        state = _replace(state, open_text=_without(state.open_text, chunk.id))
        return state, (TextMessageEndEvent(message_id=chunk.id),)
    if isinstance(chunk, c.ReasoningDelta):
        if not chunk.text:
            return state, ()
        return state, (ReasoningMessageContentEvent(message_id=chunk.id, delta=chunk.text),)
    if isinstance(chunk, c.ReasoningStart):
        state = _with_id(
            _replace(state, open_reasoning=(*state.open_reasoning, chunk.id)), chunk.id)
        return state, (ReasoningStartEvent(message_id=chunk.id),
                       ReasoningMessageStartEvent(message_id=chunk.id, role="reasoning"))
    if isinstance(chunk, c.ReasoningEnd):
        if chunk.id not in state.open_reasoning:
            return state, ()
        state = _replace(state, open_reasoning=_without(state.open_reasoning, chunk.id))
        return state, _reasoning_end(chunk.id)
    if isinstance(chunk, c.ToolCallDelta):
        cid = chunk.tool_call_id
        start: tuple[BaseEvent, ...] = ()
        if cid not in state.calls_open:
            state = _with_id(_replace(state, calls_open=(*state.calls_open, cid)), cid)
            start = (ToolCallStartEvent(tool_call_id=cid, tool_call_name=chunk.tool_name),)
        args = (ToolCallArgsEvent(tool_call_id=cid, delta=chunk.args_delta),
                ) if chunk.args_delta else ()
        return state, (*start, *args)
    if isinstance(chunk, c.ToolCall | c.ServerToolCall):
        cid = chunk.tool_call_id
        if cid in state.calls_open:  # its arguments streamed: the call is complete
            state = _replace(state, calls_open=_without(state.calls_open, cid))
            return state, (ToolCallEndEvent(tool_call_id=cid),)
        state = _with_id(state, cid)
        return state, (
            ToolCallStartEvent(tool_call_id=cid, tool_call_name=chunk.tool_name),
            ToolCallArgsEvent(tool_call_id=cid, delta=_json(chunk.args)),
            ToolCallEndEvent(tool_call_id=cid),
        )
    if isinstance(chunk, c.ToolResult | c.ServerToolResult):
        failed = isinstance(chunk, c.ServerToolResult) and chunk.is_error
        content = _text(chunk.result)
        return state, (_result(chunk.tool_call_id, f"error: {content}" if failed else content),)
    if isinstance(chunk, c.ToolError):
        return state, (_result(chunk.tool_call_id, f"error: {chunk.error}"),)
    if isinstance(chunk, c.ToolApprovalRequest):
        waiting = (chunk.approval_id, chunk.tool_call_id, chunk.message)
        return _replace(state, interrupts=(*state.interrupts, waiting)), ()
    if isinstance(chunk, c.ToolApprovalResponse):
        value = {"approvalId": chunk.approval_id, "toolCallId": chunk.tool_call_id,
                 "approved": chunk.approved, "reason": chunk.reason,
                 "decidedBy": chunk.decided_by}
        return state, (CustomEvent(name="tool-approval-response", value=value),)
    if isinstance(chunk, c.StepStart):
        state, closing = _close_step(state)
        step = StepStartedEvent(step_name=f"step-{chunk.step_number}")
        return _replace(state, step=chunk.step_number), (*closing, step)
    if isinstance(chunk, c.StepFinish):
        return _close_step(state)
    if isinstance(chunk, c.DataChunk):
        return _data(state, chunk)
    if isinstance(chunk, c.SourceChunk):
        value = {"sourceId": chunk.source_id, "url": chunk.url, "title": chunk.title}
        return state, (CustomEvent(name="source", value=value),)
    if isinstance(chunk, c.ErrorChunk):
        state, closing = _close_step(state)
        state = _replace(state, ended=True)
        if chunk.kind == "cancelled":
            return state, (*closing, RunFinishedEvent(
                thread_id=state.thread_id, run_id=state.run_id,
                outcome=RunFinishedCancelledOutcome()))
        return state, (*closing, RunErrorEvent(message=f"{chunk.kind}: {chunk.message}",
                                               code=chunk.kind))
    if isinstance(chunk, c.Tripwire):
        # The run stopped short: the reason, never the guard's metadata (its scores stay
        # server-side, as on the UI message stream).
        state, closing = _close_step(state)
        error = RunErrorEvent(message=f"blocked by {chunk.processor_id}: {chunk.reason}",
                              code=TRIPWIRE_CODE)
        return _replace(state, ended=True), (*closing, error)
    if isinstance(chunk, c.Finish):
        return _finish(state)
    return state, ()


def agui_end(state: AguiState) -> tuple[BaseEvent, ...]:
    """The events that close the stream when the run's chunks ran out."""
    return _finish(state)[1]


def encode(event: BaseEvent) -> bytes:
    """An event as its JSON (camelCase keys, no empty optional field)."""
    return event.model_dump_json(by_alias=True, exclude_none=True).encode()


def sse_frame(event: BaseEvent) -> bytes:
    """One server-sent event: `data: {json}` and a blank line."""
    return sse_data(encode(event))


_FOLD = SSEFold(agui_events, agui_end, sse_frame)


def agui_sse(chunks: Iterable[Chunk], *, thread_id: str, run_id: str) -> Iterator[bytes]:
    """A run's chunks as AG-UI server-sent events, `RUN_STARTED` to its closing event."""
    yield from _FOLD.frames(agui_start(thread_id, run_id), chunks)


async def agui_sse_async(
    chunks: AsyncIterable[Chunk], *, thread_id: str, run_id: str
) -> AsyncIterator[bytes]:
    """`agui_sse` over an async run stream."""
    # (closed with this generator, not left to the collector, when a client goes away)
    async with aclosing(_FOLD.frames_async(agui_start(thread_id, run_id), chunks)) as frames:
        async for frame in frames:
            yield frame


# --- what a client sends -------------------------------------------------------------------


def agui_input_messages(run_input: RunAgentInput) -> tuple[Message, ...]:
    """The conversation an AG-UI `RunAgentInput` carries, as the run's input messages:
    the user's and the assistant's text (a message without text is left out; system and
    developer messages too: the agent's instructions apply)."""
    out: list[Message] = []
    for m in run_input.messages:
        role = m.role
        if role not in ("user", "assistant"):
            continue
        content = getattr(m, "content", None)
        if isinstance(content, list):
            content = "".join(
                str(getattr(p, "text", "")) for p in content if getattr(p, "type", "") == "text")
        if isinstance(content, str) and content:
            out.append(Message(id=m.id, role=role, parts=(TextPart(content),)))
    return tuple(out)


# --- helpers -------------------------------------------------------------------------------


def _as_text(value: object) -> str:
    return str(value)  # a result the encoder does not know goes out as its text


_encoder = msgspec.json.Encoder(enc_hook=_as_text)


def _json(value: object) -> str:
    return _encoder.encode(value).decode()


def _text(value: object) -> str:
    return value if isinstance(value, str) else _json(value)


def _result(tool_call_id: str, content: str) -> ToolCallResultEvent:
    return ToolCallResultEvent(message_id=f"{tool_call_id}-result", tool_call_id=tool_call_id,
                               content=content, role="tool")


def _replace(state: AguiState, **changes: object) -> AguiState:
    return msgspec.structs.replace(state, **changes)


def _with_id(state: AguiState, part_id: str) -> AguiState:
    return _replace(state, step_ids=(*state.step_ids, part_id))


def _without(ids: tuple[str, ...], part_id: str) -> tuple[str, ...]:
    return tuple(i for i in ids if i != part_id)


def _reasoning_end(message_id: str) -> tuple[BaseEvent, ...]:
    return (ReasoningMessageEndEvent(message_id=message_id),
            ReasoningEndEvent(message_id=message_id))


def _close_open(state: AguiState) -> tuple[AguiState, tuple[BaseEvent, ...]]:
    """End every message and tool call still open, so a client shows none streaming."""
    events: list[BaseEvent] = [TextMessageEndEvent(message_id=i) for i in state.open_text]
    for i in state.open_reasoning:
        events.extend(_reasoning_end(i))
    events.extend(ToolCallEndEvent(tool_call_id=i) for i in state.calls_open)
    return _replace(state, open_text=(), open_reasoning=(), calls_open=()), tuple(events)


def _close_step(state: AguiState) -> tuple[AguiState, tuple[BaseEvent, ...]]:
    state, closing = _close_open(state)
    if state.step is None:
        return state, closing
    finished = StepFinishedEvent(step_name=f"step-{state.step}")
    return _replace(state, step=None, step_ids=()), (*closing, finished)


def _finish(state: AguiState) -> tuple[AguiState, tuple[BaseEvent, ...]]:
    if state.ended:
        return state, ()
    state, closing = _close_step(state)
    outcome = RunFinishedInterruptOutcome(interrupts=[
        Interrupt(id=approval, reason="tool_approval", tool_call_id=call, message=message)
        for approval, call, message in state.interrupts
    ]) if state.interrupts else None
    end = RunFinishedEvent(thread_id=state.thread_id, run_id=state.run_id, outcome=outcome)
    return _replace(state, ended=True), (*closing, end)


def _data(state: AguiState, chunk: c.DataChunk) -> tuple[AguiState, tuple[BaseEvent, ...]]:
    if chunk.name == STATE:
        return state, (StateSnapshotEvent(snapshot=chunk.data),)
    if chunk.name == STATE_DELTA:
        return state, (StateDeltaEvent.model_validate({"delta": chunk.data}),)
    if chunk.name == DISCARDED:
        base = dict(chunk.data) if isinstance(chunk.data, Mapping) else {"value": chunk.data}
        value = {**base, "ids": list(state.step_ids)}
        state, closing = _close_step(state)
        return state, (*closing, CustomEvent(name="step-discarded", value=value))
    return state, (CustomEvent(name=chunk.name.removeprefix("data-"), value=chunk.data),)


__all__ = [
    "AGUI_HEADERS", "PROTOCOL_VERSION", "STATE", "STATE_DELTA", "TRIPWIRE_CODE", "AguiState",
    "agui_end", "agui_events", "agui_input_messages", "agui_sse", "agui_sse_async",
    "agui_start", "encode", "sse_frame",
]
