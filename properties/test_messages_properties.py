"""MessageList is a value, however it was made.

`add` (and the loop's `_add_one`) shares structure with the list it adds to (a shared
append-only log, see `pipeline.values.messages._Log`). The property: any sequence of changes,
each applied to any earlier version (so lists branch from lists that were already added
to), gives exactly what a plain-tuple reference model gives, and leaves every earlier
version as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from hypothesis import given, note
from hypothesis import strategies as st

from pipeline.values.messages import Message, MessageList, Source, SystemMessage, TextPart

SOURCES: tuple[Source, ...] = ("input", "response", "memory", "context")


@dataclass(frozen=True)
class Model:
    """The reference: MessageList as three plain tuples."""

    messages: tuple[Message, ...]
    sources: tuple[Source, ...]
    system: tuple[SystemMessage, ...]


def msg(i: int) -> Message:
    return Message(id=f"m{i}", role="user", parts=(TextPart(f"t{i}"),))


# One change: (kind, which earlier version it applies to (modulo their number), an argument).
changes = st.lists(
    st.tuples(
        st.sampled_from(["add", "add_one", "add_many", "system", "add_system", "remove",
                         "replace", "map", "clear_tag"]),
        st.integers(0, 2**16),
        st.integers(0, 3),
    ),
    max_size=30,
)


def apply(
    kind: str, ml: MessageList, ref: Model, arg: int, fresh: int
) -> tuple[MessageList, Model]:
    source = SOURCES[arg]
    if kind == "add":
        m = msg(fresh)
        return ml.add(m, source), Model((*ref.messages, m), (*ref.sources, source), ref.system)
    if kind == "add_one":  # the loop's own add (the tail of a shared log, appended to)
        m = msg(fresh)
        return ml._add_one(m, source), Model(
            (*ref.messages, m), (*ref.sources, source), ref.system
        )
    if kind == "add_many":
        ms = tuple(msg(fresh + i) for i in range(arg))
        return ml.add(list(ms), source), Model(
            ref.messages + ms, ref.sources + (source,) * arg, ref.system
        )
    if kind == "system":
        sm = SystemMessage(f"s{fresh}", "tag" if arg % 2 else None)
        return ml.with_system([sm]), Model(ref.messages, ref.sources, (sm,))
    if kind == "add_system":
        sm = SystemMessage(f"s{fresh}", "tag")
        return ml.add_system(sm), Model(ref.messages, ref.sources, (*ref.system, sm))
    if kind == "clear_tag":
        return ml.clear_system_tag("tag"), Model(
            ref.messages, ref.sources, tuple(s for s in ref.system if s.tag != "tag")
        )
    if kind == "remove":  # every (arg+2)-th message
        drop = {m.id for m in ref.messages[:: arg + 2]}
        kept = [(m, s) for m, s in zip(ref.messages, ref.sources, strict=True)
                if m.id not in drop]
        return ml.remove_by_ids(drop), Model(
            tuple(m for m, _ in kept), tuple(s for _, s in kept), ref.system
        )
    if kind == "replace":  # keep the odd ones, then one new message
        keep = ref.messages[1::2]
        new = msg(fresh)
        known = dict(zip((m.id for m in ref.messages), ref.sources, strict=True))
        return ml.replace_messages([*keep, new], source), Model(
            (*keep, new), (*(known[m.id] for m in keep), source), ref.system
        )
    assert kind == "map"
    def upper(m: Message) -> Message:
        return m.with_parts((TextPart(m.text.upper()),))
    return ml.map_messages(upper), Model(
        tuple(upper(m) for m in ref.messages), ref.sources, ref.system
    )


def check(ml: MessageList, ref: Model) -> None:
    assert ml.messages == ref.messages and type(ml.messages) is tuple
    assert ml.sources == ref.sources and type(ml.sources) is tuple
    assert ml.system == ref.system
    assert len(ml) == len(ref.messages)
    assert ml == MessageList(ref.messages, ref.sources, ref.system)


@given(changes, st.booleans(), st.sampled_from([1, 30, 40]))
def test_any_history_of_changes_matches_the_tuple_model(
    steps: list[tuple[str, int, int]], read_early: bool, size: int
) -> None:
    """Each version equals the reference, now and after every later change (to it or to
    any other version); whether or not a version's tuples were read before it was added
    to changes nothing; and each encodes to the JSON of the reference. (Starting short,
    near and past the length from which `add` shares a log.)"""
    first = tuple(msg(i) for i in range(size))
    versions = [(MessageList.of(first), Model(first, (SOURCES[0],) * size, ()))]
    fresh = size
    for kind, where, arg in steps:
        ml, ref = versions[where % len(versions)]
        note(f"{kind}({arg}) on a list of {len(ref.messages)}")
        if read_early:
            check(ml, ref)
        versions.append(apply(kind, ml, ref, arg, fresh))
        fresh += 4
    for ml, ref in versions:
        check(ml, ref)
        data = msgspec.json.encode(ml)
        assert data == msgspec.json.encode(MessageList(ref.messages, ref.sources, ref.system))
        assert msgspec.json.decode(data, type=MessageList) == ml
