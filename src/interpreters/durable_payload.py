"""A durable run's result as the store keeps it: each tool result once.

A `RunResult` carries every tool result twice, in its step (`steps[i].tool_results`) and
in the tool message of its history (`messages`). The stored form drops a step's copy
when the history holds an identical part for the same call (a processor that rewrote
the history leaves both), and `expand` puts it back: what is read is exactly what was
stored. A result stored whole (by an older version) reads as it is.
"""

from __future__ import annotations

import msgspec

from pipeline.messages import ToolResultPart
from pipeline.result import RunResult, StepResult


class StoredResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A result with the step copies of its tool results dropped (`dropped`: their
    positions, step index then result index)."""

    result: RunResult
    dropped: tuple[tuple[int, int], ...]


_enc = msgspec.json.Encoder()
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


def compact(result: RunResult) -> bytes:
    """The stored form of `result`."""
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
    if not dropped:
        return _enc.encode(result)
    return _enc.encode(
        StoredResult(msgspec.structs.replace(result, steps=tuple(steps)), tuple(dropped))
    )


def expand(data: bytes) -> RunResult:
    """The result `compact` stored (or one stored whole)."""
    try:
        stored = _STORED.decode(data)
    except msgspec.ValidationError:
        return _WHOLE.decode(data)
    result = stored.result
    history = _in_history(result)
    steps = [list(step.tool_results) for step in result.steps]
    for i, j in stored.dropped:
        steps[i][j] = history[steps[i][j].tool_call_id]
    return msgspec.structs.replace(result, steps=tuple(
        msgspec.structs.replace(step, tool_results=tuple(parts))
        for step, parts in zip(result.steps, steps, strict=True)
    ))
