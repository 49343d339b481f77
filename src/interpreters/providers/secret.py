"""An API key that does not show itself: masked in repr, str and format."""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

_MIN_TAIL = 6
"""A cut-off text ending in this many characters of the key's start loses them."""


def _json_escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _forms(value: str) -> tuple[str, ...]:
    """How a server may echo a key: raw, JSON-escaped (once, or twice when a JSON body
    is quoted inside another), with `/` escaped too, with `<>&` as Go's encoder writes
    them, percent-encoded. Longest first, so a longer form is replaced before its part."""
    forms = {value}
    once = _json_escaped(value)
    for f in (once, _json_escaped(once)):
        forms.add(f)
        forms.add(f.replace("/", "\\/"))
        forms.add(f.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    forms.add(quote(value, safe=""))
    forms.add(quote(value))
    return tuple(sorted(forms, key=len, reverse=True))


class Secret:
    """Holds a credential; only `reveal()` gives the value, for the one header that needs it.

    The value must be printable ASCII without spaces: a key with a newline or a control
    character would make the HTTP library raise an error that quotes the header value.
    """

    __slots__ = ("_forms", "_value")

    def __init__(self, value: str) -> None:
        if not value or not all(33 <= ord(c) <= 126 for c in value):
            # Never echo the value: it is the thing being protected.
            raise ValueError("an API key must be non-empty printable ASCII without spaces")
        self._value: Final = value
        self._forms: Final = _forms(value)

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str, *, cut: bool = False) -> str:
        """`text` with every occurrence of the key replaced (a server may echo it), raw or
        escaped. `cut`: the text was cut short, so a tail that starts the key goes too."""
        for form in self._forms:
            if form in text:
                text = text.replace(form, "[redacted]")
        if cut:
            for form in self._forms:
                for n in range(min(len(form), len(text)), _MIN_TAIL - 1, -1):
                    if text.endswith(form[:n]):
                        return text[:-n] + "[redacted]"
        return text

    def __repr__(self) -> str:
        return "Secret('[redacted]')"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> tuple[object, ...]:
        # Pickling would write the key to disk or a queue in the clear.
        raise TypeError("a Secret cannot be pickled")
