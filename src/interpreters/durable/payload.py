"""A durable run's result as the store keeps it: each tool result once.

A `RunResult` carries every tool result twice, in its step (`steps[i].tool_results`) and
in the tool message of its history (`messages`). The stored form drops a step's copy
when the history holds an identical part for the same call (a processor that rewrote
the history leaves both), and `expand` puts it back: what is read is exactly what was
stored. A result stored whole (by an older version) reads as it is.

A large tool result (`REF_MIN` bytes or more) is also kept by DBOS as the tool step's
recorded outcome. Where the run's stream chunk or the history's part holds exactly that
value (no guard changed it), the stored form holds a reference to the tool step instead
(its ordinal among the run's tool steps), and readers put the recorded value back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping

import msgspec

from interpreters.durable.loop import ToolDone
from pipeline.protocol import ToolOutcome
from pipeline.values.chunks import Chunk, ToolResult
from pipeline.values.messages import Message, ToolResultPart
from pipeline.values.result import RunResult, StepResult

REF_MIN = 64 * 1024
"""Encoded size of a tool step's outcome from which its result is stored by reference."""

Big = Mapping[str, tuple[int, bytes]]
"""Large tool results of a run: call id -> (tool step ordinal, the result encoded)."""

Recorded = Callable[[int, str], object]
"""The recorded result of the run's tool step of that ordinal, for that call id."""


class StoredResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A result with the step copies of its tool results dropped (`dropped`: their
    positions, step index then result index)."""

    result: RunResult
    dropped: tuple[tuple[int, int], ...]
    from_steps: tuple[tuple[int, int, int], ...] = ()
    """History parts holding a tool step's recorded result: message index, part index,
    tool step ordinal."""


class RefChunks(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A stream batch whose tool results at `refs` (batch position, tool step ordinal)
    are the tool steps' recorded results."""

    chunks: tuple[Chunk, ...]
    refs: tuple[tuple[int, int], ...]


_enc = msgspec.json.Encoder()
_TOOL = msgspec.json.Decoder(ToolDone)
_CHUNKS = msgspec.json.Decoder(tuple[Chunk, ...])
_REF_CHUNKS = msgspec.json.Decoder(RefChunks)
_STORED = msgspec.json.Decoder(StoredResult)
_WHOLE = msgspec.json.Decoder(RunResult)
_PLACEHOLDER = None
"""What a dropped result holds in the stored form (its place is in `dropped`)."""


def _in_history(result: RunResult) -> dict[str, ToolResultPart]:
    return {
        part.tool_call_id: part
        for message in result.messages.messages
        for part in message.parts
        if isinstance(part, ToolResultPart)
    }


def _same(value: object, big: Big, call_id: str) -> int | None:
    """The ordinal of the tool step whose recorded result `value` is, if large."""
    found = big.get(call_id)
    if found is None or _enc.encode(value) != found[1]:
        return None
    return found[0]


def compact(result: RunResult, big: Big | None = None) -> bytes:
    """The stored form of `result` (`big`: the run's large tool results)."""
    history = _in_history(result)
    dropped: list[tuple[int, int]] = []
    steps: list[StepResult] = []
    for i, step in enumerate(result.steps):
        kept: list[ToolResultPart] = []
        for j, part in enumerate(step.tool_results):
            if history.get(part.tool_call_id) == part:
                dropped.append((i, j))
                part = msgspec.structs.replace(part, result=_PLACEHOLDER)
            kept.append(part)
        steps.append(msgspec.structs.replace(step, tool_results=tuple(kept)))
    refs: list[tuple[int, int, int]] = []
    messages: list[Message] = list(result.messages.messages) if big else []
    for m, message in enumerate(messages):
        parts = list(message.parts)
        changed = False
        for k, item in enumerate(parts):
            if isinstance(item, ToolResultPart) and big:
                n = _same(item.result, big, item.tool_call_id)
                if n is not None:
                    refs.append((m, k, n))
                    parts[k] = msgspec.structs.replace(item, result=_PLACEHOLDER)
                    changed = True
        if changed:
            messages[m] = msgspec.structs.replace(message, parts=tuple(parts))
    if not dropped and not refs:
        return _enc.encode(result)
    stored = msgspec.structs.replace(result, steps=tuple(steps))
    if refs:
        stored = msgspec.structs.replace(stored, messages=dataclasses.replace(
            result.messages, messages=tuple(messages)))
    return _enc.encode(StoredResult(stored, tuple(dropped), tuple(refs)))


def expand(data: bytes, recorded: Recorded | None = None) -> RunResult:
    """The result `compact` stored (or one stored whole); `recorded` gives the tool steps'
    results it refers to."""
    try:
        stored = _STORED.decode(data)
    except msgspec.ValidationError:
        return _WHOLE.decode(data)
    result = stored.result
    if stored.from_steps:
        if recorded is None:
            raise ValueError("this stored result refers to tool steps: pass `recorded`")
        messages = [list(message.parts) for message in result.messages.messages]
        for m, k, n in stored.from_steps:
            part = messages[m][k]
            assert isinstance(part, ToolResultPart)
            messages[m][k] = msgspec.structs.replace(part, result=recorded(n, part.tool_call_id))
        result = msgspec.structs.replace(result, messages=dataclasses.replace(
            result.messages, messages=tuple(
                msgspec.structs.replace(message, parts=tuple(parts))
                for message, parts in zip(result.messages.messages, messages, strict=True)
            )))
    history = _in_history(result)
    steps = [list(step.tool_results) for step in result.steps]
    for i, j in stored.dropped:
        steps[i][j] = history[steps[i][j].tool_call_id]
    return msgspec.structs.replace(result, steps=tuple(
        msgspec.structs.replace(step, tool_results=tuple(parts))
        for step, parts in zip(result.steps, steps, strict=True)
    ))


def compact_chunks(chunks: tuple[Chunk, ...], big: Big) -> bytes:
    """A stream batch, its large tool results that are the recorded ones by reference."""
    refs: list[tuple[int, int]] = []
    out = list(chunks)
    if big:
        for i, chunk in enumerate(out):
            if isinstance(chunk, ToolResult):
                n = _same(chunk.result, big, chunk.tool_call_id)
                if n is not None:
                    refs.append((i, n))
                    out[i] = msgspec.structs.replace(chunk, result=_PLACEHOLDER)
    if not refs:
        return _enc.encode(chunks)
    return _enc.encode(RefChunks(tuple(out), tuple(refs)))


def expand_chunks(data: bytes, recorded: Recorded) -> tuple[Chunk, ...]:
    """The chunks of a batch `compact_chunks` wrote (or one written whole)."""
    if not data.startswith(b"{"):
        return _CHUNKS.decode(data)
    batch = _REF_CHUNKS.decode(data)
    out = list(batch.chunks)
    for i, n in batch.refs:
        chunk = out[i]
        assert isinstance(chunk, ToolResult)
        out[i] = msgspec.structs.replace(chunk, result=recorded(n, chunk.tool_call_id))
    return tuple(out)


def tool_outcomes(steps: Iterable[tuple[str, object]]) -> list[ToolOutcome | None]:
    """The recorded outcomes of a run's tool steps (name, DBOS output), in order (None
    for one not readable, so that the others keep their ordinals)."""
    found: list[ToolOutcome | None] = []
    for name, output in steps:
        if not name.startswith("tool:"):
            continue
        data = output[1] if isinstance(output, tuple | list) and len(output) == 2 else None
        found.append(_TOOL.decode(data).outcome if isinstance(data, bytes) else None)
    return found


def recorder(steps: Callable[[], Iterable[tuple[str, object]]]) -> Recorded:
    """`Recorded` over a run's steps, read when first needed (again for a later step)."""
    cache: list[ToolOutcome | None] = []

    def get(n: int, call_id: str) -> object:
        nonlocal cache
        if n >= len(cache) or cache[n] is None:
            cache = tool_outcomes(steps())
        found = cache[n] if n < len(cache) else None
        if found is None or found.tool_call_id != call_id:
            raise LookupError(f"the run's tool step {n} (call {call_id!r}) is not recorded")
        return found.result

    return get
