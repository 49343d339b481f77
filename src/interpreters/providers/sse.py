"""Server-sent events framing, sans-I/O: bytes in, events out.

Written here rather than taken from httpx-sse because the codecs must stay pure (the
property tests and the simulator feed them bytes without a socket), httpx-sse's public
API only reads an `httpx.Response` whose content type is `text/event-stream` (a recorded
OpenAI stream says `application/json`), and its incremental decoders are private. The
rules follow the WHATWG event-stream grammar: lines end in CRLF, LF or CR (a CR at the
end of one chunk may pair with an LF at the start of the next), `:` starts a comment, a
blank line dispatches, a single leading space of a value is dropped, a leading BOM is
ignored. UTF-8 is decoded incrementally, so a character split across chunks is intact.
"""

from __future__ import annotations

import codecs

import msgspec


class SseEvent(msgspec.Struct, frozen=True):
    """One dispatched event. `event` is "" when the frame had no `event:` line."""

    data: str
    event: str = ""
    id: str | None = None
    retry: int | None = None


class SseParser:
    """Incremental SSE parser. `feed` may be called with any split of the byte stream."""

    __slots__ = (
        "_at_start",
        "_data",
        "_decoder",
        "_event",
        "_has_data",
        "_id",
        "_partial",
        "_pending_cr",
        "_retry",
    )

    def __init__(self) -> None:
        # errors="replace": a stray invalid byte must not kill a stream whose JSON is fine.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._pending_cr = False
        self._at_start = True
        self._event = ""
        self._data: list[str] = []
        self._has_data = False
        self._id: str | None = None
        self._retry: int | None = None

    @property
    def has_partial(self) -> bool:
        """True when bytes of an unterminated line or undispatched event are buffered."""
        return bool(self._partial) or self._has_data or bool(self._event)

    def feed(self, chunk: bytes) -> list[SseEvent]:
        return self._feed_text(self._decoder.decode(chunk))

    def close(self) -> list[SseEvent]:
        """End of stream: dispatch an event whose lines were complete but which lacked the
        final blank line. An unterminated last line is a truncated frame and is dropped."""
        out = self._feed_text(self._decoder.decode(b"", final=True))
        if self._has_data:
            out.append(self._dispatch_event())
        return out

    def _feed_text(self, text: str) -> list[SseEvent]:
        if not text:
            return []
        if self._at_start:
            self._at_start = False
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._pending_cr:
            # The previous chunk ended in CR: an LF here belongs to the same line break.
            self._pending_cr = False
            if text.startswith("\n"):
                text = text[1:]
        out: list[SseEvent] = []
        buf = self._partial + text
        start = 0
        n = len(buf)
        while True:
            cr = buf.find("\r", start)
            lf = buf.find("\n", start)
            if cr == -1 and lf == -1:
                break
            if cr == -1 or (lf != -1 and lf < cr):
                end, nxt = lf, lf + 1
            elif cr + 1 < n:
                end, nxt = cr, cr + 2 if buf[cr + 1] == "\n" else cr + 1
            else:
                end, nxt = cr, cr + 1
                self._pending_cr = True
            event = self._line(buf[start:end])
            if event is not None:
                out.append(event)
            start = nxt
        self._partial = buf[start:]
        return out

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            if self._has_data:
                return self._dispatch_event()
            self._event = ""  # a blank line without data dispatches nothing
            return None
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch_event(self) -> SseEvent:
        event = SseEvent("\n".join(self._data), self._event, self._id, self._retry)
        self._data = []
        self._has_data = False
        self._event = ""
        self._retry = None
        return event
