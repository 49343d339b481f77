"""The frames of the UI message streams a chat app sent, kept so a client that lost its
connection gets the rest (examples/asgi_stream.py, `chat_app(..., resumable=True)`).

Each frame of a kept stream is sent with an SSE `id: <stream>-<n>` line (the stream's
number in the app, the frame's index in it): a client that reconnects names the last
frame it has (`Last-Event-ID`, as `EventSource` does) and gets the frames after it, each
once; one that names none gets the stream from its start while it is live (what the AI
SDK's `useChat` with `resume: true` asks for). Frames are what the run streamed after its
output processors, so a reconnected client gets nothing the live one would not have.

Bounded: the kept frames of all streams take at most `max_bytes` (the oldest stream is
forgotten first; a stream alone over the cap is dropped, no longer resumable) and at
most `max_chats` chats keep one. A reader of a live stream waits for its next frame; the
stream ends with its run, which has a deadline (`chat_app` requires `timeout=` then).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator

import anyio

from interpreters import CancelSignal


class Gone(Exception):
    """The stream a reconnecting client names is not kept (replaced by a newer one of its
    chat, forgotten, or over the cap): the rest cannot be given."""


class Replay:
    """One stream's frames (with their `id:` lines), as its run sends them."""

    def __init__(self, chat_id: str, number: int, signal: CancelSignal) -> None:
        self.chat_id = chat_id
        self.number = number
        self.signal = signal
        """The run's: stopping the stream cancels its run."""
        self.frames: list[bytes] = []
        self.sent = 0
        """Frames sent (all kept, unless the stream was dropped)."""
        self.size = 0
        self.ended = False
        self.dropped = False
        self._grown = anyio.Event()

    @property
    def live(self) -> bool:
        return not self.ended and not self.dropped

    def _wake(self) -> None:
        self._grown.set()
        self._grown = anyio.Event()

    async def after(self, index: int) -> AsyncIterator[bytes]:
        """The frames after `index` (-1: all), then each as it comes, until the stream
        ends; a stream dropped meanwhile stops short (its client sees no `[DONE]`)."""
        i = index + 1
        while not self.dropped:
            if i < len(self.frames):
                yield self.frames[i]
                i += 1
            elif self.ended:
                return
            else:
                await self._grown.wait()


class Replays:
    """The last stream of each chat, within the caps (used from the server's event loop
    only: no locks)."""

    def __init__(self, max_bytes: int, max_chats: int) -> None:
        self.max_bytes = max_bytes
        self.max_chats = max_chats
        self._kept: OrderedDict[str, Replay] = OrderedDict()
        self._size = 0
        self._started = 0

    @property
    def kept_bytes(self) -> int:
        """What the kept frames take."""
        return self._size

    def start(self, chat_id: str, signal: CancelSignal) -> Replay:
        """A new stream for `chat_id`, in place of the one it had."""
        old = self._kept.get(chat_id)
        if old is not None:
            self._drop(old)
        self._started += 1
        replay = Replay(chat_id, self._started, signal)
        self._kept[chat_id] = replay
        while len(self._kept) > self.max_chats:
            self._drop(next(iter(self._kept.values())))
        return replay

    def add(self, replay: Replay, frame: bytes) -> bytes:
        """`frame` with its `id:` line, kept unless the stream was dropped."""
        framed = b"id: %d-%d\n" % (replay.number, replay.sent) + frame
        replay.sent += 1
        if replay.dropped:
            return framed
        replay.frames.append(framed)
        replay.size += len(framed)
        self._size += len(framed)
        while self._size > self.max_bytes:  # the oldest first; at last this one
            self._drop(next(iter(self._kept.values())))
        replay._wake()
        return framed

    def end(self, replay: Replay) -> None:
        replay.ended = True
        replay._wake()

    def live(self, chat_id: str) -> Replay | None:
        """The chat's stream while its run streams, else None."""
        replay = self._kept.get(chat_id)
        return replay if replay is not None and replay.live else None

    def resumed(self, chat_id: str, last_event_id: str) -> tuple[Replay, int]:
        """The chat's stream and the index of the frame `last_event_id` names (`Gone`
        when that stream is not kept; `ValueError` for an id that is none of its)."""
        number, _, index = last_event_id.partition("-")
        if not (number.isdigit() and index.isdigit()):
            raise ValueError(f"Last-Event-ID {last_event_id!r} is not <stream>-<frame>")
        replay = self._kept.get(chat_id)
        if replay is None or replay.number != int(number):
            raise Gone(f"stream {number} of chat {chat_id!r} is no longer kept")
        if int(index) >= len(replay.frames):
            raise ValueError(f"stream {number} has no frame {index}")
        return replay, int(index)

    def _drop(self, replay: Replay) -> None:
        del self._kept[replay.chat_id]
        self._size -= replay.size
        replay.dropped = True
        replay.frames, replay.size = [], 0
        replay._wake()
