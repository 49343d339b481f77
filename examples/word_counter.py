"""A stream accumulator: counts words across the run in its state and reports the total
as a `data-word-count` chunk when the run finishes."""

from __future__ import annotations

from effects import Continue, Out
from pipeline import DataChunk, StatefulProcessor, StreamArgs, StreamResult, TextDelta
from pipeline.values import Finish


class WordCounter(StatefulProcessor[int]):
    id = "word-counter"

    def initial_state(self) -> int:
        return 0

    def process_output_stream(self, args: StreamArgs[int]) -> StreamResult[int]:
        part = args.part
        if isinstance(part, TextDelta):
            return Out(Continue(), args.state + len(part.text.split()))
        if isinstance(part, Finish):
            report = DataChunk("data-word-count", {"words": args.state})
            return Out(Continue(), args.state, emit=(report,))
        return Continue()
