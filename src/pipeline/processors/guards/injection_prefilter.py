"""Words a regular expression cannot match without: a cheap test that skips a search.

`required(pattern)` reads a compiled pattern's syntax tree and gives groups of
literal strings such that every match contains one string of each group ("ignore ...
previous ... instructions" needs one of the words for ignoring, one for what came
before and one for instructions). `may_match` tests them with `in`, which is many
times cheaper than a search that tries every alternative at every position: a text
that lacks a group cannot match, and the search is skipped; one that has them all is
searched as before, so what a rule finds is the same.

Only what is sure is kept: a pattern read without case (`re.I`), a part the parser
gives in a form not known here, or no literal of three bytes at all, gives no
groups (the pattern is always searched).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["may_match", "required"]

_MIN = 3
"""Strings of fewer UTF-8 bytes say too little to be worth a test (two letters of
Chinese are six bytes and say enough)."""


def required(pattern: re.Pattern[str]) -> tuple[frozenset[str], ...]:
    """Groups of strings every match of `pattern` contains one of each (none: no test)."""
    if pattern.flags & re.IGNORECASE:
        return ()
    try:
        from re import _constants, _parser  # type: ignore[attr-defined]

        groups = _Reader(_constants).all_of(_parser.parse(pattern.pattern, pattern.flags))
    except Exception:  # a parser of another version: no test, the search always runs
        return ()
    kept = {_shortest(g) for g in groups if min(len(s.encode()) for s in g) >= _MIN}
    # the rarest-looking first: long strings, few of them
    return tuple(sorted(kept, key=lambda g: (-min(map(len, g)), len(g), sorted(g))))


def _shortest(group: frozenset[str]) -> frozenset[str]:
    # a string that holds another of its group says nothing more ("system prompt" holds
    # "prompt": a text holding the one holds the other)
    return frozenset(s for s in group if not any(o != s and o in s for o in group))


def may_match(groups: Sequence[frozenset[str]], text: str) -> bool:
    """`text` holds a string of each group (so a search may find a match)."""
    has = text.__contains__
    return all(any(map(has, g)) for g in groups)


class _Reader:
    def __init__(self, c: Any) -> None:
        self.c = c

    def all_of(self, items: Iterable[tuple[Any, Any]]) -> list[frozenset[str]]:
        """Groups all of which a match of the sequence `items` contains."""
        c = self.c
        out: list[frozenset[str]] = []
        run = ""
        for op, av in items:
            if op is c.LITERAL:
                run += chr(av)
                continue
            if run:
                out.append(frozenset({run}))
                run = ""
            out.extend(self._item(op, av))
        if run:
            out.append(frozenset({run}))
        return out

    def one_of(self, items: Iterable[tuple[Any, Any]]) -> frozenset[str] | None:
        """The best single group of the sequence (None: none)."""
        groups = self.all_of(items)
        if not groups:
            return None
        return max(groups, key=lambda g: (min(map(len, g)), -len(g)))

    def _item(self, op: Any, av: Any) -> list[frozenset[str]]:
        c = self.c
        if op is c.SUBPATTERN:
            _, add, _, sub = av
            return [] if add & re.IGNORECASE else self.all_of(sub)
        if op is c.BRANCH:
            union: set[str] = set()
            for alt in av[1]:
                g = self.one_of(alt)
                if g is None:
                    return []
                union |= g
            return [frozenset(union)]
        if op is c.IN:
            if all(o is c.LITERAL for o, _ in av):
                return [frozenset(chr(ch) for _, ch in av)]
            return []
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            low, _, sub = av
            return self.all_of(sub) if low >= 1 else []
        if op is getattr(c, "ATOMIC_GROUP", None):
            return self.all_of(av)
        return []  # anchors, lookarounds, classes, any character: no literal required
