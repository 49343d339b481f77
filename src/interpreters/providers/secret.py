"""An API key that does not show itself: masked in repr, str and format."""

from __future__ import annotations

from typing import Final


class Secret:
    """Holds a credential; only `reveal()` gives the value, for the one header that needs it.

    The value must be printable ASCII without spaces: a key with a newline or a control
    character would make the HTTP library raise an error that quotes the header value.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value or not all(33 <= ord(c) <= 126 for c in value):
            # Never echo the value: it is the thing being protected.
            raise ValueError("an API key must be non-empty printable ASCII without spaces")
        self._value: Final = value

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str) -> str:
        """`text` with every occurrence of the key replaced (a server may echo it)."""
        return text.replace(self._value, "[redacted]") if self._value in text else text

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
