"""Tool calls and results as they leave a run: what the stream processors made of each.

The model reads a tool's result as the tool returned it, and a tool runs with the
arguments the model gave it (unless a `process_tool_call` gate changed them); the caller
and the run's messages and steps get each as the stream processors passed it on (a
redaction, a replacement, an error for a result blocked). `LeavingResults`
(`RunState.leaving`) keeps, by call id, each result (`approved`, as the results go
through) and each call (`calls_changed`, as a response ends) a stream processor changed,
and puts them in place in the run's messages at its end (`messages`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.values.chunks import Chunk, ToolError, ToolResult
from pipeline.values.messages import Message, MessageList, Part, ToolCallPart, ToolResultPart


class LeavingResults:
    """The tool results stream processors changed, by call id (`changed`; None: none),
    and the tool calls (`calls`)."""

    __slots__ = ("calls", "changed")

    def __init__(self) -> None:
        self.changed: dict[str, ToolResultPart] | None = None
        self.calls: dict[str, ToolCallPart] | None = None

    def calls_changed(self, calls: dict[str, ToolCallPart]) -> None:
        """The calls of a response as the stream processors passed them on, by call id
        (those that leave the run other than the model made them)."""
        if self.calls is None:
            self.calls = dict(calls)
        else:
            self.calls.update(calls)

    def calls_out(self, calls: tuple[ToolCallPart, ...]) -> tuple[ToolCallPart, ...]:
        """`calls` as they leave the run (a step's `tool_calls`)."""
        leaving = self.calls
        if not leaving:
            return calls
        return tuple(leaving.get(c.tool_call_id, c) for c in calls)

    def approved(
        self,
        parts: tuple[ToolResultPart, ...],
        results: list[Chunk],
        passed: Sequence[Chunk],
        stopped: str | None = None,
    ) -> tuple[ToolResultPart, ...]:
        """The tool results `parts` as they leave the run: what the stream processors made
        of each result's chunk (`results`, the chunks made of `parts`; `passed`, what the
        processors passed on). A result whose chunk was dropped, not replaced, keeps its
        value: dropping hides it from the stream only. When the run `stopped` while they
        went through (a processor blocked, failed, a cancel), each result not passed on
        leaves as an error saying so (fail closed: no processor approved it; the history
        stays paired)."""
        if stopped is None and len(passed) >= len(results) and all(
            c is r for c, r in zip(passed, results, strict=False)
        ):
            return parts  # every chunk passed as it was (the common case): nothing changed
        out_of: dict[str, ToolResult | ToolError] = {}
        for c in passed:
            if isinstance(c, ToolResult | ToolError) and c.tool_call_id not in out_of:
                out_of[c.tool_call_id] = c
        approved: list[ToolResultPart] = []
        for p, r in zip(parts, results, strict=True):
            got = out_of.get(p.tool_call_id)
            if got is r or (got is None and stopped is None):
                approved.append(p)
                continue
            if got is None:
                assert stopped is not None
                new = ToolResultPart(p.tool_call_id, p.tool_name, stopped, True)
            elif isinstance(got, ToolError):
                new = ToolResultPart(p.tool_call_id, p.tool_name, got.error, True)
            else:
                new = ToolResultPart(p.tool_call_id, p.tool_name, got.result, False)
            if self.changed is None:
                self.changed = {}
            self.changed[p.tool_call_id] = new
            approved.append(new)
        return tuple(approved)

    def messages(self, ml: MessageList, before_result: MessageList | None) -> MessageList:
        """The run's messages `ml` as they leave it: each tool result and call a stream
        processor changed as it changed it, in the messages this run added, by call id
        (an input processor may have rebuilt the history the model reads from the tool's
        own value). A part an output result processor changed (`before_result`: the
        messages it got) is kept as it made it."""
        leaving, calls = self.changed or {}, self.calls or {}
        if not leaving and not calls:
            return ml
        ours: set[int] | None = None
        if before_result is not None and before_result is not ml:
            ours = {id(p) for m in before_result.messages if m.role in ("tool", "assistant")
                    for p in m.parts}

        def part(p: Part) -> Part:
            t = type(p)
            if (t is not ToolResultPart and t is not ToolCallPart) or (
                ours is not None and id(p) not in ours
            ):
                return p
            if t is ToolCallPart:
                assert isinstance(p, ToolCallPart)
                return calls.get(p.tool_call_id, p)
            assert isinstance(p, ToolResultPart)
            return leaving.get(p.tool_call_id, p)

        def swap(m: Message) -> Message:
            if m.role != "tool" and m.role != "assistant":
                return m
            parts = tuple(part(p) for p in m.parts)
            return m.with_parts(parts) if any(
                a is not b for a, b in zip(parts, m.parts, strict=True)) else m

        return MessageList(
            tuple(swap(m) if s == "response" else m
                  for m, s in zip(ml.messages, ml.sources, strict=True)),
            ml.sources, ml.system,
        )
