"""Server-sent events from a run's chunks: what the UI message stream (`pipeline.ui_stream`)
and AG-UI (`pipeline.agui`) share. Each protocol is a fold over the chunks (a first
state and events, the events each chunk becomes, the events that close the stream);
`SSEFold` walks it and frames every event."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Callable, Iterable, Iterator
from typing import Generic, TypeVar

import msgspec

from pipeline.values.chunks import Chunk

S = TypeVar("S")
E = TypeVar("E")


def sse_data(json: bytes) -> bytes:
    """One server-sent event: `data: {json}` and a blank line."""
    return b"data: " + json + b"\n\n"


class SSEFold(msgspec.Struct, Generic[S, E], frozen=True):
    """A protocol's events as frames: `step` gives the events one chunk becomes (and the
    state after it), `end` those that close the stream, `frame` one event's bytes."""

    step: Callable[[S, Chunk], tuple[S, tuple[E, ...]]]
    end: Callable[[S], tuple[E, ...]]
    frame: Callable[[E], bytes]

    def frames(self, start: tuple[S, tuple[E, ...]], chunks: Iterable[Chunk]) -> Iterator[bytes]:
        """The frames of `start`'s events, of each chunk's, then of `end`'s."""
        step, frame = self.step, self.frame
        state, events = start
        yield from map(frame, events)
        for chunk in chunks:
            state, events = step(state, chunk)
            yield from map(frame, events)
        yield from map(frame, self.end(state))

    async def frames_async(
        self, start: tuple[S, tuple[E, ...]], chunks: AsyncIterable[Chunk]
    ) -> AsyncGenerator[bytes, None]:
        """`frames` over an async run stream."""
        step, frame = self.step, self.frame
        state, events = start
        for e in events:
            yield frame(e)
        async for chunk in chunks:
            state, events = step(state, chunk)
            for e in events:
                yield frame(e)
        for e in self.end(state):
            yield frame(e)
