"""Tool-call ids unique across the whole run: the ids the run's messages hold (`CallIds`,
`RunState.call_ids`), and fresh ones for a call whose id is taken.

Results are matched to calls by id, and `pipeline.values.pairing.is_paired` wants each id once in
a history. Models do not always oblige: some servers number calls `call_0` in every
response, a continued conversation holds the ids of earlier runs, and a processor may
forge a call with an id already in use. So a call whose id the conversation (or this
response) already holds gets a fresh one, its deltas too.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter
from typing import TYPE_CHECKING

from pipeline.values.messages import MessageList, ToolCallPart, ToolResultPart

if TYPE_CHECKING:
    pass

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
