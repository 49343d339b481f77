"""One processor on both sides: refuse blocked words in the input and in the stream."""

from __future__ import annotations

from collections.abc import Iterable

from effects import Continue
from pipeline import (
    InputArgs,
    InputResult,
    Processor,
    StreamArgs,
    StreamResult,
    TextDelta,
    abort,
)


class ContentFilter(Processor):
    id = "content-filter"

    def __init__(self, blocked_words: Iterable[str]) -> None:
        self.blocked = tuple(w.lower() for w in blocked_words)

    def _has_blocked(self, text: str) -> bool:
        low = text.lower()
        return any(w in low for w in self.blocked)

    def process_input(self, args: InputArgs[None]) -> InputResult[None]:
        for m in args.messages:
            if self._has_blocked(m.text):
                abort("Blocked content detected in input")
        return Continue()

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        part = args.part
        if isinstance(part, TextDelta) and self._has_blocked(part.text):
            abort("Blocked content detected in output")
        return Continue()
