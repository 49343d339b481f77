"""Holding streamed text back until it is safe to release: the part every guard on the
stream shares (PIIDetector, SystemPromptScrubber).

A guard gives a *scanner*: from the raw text held so far (plus the new delta) and whether
this is the block's end, it says what to release now (already redacted) and what raw text
to keep holding. `hold_stream` applies it to each chunk, `flush_held` at the response's
end. Text and reasoning deltas are held (both reach the caller); any other chunk first
releases what is held, so the order of the stream is kept.

All pure: the held text is processor state, a frozen `Held`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec

from pipeline.values.chunks import Chunk, ReasoningDelta, TextDelta

BlockKind = Literal["text", "reasoning"]

Scanner = Callable[[str, bool], tuple[str, str]]
"""(raw text, final) -> (text to release now, raw text to keep holding).

With `final` the block ends: everything must be released (or dropped), nothing kept.
A scanner may raise `ProcessorAbort` (via `abort(...)`) to block the run.
"""


class Held(msgspec.Struct, frozen=True):
    """The raw text of one block held back, not yet seen by anyone after this processor."""

    kind: BlockKind | None = None
    id: str = ""
    text: str = ""


NOTHING_HELD = Held()


def delta(kind: BlockKind, block: str, text: str) -> Chunk:
    """A text or reasoning delta of `block`."""
    return TextDelta(block, text) if kind == "text" else ReasoningDelta(block, text)


def flush_held(held: Held, scan: Scanner) -> tuple[Chunk, ...]:
    """The block ends: what to release of what is held (the scanner's final word)."""
    if not held.text or held.kind is None:
        return ()
    out, _ = scan(held.text, True)
    return (delta(held.kind, held.id, out),) if out else ()


def hold_stream(
    part: Chunk, held: Held, scan: Scanner
) -> tuple[tuple[Chunk, ...] | None, Held]:
    """One chunk through the hold-back: the chunks to pass on instead of it (None: pass it
    on as it is) and what is held after it."""
    t = type(part)
    if t is TextDelta or t is ReasoningDelta:
        assert isinstance(part, TextDelta | ReasoningDelta)
        kind: BlockKind = "text" if t is TextDelta else "reasoning"
        out: list[Chunk] = []
        if held.text and (held.kind != kind or held.id != part.id):
            out.extend(flush_held(held, scan))  # another block began: the old one ended
            held = NOTHING_HELD
        release, keep = scan(held.text + part.text, False)
        if release:
            out.append(delta(kind, part.id, release))
        return tuple(out), Held(kind, part.id, keep) if keep else NOTHING_HELD
    if not held.text:
        return None, held
    # The block's end, or any other chunk: release first, so the order is kept.
    return (*flush_held(held, scan), part), NOTHING_HELD


__all__ = [
    "NOTHING_HELD", "BlockKind", "Held", "Scanner", "delta", "flush_held", "hold_stream",
]
