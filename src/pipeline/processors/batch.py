"""BatchPartsProcessor: text deltas batched into fewer, larger ones.

Fewer chunks for a client that pays per chunk (a websocket frame, a UI render). A batch is
sent when it holds `max_parts` deltas or `max_chars` characters, and always before any
other chunk (the block's end, a tool call, the finish) and at the response's end, so no
text is late past its block and none is lost.
"""

from __future__ import annotations

import msgspec

from effects import Continue, Out, Replace
from pipeline.processor import FlushArgs, FlushResult, StatefulProcessor, StreamArgs, StreamResult
from pipeline.processors.options import Options
from pipeline.values.chunks import Chunk, TextDelta


class Batch(msgspec.Struct, frozen=True):
    """The text deltas of one block batched so far."""

    id: str = ""
    text: str = ""
    parts: int = 0


EMPTY = Batch()


class BatchPartsProcessor(StatefulProcessor[Batch]):
    """Batches text deltas by count (`max_parts`) and/or size (`max_chars`)."""

    def __init__(
        self, *, max_parts: int = 5, max_chars: int | None = None, id: str = "batch-parts"
    ) -> None:
        o = Options("BatchPartsProcessor")
        o.integer("max_parts", max_parts, min=1)
        o.optional_integer("max_chars", max_chars, min=1)
        o.id(id)
        self.id = id
        self.max_parts = max_parts
        self.max_chars = max_chars

    def initial_state(self) -> Batch:
        return EMPTY

    def process_output_stream(self, args: StreamArgs[Batch]) -> StreamResult[Batch]:
        part, batch = args.part, args.state
        if type(part) is not TextDelta:
            if not batch.parts:
                return Continue()
            return Out(Replace((TextDelta(batch.id, batch.text), part)), EMPTY)
        assert isinstance(part, TextDelta)
        out: tuple[Chunk, ...] = ()
        if batch.parts and batch.id != part.id:  # a new block: the old one is done
            out = (TextDelta(batch.id, batch.text),)
            batch = EMPTY
        text, parts = batch.text + part.text, batch.parts + 1
        if parts >= self.max_parts or (self.max_chars is not None and len(text) >= self.max_chars):
            return Out(Replace((*out, TextDelta(part.id, text))), EMPTY)
        return Out(Replace(out), Batch(part.id, text, parts))

    def flush_output_stream(self, args: FlushArgs[Batch]) -> FlushResult[Batch]:
        batch = args.state
        if not batch.parts:
            return Continue()
        return Out(Replace((TextDelta(batch.id, batch.text),)), EMPTY)


__all__ = ["Batch", "BatchPartsProcessor"]
