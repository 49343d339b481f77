"""`stream_parts` for a stream hook: an O(1) read-only view of what it has seen so far.

Made once per chunk per stream processor, so it must cost next to nothing: a long stream
must not cost quadratic time (docs/DESIGN.md, Data).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import cast, overload

import msgspec

from pipeline.chunks import Chunk


class _Seen(msgspec.Struct, frozen=True, eq=False):
    """An immutable view of the first `n` chunks of an append-only list: O(1) to make.

    A Struct (made in C, about half the cost of a Python `__init__`, and it is made once
    per chunk per stream processor) registered as a `Sequence`; `view_of` is its typed
    constructor.
    """

    _items: list[Chunk]
    _n: int

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Chunk: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Chunk]: ...
    def __getitem__(self, i: int | slice) -> Chunk | Sequence[Chunk]:
        if isinstance(i, slice):
            return tuple(self._items[: self._n][i])
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        return self._items[i]

    def __iter__(self) -> Iterator[Chunk]:
        items = self._items
        for k in range(self._n):
            yield items[k]

    def __reversed__(self) -> Iterator[Chunk]:
        items = self._items
        for k in range(self._n - 1, -1, -1):
            yield items[k]

    def __contains__(self, value: object) -> bool:
        return any(c is value or c == value for c in self)

    def index(self, value: object, start: int = 0, stop: int | None = None) -> int:
        seen = tuple(self._items[: self._n])
        return seen.index(value, start, len(seen) if stop is None else stop)

    def count(self, value: object) -> int:
        return tuple(self._items[: self._n]).count(value)

    def __repr__(self) -> str:
        return f"stream_parts({self._items[: self._n]!r})"


Sequence.register(_Seen)
view_of = cast(Callable[[list[Chunk], int], Sequence[Chunk]], _Seen)
"""`_Seen(items, n)`, typed as the Sequence it is."""
