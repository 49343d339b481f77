"""Ids made unique against the ones already taken."""

from __future__ import annotations


def unique_id(base: str, taken: set[str], sep: str = "_") -> str:
    """`base`, or the first of `base_2`, `base_3`... (joined by `sep`) that `taken` lacks;
    it is added to `taken`."""
    new, n = base, 1
    while new in taken:
        n += 1
        new = f"{base}{sep}{n}"
    taken.add(new)
    return new
