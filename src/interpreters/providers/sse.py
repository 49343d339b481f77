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


class SseLimitError(ValueError):
    """One line or one event of the stream is longer than the parser's cap."""


class FrameError(ValueError):
    """A frame of a binary event stream is malformed (a bad checksum or length)."""


DEFAULT_MAX_EVENT = 8 << 20
"""Characters of one line or one event's data (8 MiB): generous, never unbounded."""


class SseParser:
    """Incremental SSE parser. `feed` may be called with any split of the byte stream.

    Linear in its input: each chunk is scanned once, an unterminated line is kept as a
    list of pieces joined once when it ends (never re-copied or re-scanned per chunk).
    A line or an event longer than `max_event` characters raises `SseLimitError`.
    A read holding exactly one event, as model servers write them, takes a fast path
    (this parser runs once per streamed chunk).
    """

    __slots__ = (
        "_at_start",
        "_data",
        "_data_len",
        "_decoder",
        "_event",
        "_failed",
        "_has_data",
        "_id",
        "_idle",
        "_max",
        "_partial",
        "_partial_len",
        "_pending_cr",
        "_retry",
        "_utf8_clean",
        "work",
    )

    def __init__(self, *, max_event: int = DEFAULT_MAX_EVENT) -> None:
        # errors="replace": a stray invalid byte must not kill a stream whose JSON is fine.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._utf8_clean = True
        """No bytes of a split character are pending in `_decoder`."""
        self._max = max_event
        self._partial: list[str] = []
        self._partial_len = 0
        self._pending_cr = False
        self._at_start = True
        self._event = ""
        self._data: list[str] = []
        self._data_len = 0
        self._has_data = False
        self._id: str | None = None
        self._retry: int | None = None
        self._failed: SseLimitError | None = None
        self._idle = False
        """Nothing pending: no split line or character, past the start, no error."""
        self.work = 0
        """Characters examined and copied so far: linear in the input (tests check it)."""

    @property
    def has_partial(self) -> bool:
        """True when bytes of an unterminated line or undispatched event are buffered."""
        return bool(self._partial_len) or self._has_data or bool(self._event)

    def feed(self, chunk: bytes) -> list[SseEvent]:
        if not self._idle:
            return self._feed_any(chunk)
        # The common case: nothing is pending from the previous chunk (`_idle`) and this
        # one is valid UTF-8 as a whole (no incremental decoder's Python layer).
        try:
            text = chunk.decode()
        except UnicodeDecodeError:  # a character split at the end, or an invalid byte
            return self._feed_any(chunk)
        # Fast path: exactly one event (an optional `event:` line, one `data:` line, the
        # blank line), as model servers write them. Inline, the rules of `_feed_text` for
        # that case only; anything else goes there.
        if text.endswith("\n\n") and "\r" not in text:
            end, nl = 2, len(text) - 2
        elif text.endswith("\r\n\r\n") and text.find("\r") == len(text) - 4:
            end, nl = 4, len(text) - 3  # CRLF lines (Gemini's): its only CRs end the frame
        else:
            return self._settled(text)
        if len(text) > self._max:
            return self._settled(text)
        if text.startswith("data:"):
            at = 0
            name = self._event
        elif text.startswith("event:"):
            at = text.find("\n") + 1
            name = text[7 : at - 1] if text[6] == " " else text[6 : at - 1]
            if not text.startswith("data:", at):
                return self._settled(text)
        else:
            return self._settled(text)
        if text.find("\n", at) != nl:
            return self._settled(text)
        value = text[at + 6 : -end] if text[at + 5] == " " else text[at + 5 : -end]
        self.work += len(text) + len(value) + 1
        event = SseEvent(value, name, self._id, self._retry)
        self._event = ""
        self._retry = None
        return [event]

    def _feed_any(self, chunk: bytes) -> list[SseEvent]:
        """`feed` when something is pending (a split line or character, the stream's
        start, an error) or the chunk is not valid UTF-8 as a whole."""
        if self._failed is not None:
            raise self._failed
        if self._utf8_clean:
            try:
                return self._settled(chunk.decode())
            except UnicodeDecodeError:
                pass
        text = self._decoder.decode(chunk)
        self._utf8_clean = not self._decoder.getstate()[0]
        return self._settled(text)

    def _settled(self, text: str) -> list[SseEvent]:
        """`_feed_text`, then whether the next chunk may take `feed`'s fast path."""
        self._idle = False
        out = self._feed_text(text)
        self._idle = (
            self._failed is None and self._utf8_clean and not self._pending_cr
            and not self._at_start and not self._partial and not self._has_data
        )
        return out

    def close(self) -> list[SseEvent]:
        """End of stream: dispatch an event whose lines were complete but which lacked the
        final blank line. An unterminated last line is a truncated frame and is dropped."""
        if self._failed is not None:
            raise self._failed
        out = self._feed_text(self._decoder.decode(b"", final=True))
        if self._has_data:
            out.append(self._dispatch_event())
        return out

    def _feed_text(self, text: str) -> list[SseEvent]:
        if not text:
            return []
        if self._at_start or self._pending_cr:
            if self._at_start:
                self._at_start = False
                if text.startswith("\ufeff"):
                    text = text[1:]
            if self._pending_cr:
                # The previous chunk ended in CR: an LF here belongs to the same line break.
                self._pending_cr = False
                if text.startswith("\n"):
                    text = text[1:]
            if not text:
                return []
        # CRLF, CR and LF all end a line: normalise to LF, then split once (linear). A CR
        # that ends the chunk may pair with an LF that starts the next one.
        if "\r" in text:
            self._pending_cr = text.endswith("\r")
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        self.work += len(text)
        lines = text.split("\n")
        tail = lines.pop()
        out: list[SseEvent] = []
        if lines:
            if self._partial:
                first = lines[0]
                if self._partial_len + len(first) > self._max:
                    return self._fail(self._too_long(), out)
                self.work += self._partial_len
                self._partial.append(first)
                lines[0] = "".join(self._partial)
                self._partial = []
                self._partial_len = 0
            mx = self._max
            try:
                for line in lines:
                    # Blank lines and `data:` lines (nearly all of a model stream) are
                    # handled here; `_line` does the rest, with the same rules.
                    if not line:
                        if self._has_data:
                            out.append(self._dispatch_event())
                        else:
                            self._event = ""  # a blank line without data dispatches nothing
                    elif line.startswith("data:"):
                        if len(line) > mx:
                            raise self._too_long()
                        value = line[6:] if line.startswith(" ", 5) else line[5:]
                        self._data_len += len(value) + 1
                        if self._data_len > mx:
                            raise self._event_too_large()
                        self._data.append(value)
                        self._has_data = True
                    else:
                        self._line(line)
            except SseLimitError as e:
                return self._fail(e, out)
        if tail:
            self._partial_len += len(tail)
            self._partial.append(tail)
            try:
                self._check_line(self._partial_len)
            except SseLimitError as e:
                return self._fail(e, out)
        return out

    def _fail(self, e: SseLimitError, out: list[SseEvent]) -> list[SseEvent]:
        """Over a cap: the events completed before it go out first, the error next."""
        self._failed = e
        self._partial, self._data = [], []  # drop what was buffered
        if not out:
            raise e
        return out

    def _check_line(self, n: int) -> None:
        if n > self._max:
            raise self._too_long()

    def _too_long(self) -> SseLimitError:
        return SseLimitError(
            f"an event-stream line is longer than the cap of {self._max} characters"
        )

    def _event_too_large(self) -> SseLimitError:
        return SseLimitError(
            f"an event-stream event is larger than the cap of {self._max} characters"
        )

    def _line(self, line: str) -> None:
        """A non-blank line (`_feed_text` handles blank and `data:` lines itself)."""
        if line.startswith(":"):
            return
        if len(line) > self._max:
            self._check_line(len(line))
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_len += len(value) + 1
            if self._data_len > self._max:
                raise self._event_too_large()
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            # (not contextlib.suppress: no context manager per retry line)
            try:  # noqa: SIM105
                self._retry = int(value)
            except ValueError:  # more digits than int() reads (sys.set_int_max_str_digits)
                pass

    def _dispatch_event(self) -> SseEvent:
        data = self._data
        event = SseEvent(
            data[0] if len(data) == 1 else "\n".join(data), self._event, self._id, self._retry
        )
        self.work += self._data_len
        self._data = []
        self._data_len = 0
        self._has_data = False
        self._event = ""
        self._retry = None
        return event
