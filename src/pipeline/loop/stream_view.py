"""`stream_parts` for a stream hook: an O(1) read-only view of what it has seen so far,
and what each stream hook of a run has seen (`SeenChunks`).

Made once per chunk per stream processor, so it must cost next to nothing: a long stream
must not cost quadratic time (docs/DESIGN.md, Data).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import cast, overload

import msgspec

from pipeline.values.chunks import Chunk


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


class SeenChunks:
    """Every chunk each stream hook of a run has seen (its stream_parts), append-only.

    While every stream hook has seen the very same chunks (none was skipped, replaced or
    held back from a later one), they share one list (`shared`), so one view per chunk
    and, for equal states, one args value; the first divergence splits it (`unshare`)
    into a list per hook (`lists`). Views already handed out stay valid: nothing is ever
    removed from a list.
    """

    __slots__ = ("lists", "shared")

    def __init__(self, hooks: int, share: bool) -> None:
        self.lists: list[list[Chunk]] = [[] for _ in range(hooks)]
        self.shared: list[Chunk] | None = [] if share else None

    def of(self, i: int) -> list[Chunk]:
        """What stream hook `i` has seen."""
        return self.shared if self.shared is not None else self.lists[i]

    def unshare(self, upto: int, *, appended: bool) -> None:
        """Give each stream hook its own list of what it has seen, from the shared one.

        Hooks before `upto` have seen all of the shared list; when `appended`, the others
        have not seen its last chunk (skipped or replaced before it reached them).
        """
        shared = self.shared
        assert shared is not None
        lists: list[list[Chunk]] = []
        for k in range(len(self.lists)):
            full = k < upto or not appended
            if k == 0 and full:
                lists.append(shared)
            else:
                lists.append(shared[:] if full else shared[:-1])
        self.lists = lists
        self.shared = None

    def mark(self) -> SeenMark:
        """Where every hook is now (`rewind` goes back here)."""
        if self.shared is not None:
            return SeenMark(self.shared, len(self.shared), ())
        return SeenMark(None, 0, tuple((seen, len(seen)) for seen in self.lists))

    def rewind(self, mark: SeenMark) -> None:
        """Forget what the hooks saw after `mark` (an attempt the step dropped). New lists:
        views handed out stay valid."""
        if mark.shared is not None:
            self.shared = mark.shared[: mark.n]
            self.lists = [[] for _ in self.lists]
        else:
            self.shared = None
            self.lists = [seen[:n] for seen, n in mark.lists]


class SeenMark(msgspec.Struct, frozen=True):
    """What `SeenChunks.mark` noted: the shared list and its length, or each list's."""

    shared: list[Chunk] | None
    n: int
    lists: tuple[tuple[list[Chunk], int], ...]
