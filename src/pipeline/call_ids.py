"""Tool-call ids unique across the whole run: the ids the run's messages hold (`CallIds`,
`RunState.call_ids`), and fresh ones for a call whose id is taken.

Results are matched to calls by id, and `pipeline.pairing.is_paired` wants each id once in
a history. Models do not always oblige: some servers number calls `call_0` in every
response, a continued conversation holds the ids of earlier runs, and a processor may
forge a call with an id already in use. So a call whose id the conversation (or this
response) already holds gets a fresh one, its deltas too.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter
from typing import TYPE_CHECKING

import msgspec

from pipeline.messages import Message, MessageList, ToolCallPart, ToolResultPart
from pipeline.response import StepContent

if TYPE_CHECKING:
    from pipeline.run_state import RunState

_call_id = attrgetter("tool_call_id")


class CallIds:
    """The tool-call ids a message list holds, kept up to date while the run's messages
    grow by the loop's own additions: a long history is not scanned again every step.

    `of` is the list `used` was made for; another list is scanned again (`held_by`).
    """

    __slots__ = ("of", "used")

    def __init__(self, of: MessageList | None, used: set[str]) -> None:
        self.of = of
        self.used = used

    def held_by(self, ml: MessageList) -> set[str]:
        """Every tool-call id `ml` holds (ids are unique run-wide: a model may reuse one of
        an earlier step)."""
        if self.of is not ml:
            self.of = ml
            self.used = tool_part_ids(ml)
        return self.used

    def grew(self, before: MessageList, after: MessageList, ids: Iterable[str]) -> None:
        """`after` is `before` plus messages whose tool parts have the ids `ids`."""
        if self.of is before:
            self.used.update(ids)
            self.of = after


def tool_part_ids(ml: MessageList) -> set[str]:
    """The ids of every tool call and tool result in `ml`."""
    return {
        p.tool_call_id
        for m in ml.messages
        for p in m.parts
        if isinstance(p, ToolCallPart | ToolResultPart)
    }


def note_call_ids(
    st: RunState, before: MessageList, parts: Iterable[ToolCallPart | ToolResultPart]
) -> None:
    """`st.ml` is `before` plus messages with these tool parts."""
    st.call_ids.grew(before, st.ml, map(_call_id, parts))


def unique_id(base: str, taken: set[str], sep: str = "_") -> str:
    """`base`, or the first of `base_2`, `base_3`... (joined by `sep`) that `taken` lacks;
    it is added to `taken`."""
    new, n = base, 1
    while new in taken:
        n += 1
        new = f"{base}{sep}{n}"
    taken.add(new)
    return new


def fresh_call_id(st: RunState, used: set[str], content: StepContent | None) -> str:
    while True:
        fresh = st.ids.next("call")
        if fresh not in used and (
            content is None or all(c.tool_call_id != fresh for c in content.tool_calls)
        ):
            return fresh


def unforged(st: RunState, kept: Message) -> Message:
    """The response as a processor replaced it, with a fresh id for each tool call whose
    id another message (or an earlier call of it) already has, so results pair."""
    others = {
        p.tool_call_id
        for m in st.ml.messages
        if m.id != kept.id
        for p in m.parts
        if isinstance(p, ToolCallPart | ToolResultPart)
    }
    parts = list(kept.parts)
    changed = False
    for i, p in enumerate(parts):
        if isinstance(p, ToolCallPart):
            if p.tool_call_id in others:
                p = msgspec.structs.replace(p, tool_call_id=fresh_call_id(st, others, None))
                parts[i] = p
                changed = True
            others.add(p.tool_call_id)
    if not changed:
        return kept
    fixed = kept.with_parts(parts)
    st.ml = st.ml.replace_messages(fixed if m.id == kept.id else m for m in st.ml.messages)
    return fixed
