"""A text as a reader sees it, for detectors: invisible characters gone, compatibility
forms made plain, look-alike letters folded to Latin; and where each character of that
view came from, so what is found in the view can be handled in the text itself.

The view is built character by character:
- NFKC of each: full-width letters, digits and `@` (U+FF01 to U+FF5E) become ASCII ones,
  a no-break space a space, a ligature its letters;
- invisible ones dropped: format characters (category Cf: zero-width spaces and
  joiners, the word joiner, the BOM, the soft hyphen, bidi controls) and the other
  default-ignorable ones (variation selectors, the combining grapheme joiner, Hangul
  fillers);
- the letters of other scripts shaped like Latin ones (Cyrillic, Greek, Armenian,
  Cherokee, Latin small capitals) folded to them (`LOOKALIKES`, the table
  PromptInjectionDetector's skeleton uses too), and the dashes drawn as a hyphen-minus
  made one (`DASHES`).
Each view character then has one origin, the text character it came from, and a span
found in the view maps back to the whole span of the text it was read from, invisible
characters inside it included.

ASCII text is its own view (nothing to fold), so the common case costs one `isascii`;
so is text that reads as it is written (curly quotes, accents, CJK).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import msgspec

__all__ = ["DASHES", "LOOKALIKES", "TextView", "view"]

# The lookalikes attackers use most (Cyrillic and Greek letters shaped like Latin ones).
# A fixed table keeps detection the same whether or not the `guards` extra is installed.
LOOKALIKES = str.maketrans(
    "аеорсухіјѕԁԛԝӏАВЕКМНОРСТХІЈЅαεικνορτυχΑΒΕΗΙΚΜΝΟΡΤΥΧ"
    # more drawn as Latin letters are (UTS #39 confusables): Cyrillic, Greek, Armenian,
    # Cherokee capitals, Latin small capitals and other Latin forms NFKC keeps
    "һүҮѵѴӀԜΖϳͿօՕսՍհոՏ"  # noqa: RUF001
    "ᎪᏴᏟᎠᎬᏀᎻᎫᏦᏞᎷᏢᎡᏚᎢᏙᏔᏃꮯꮪꮓꮩꮃ"  # noqa: RUF001
    "ᴄᴏᴜᴠᴡᴢꜱɑɡǀ",  # noqa: RUF001
    "aeopcyxijsdqwlABEKMHOPCTXIJSaeiknoptuxABEHIKMNOPTYX"
    "hyYvVlWZjJoOuUhnS"
    "ABCDEGHJKLMPRSTVWZcszvw"
    "couvwzsagl",
)

DASHES = str.maketrans("\u2010\u2011\u2012\u2212", "----")
"""Dashes drawn as the hyphen-minus (hyphen, non-breaking hyphen, figure dash, minus
sign): models write U+2011 in phone and card numbers. NFKC keeps them."""

_IGNORABLE = frozenset((
    0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0,
    *range(0x180B, 0x1810), *range(0x2060, 0x2070), *range(0xFE00, 0xFE10),
    *range(0xFFF0, 0xFFF9), *range(0xE0000, 0xE1000),
))
"""Default-ignorable characters outside category Cf (they render as nothing), the ones
not yet assigned included (U+2065, U+FFF0..U+FFF8, the rest of U+E0000..U+E0FFF):
a renderer draws none of them."""


def _invisible(ch: str) -> bool:
    return unicodedata.category(ch) == "Cf" or ord(ch) in _IGNORABLE


@lru_cache(maxsize=4096)
def _plain(ch: str) -> str:
    """What one non-ASCII character reads as: "" (invisible), itself or its plain form."""
    if _invisible(ch):
        return ""
    s = unicodedata.normalize("NFKC", ch)
    if s != ch:
        s = "".join(c for c in s if not _invisible(c))
    return s.translate(LOOKALIKES).translate(DASHES)


_ASCII = frozenset(map(chr, range(128)))


class TextView(msgspec.Struct, frozen=True):
    """`text` read plainly; `origin[i]` is the index in the original of `text[i]`
    (`origin` None: the view is the original, character for character)."""

    text: str
    size: int
    """The original's length."""
    origin: tuple[int, ...] | None = None

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original's span a non-empty span of the view was read from."""
        o = self.origin
        if o is None:
            return start, end
        return o[start], o[end - 1] + 1

    def offset(self, i: int) -> int:
        """The original's index where view index `i` starts (its length at the end)."""
        o = self.origin
        if o is None:
            return i
        return o[i] if i < len(o) else self.size


def view(text: str) -> TextView:
    """`text` as a reader sees it (see the module), with where each character came from."""
    if text.isascii() or all(_plain(c) == c for c in set(text).difference(_ASCII)):
        return TextView(text, len(text))  # also accents, curly quotes, CJK: read as written
    out: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        if ch < "\x80":
            out.append(ch)
            origin.append(i)
            continue
        s = _plain(ch)
        if s:
            out.append(s)
            origin.extend([i] * len(s))
    return TextView("".join(out), len(text), tuple(origin))
