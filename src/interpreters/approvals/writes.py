"""The memory writes a suspended tree of runs keeps, stored with their classes.

A child run that finished before a sibling suspended the tree leaves its writes in its
parent's suspension (`KeptChild.writes`: `effects.Write` values, a `SaveMessages`...),
committed once the root is approved (`docs/agents.md`). A store that encodes the
suspension (the SQL approval stores, a journal) would read each back as the field's
declared class, the bare `Write`, its content lost. So the writes are stored beside the
suspension, each with where it was and its class (`StoredWrite`), and put back in place,
typed, when it is read (`with_writes`). A suspension without kept writes is stored as it
is.

A write's class is found among the `Write` subclasses this process has imported (the
library's are imported with the memory processors that ask for them), never by
importing a module a stored name gives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import msgspec

from effects import Write
from pipeline.values.result import GatedCall, Suspension


class StoredWrite(msgspec.Struct, frozen=True, array_like=True):
    """One kept write: where (`at`: the indices of the gated calls down the waiting child
    runs, then of the call that kept it, then of the write), its class and its fields."""

    at: tuple[int, ...]
    kind: str
    body: msgspec.Raw


class UnknownWrite(ValueError):
    """A stored write of a class this process does not know (its module not imported)."""


BLANK = Write()
"""What stands in a stored suspension for a write stored beside it."""


def kind_of(write: Write) -> str:
    t = type(write)
    return f"{t.__module__}:{t.__qualname__}"


def _kept(s: Suspension, prefix: tuple[int, ...]) -> Iterator[tuple[tuple[int, ...], Write]]:
    for i, g in enumerate(s.calls):
        if g.child is not None:
            yield from _kept(g.child, (*prefix, i))
        elif g.kept is not None:
            for j, (_, w) in enumerate(g.kept.writes):
                yield (*prefix, i, j), w


def without_writes(
    s: Suspension, encode: Callable[[object], bytes]
) -> tuple[Suspension, tuple[StoredWrite, ...]]:
    """`s` with each kept write blanked, and the writes as stored (`encode`: the store's
    encoder of a write's fields); `s` itself when it keeps none."""
    found = tuple(_kept(s, ()))
    if not found:
        return s, ()
    stored = tuple(StoredWrite(at, kind_of(w), msgspec.Raw(encode(w))) for at, w in found)
    return _replaced(s, {at: BLANK for at, _ in found}), stored


def with_writes(
    s: Suspension, stored: tuple[StoredWrite, ...], decode: Callable[[bytes, type], object]
) -> Suspension:
    """`s` with the writes stored beside it put back, each of its class (`decode`: the
    store's decoder of a write's fields into a class). `UnknownWrite` for a class this
    process does not know, `msgspec.ValidationError` for fields that do not fit it."""
    if not stored:
        return s
    classes = _write_classes()
    put: dict[tuple[int, ...], Write] = {}
    for w in stored:
        cls = classes.get(w.kind)
        if cls is None:
            raise UnknownWrite(
                f"a kept write of class {w.kind!r}, which this process has not imported"
            )
        value = decode(bytes(w.body), cls)
        assert isinstance(value, Write)
        put[w.at] = value
    return _replaced(s, put)


def _replaced(s: Suspension, put: dict[tuple[int, ...], Write]) -> Suspension:
    """`s` with the writes at the positions of `put` replaced."""
    calls: list[GatedCall] = list(s.calls)
    for i, g in enumerate(calls):
        if g.child is not None:
            mine = {at[1:]: w for at, w in put.items() if at[0] == i}
            if mine:
                calls[i] = msgspec.structs.replace(g, child=_replaced(g.child, mine))
        elif g.kept is not None and any(at[0] == i and len(at) == 2 for at in put):
            writes = tuple(
                (who, put.get((i, j), w)) for j, (who, w) in enumerate(g.kept.writes)
            )
            calls[i] = msgspec.structs.replace(
                g, kept=msgspec.structs.replace(g.kept, writes=writes))
    return msgspec.structs.replace(s, calls=tuple(calls))


def _write_classes() -> dict[str, type[Write]]:
    """Every `Write` subclass imported, by `kind_of` name (a name two classes share is
    left out: neither is guessed)."""
    out: dict[str, type[Write]] = {}
    twice: set[str] = set()
    todo: list[type[Write]] = [Write]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            name = f"{sub.__module__}:{sub.__qualname__}"
            if name in out:
                twice.add(name)
            out[name] = sub
            todo.append(sub)
    for name in twice:
        del out[name]
    return out


__all__ = ["StoredWrite", "UnknownWrite", "kind_of", "with_writes", "without_writes"]
