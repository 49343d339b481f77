"""Tool-call ids unique across the whole run (functions over the run's state, run_state.py).

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


def call_ids(st: RunState) -> set[str]:
    """Every tool-call id the conversation holds (ids are unique run-wide: a model may
    reuse one of an earlier step). Made again only when the messages changed (`st.ids_of`
    is the list `st.ids_used` was made for)."""
    if st.ids_of is not st.ml:
        st.ids_of = st.ml
        st.ids_used = {
            p.tool_call_id
            for m in st.ml.messages
            for p in m.parts
            if isinstance(p, ToolCallPart | ToolResultPart)
        }
    return st.ids_used


def note_call_ids(
    st: RunState, before: MessageList, parts: Iterable[ToolCallPart | ToolResultPart]
) -> None:
    """`st.ml` is `before` plus messages with these tool parts: keep `call_ids` up to date
    without scanning the history again (a long one would cost every step)."""
    if st.ids_of is before:
        st.ids_used.update(map(_call_id, parts))
        st.ids_of = st.ml


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
