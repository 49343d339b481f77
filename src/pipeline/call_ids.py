"""Tool-call ids unique across the whole run (a mixin of `_Run`, loop.py).

Results are matched to calls by id, and `pipeline.pairing.is_paired` wants each id once in
a history. Models do not always oblige: some servers number calls `call_0` in every
response, a continued conversation holds the ids of earlier runs, and a processor may
forge a call with an id already in use. So a call whose id the conversation (or this
response) already holds gets a fresh one, its deltas too.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

import msgspec

from pipeline.messages import Message, MessageList, ToolCallPart, ToolResultPart
from pipeline.response import StepContent
from pipeline.run_state import RunState

_call_id = attrgetter("tool_call_id")


class CallIds(RunState):
    """The tool-call ids of the conversation, kept as the loop adds messages."""

    _ids_of: MessageList | None
    """The list `_ids_used` was made for: another one (a processor replaced the messages)
    is scanned again."""
    _ids_used: set[str]

    def _init_call_ids(self) -> None:
        self._ids_of = None
        self._ids_used = set()

    def _call_ids(self) -> set[str]:
        """Every tool-call id the conversation holds (ids are unique run-wide: a model may
        reuse one of an earlier step). Made again only when the messages changed."""
        if self._ids_of is not self.ml:
            self._ids_of = self.ml
            self._ids_used = {
                p.tool_call_id
                for m in self.ml.messages
                for p in m.parts
                if isinstance(p, ToolCallPart | ToolResultPart)
            }
        return self._ids_used

    def _note_call_ids(
        self, before: MessageList, parts: Iterable[ToolCallPart | ToolResultPart]
    ) -> None:
        """`self.ml` is `before` plus messages with these tool parts: keep `_call_ids` up
        to date without scanning the history again (a long one would cost every step)."""
        if self._ids_of is before:
            self._ids_used.update(map(_call_id, parts))
            self._ids_of = self.ml

    def _fresh_call_id(self, used: set[str], content: StepContent | None) -> str:
        while True:
            fresh = self.ids.next("call")
            if fresh not in used and (
                content is None or all(c.tool_call_id != fresh for c in content.tool_calls)
            ):
                return fresh

    def _unforged(self, kept: Message) -> Message:
        """The response as a processor replaced it, with a fresh id for each tool call whose
        id another message (or an earlier call of it) already has, so results pair."""
        others = {
            p.tool_call_id
            for m in self.ml.messages
            if m.id != kept.id
            for p in m.parts
            if isinstance(p, ToolCallPart | ToolResultPart)
        }
        parts = list(kept.parts)
        changed = False
        for i, p in enumerate(parts):
            if isinstance(p, ToolCallPart):
                if p.tool_call_id in others:
                    p = msgspec.structs.replace(p, tool_call_id=self._fresh_call_id(others, None))
                    parts[i] = p
                    changed = True
                others.add(p.tool_call_id)
        if not changed:
            return kept
        fixed = kept.with_parts(parts)
        self.ml = self.ml.replace_messages(
            fixed if m.id == kept.id else m for m in self.ml.messages
        )
        return fixed
