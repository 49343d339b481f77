"""What a journal must not store: secrets in any encoded form, and (on request) the
personal data the agent's PII guard handles, even when split over streamed deltas.

Two layers:

- `LineScrubber` replaces each secret in every encoded line, in every form it may take
  there: raw, JSON-escaped (once and twice, with and without `\\u` and `\\/` escapes)
  and as a Python repr (a value JSON cannot encode is recorded as its repr).
- `DeltaScrubber` sees the streamed deltas (text, reasoning, tool-call arguments) of each
  stream joined, so a value the model streams in pieces is found whole. It holds back
  the entries whose text could still be the start of a value: for secrets the longest
  tail that begins one (at most the longest form less one character), for PII a window
  of `PII_WINDOW` characters. An entry is written once nothing before it is held, so
  the order of the journal is kept and each delta stays its own entry (a replay pulls as
  often as the run did); a redacted value becomes `[redacted]` (or the PII guard's
  replacement) in the delta where it started, and is cut from the following ones.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, Protocol, TypeVar

import msgspec

REDACTED = "[redacted]"

MAX_HELD_ENTRIES = 4096
"""At most this many entries wait behind a held delta; beyond, all are written (a value
split across more entries than that is not joined)."""

PII_WINDOW = 512
"""The characters of a stream held back for the PII guard (longer than any value it finds
whole: an e-mail address is at most 254)."""

Span = tuple[int, int, str]
"""A value found in a text: start, end, what it becomes."""


def _escapes(text: str) -> set[str]:
    """The forms one level of encoding gives `text` (inside a string, quotes dropped)."""
    j = json.dumps(text, ensure_ascii=False)[1:-1]
    return {j, json.dumps(text)[1:-1], j.replace("/", "\\/"), repr(text)[1:-1],
            msgspec.json.encode(text).decode()[1:-1]}


def secret_forms(secret: str) -> tuple[str, ...]:
    """`secret` and the forms two levels of encoding give it, longest first."""
    once = _escapes(secret)
    forms = {secret, *once, *(f for e in once for f in _escapes(e))}
    return tuple(sorted((f for f in forms if f), key=len, reverse=True))


class LineScrubber:
    """Replaces every form of every secret in the strings of an encoded journal line.

    A line that may hold one (its bytes match a form as a JSON string holds it) is decoded
    and each string in it (keys too) scrubbed, then encoded again: a replacement never
    cuts into the JSON around a string, so the line stays valid however the secret reads
    (digits that also appear in a number, a quote that ends a string).
    """

    __slots__ = ("_encode", "_probe", "_text")

    def __init__(self, secrets: Iterable[str], encode: Callable[[object], bytes]) -> None:
        forms = sorted({f for s in secrets if s for f in secret_forms(s)}, key=len,
                       reverse=True)
        self._encode = encode
        self._text = re.compile("|".join(re.escape(f) for f in forms)) if forms else None
        encoded = sorted({msgspec.json.encode(f)[1:-1] for f in forms}, key=len, reverse=True)
        self._probe = re.compile(b"|".join(re.escape(f) for f in encoded)) if encoded else None

    def __call__(self, line: bytes) -> bytes:
        if self._probe is None or self._probe.search(line) is None:
            return line
        return self._encode(self._strings(msgspec.json.decode(line)))

    def text(self, text: str) -> str:
        return text if self._text is None else self._text.sub(REDACTED, text)

    def _strings(self, value: object) -> object:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self._strings(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k): self._strings(v) for k, v in value.items()}
        return value


class Redactor(Protocol):
    """Finds the values to replace in a stream's joined text."""

    def find(self, text: str) -> list[Span]: ...

    def keep(self, text: str) -> int:
        """How many characters at the end of `text` could still be part of a value."""
        ...


class SecretRedactor:
    """Secrets, in every text form (the model may echo one JSON-escaped)."""

    __slots__ = ("_forms", "_longest", "_pattern")

    def __init__(self, secrets: Iterable[str]) -> None:
        self._forms = tuple(sorted({f for s in secrets if s for f in secret_forms(s)},
                                   key=len, reverse=True))
        self._longest = len(self._forms[0]) if self._forms else 0
        self._pattern = (
            re.compile("|".join(re.escape(f) for f in self._forms)) if self._forms else None
        )

    def __bool__(self) -> bool:
        return self._pattern is not None

    def find(self, text: str) -> list[Span]:
        if self._pattern is None:
            return []
        return [(m.start(), m.end(), REDACTED) for m in self._pattern.finditer(text)]

    def keep(self, text: str) -> int:
        for k in range(min(len(text), self._longest - 1), 0, -1):
            tail = text[-k:]
            if any(f.startswith(tail) for f in self._forms):
                return k
        return 0


class PIIRedactor:
    """What a PII guard finds, replaced as its strategy says (a blocked kind: redacted)."""

    __slots__ = ("_find", "_replacement")

    def __init__(
        self,
        find: Callable[[str], Sequence[tuple[int, int, str]]],
        replacement: Callable[[str, str], str],
    ) -> None:
        self._find = find
        self._replacement = replacement

    def find(self, text: str) -> list[Span]:
        return [(s, e, self._replacement(kind, text[s:e])) for s, e, kind in self._find(text)]

    def keep(self, text: str) -> int:
        return min(len(text), PII_WINDOW)

    def text(self, text: str) -> str:
        """A whole text (not streamed) with its values replaced."""
        return apply(text, self.find(text))


def merged(spans: Iterable[Span]) -> list[Span]:
    """Spans in order, each overlapping an earlier one dropped."""
    out: list[Span] = []
    for s in sorted(spans, key=lambda x: (x[0], -x[1])):
        if not out or s[0] >= out[-1][1]:
            out.append(s)
    return out


def apply(text: str, spans: Sequence[Span]) -> str:
    out: list[str] = []
    at = 0
    for s, e, r in spans:
        out.append(text[at:s])
        out.append(r)
        at = e
    out.append(text[at:])
    return "".join(out)


def redistribute(texts: Sequence[str], spans: Sequence[Span]) -> list[str]:
    """`texts` (consecutive pieces of one text) with `spans` of their join replaced: a
    replacement goes in the piece where its span starts, its other characters are cut."""
    joined = "".join(texts)
    out: list[str] = []
    pos = 0
    si = 0
    for t in texts:
        end = pos + len(t)
        pieces: list[str] = []
        i = pos
        while i < end:
            while si < len(spans) and spans[si][1] <= i:
                si += 1
            if si < len(spans) and spans[si][0] <= i:
                if spans[si][0] == i:
                    pieces.append(spans[si][2])
                i = min(end, spans[si][1])
            else:
                stop = min(end, spans[si][0]) if si < len(spans) else end
                pieces.append(joined[i:stop])
                i = stop
        out.append("".join(pieces))
        pos = end
    return out


E = TypeVar("E")


class _Held(Generic[E]):
    __slots__ = ("entry", "key", "ready", "text")

    def __init__(self, entry: E, key: str | None, text: str) -> None:
        self.entry = entry
        self.key = key
        self.text = text
        self.ready = key is None


class DeltaScrubber(Generic[E]):
    """Holds back streamed deltas until what they could start is known (see the module).

    `push` takes each entry with its stream key and text (None for an entry that is not
    a delta) and whether it ends the open streams; it returns the entries to write now,
    in order, each with its (possibly changed) text.
    """

    __slots__ = ("_pending", "_redactors", "_streams")

    def __init__(self, redactors: Sequence[Redactor]) -> None:
        self._redactors = tuple(redactors)
        self._pending: deque[_Held[E]] = deque()
        self._streams: dict[str, list[_Held[E]]] = {}

    def push(
        self, entry: E, delta: tuple[str, str] | None, *, ends_streams: bool
    ) -> list[tuple[E, str | None]]:
        held = _Held(entry, *(delta if delta is not None else (None, "")))
        self._pending.append(held)
        if delta is not None:
            items = self._streams.setdefault(delta[0], [])
            items.append(held)
            self._settle(delta[0], final=False)
        if ends_streams or len(self._pending) > MAX_HELD_ENTRIES:
            self.end_streams()
        return self._ready()

    def end_streams(self) -> None:
        for key in list(self._streams):
            self._settle(key, final=True)

    def flush(self) -> list[tuple[E, str | None]]:
        """Everything held, its streams ended (the run's end)."""
        self.end_streams()
        return self._ready()

    def _settle(self, key: str, *, final: bool) -> None:
        items = self._streams[key]
        texts = [h.text for h in items]
        joined = "".join(texts)
        spans = merged(s for r in self._redactors for s in r.find(joined))
        cut = len(joined) if final else len(joined) - max(
            (r.keep(joined) for r in self._redactors), default=0
        )
        for s, e, _ in spans:  # never release part of a value: cut before it
            if s < cut < e:
                cut = s
                break
        done = [s for s in spans if s[1] <= cut]
        new = redistribute(texts, done) if done else texts
        pos = 0
        keep_from = len(items)
        for n, (h, t) in enumerate(zip(items, new, strict=True)):
            pos += len(h.text)
            h.text = t
            if pos <= cut and keep_from == len(items):
                h.ready = True
            elif keep_from == len(items):
                keep_from = n
        if final or keep_from == len(items):
            for h in items[keep_from:]:
                h.ready = True
            del self._streams[key]
        else:
            self._streams[key] = items[keep_from:]

    def _ready(self) -> list[tuple[E, str | None]]:
        out: list[tuple[E, str | None]] = []
        while self._pending and self._pending[0].ready:
            h = self._pending.popleft()
            out.append((h.entry, h.text if h.key is not None else None))
        return out
