"""The input check's fast pass refuses exactly what its full check refuses.

`check_messages` reads most messages on a fast pass that accepts exact types only and
sends anything else to the full check (`_message_problem`, then `_unencodable`, then the
source). The property: for conversations mixing good messages with values of the wrong
type, of a subclass of the right one, unknown roles and sources, parts of other kinds and
values that do not encode or nest too deep, `check_messages` accepts the conversation
exactly when the full check accepts every message, and a refusal names a message the full
check refuses, with the field the full check names.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import msgspec
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from pipeline.values.bounds import MAX_JSON_DEPTH
from pipeline.values.messages import (
    FilePart,
    Message,
    MessageList,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.validate import _message_problem, _unencodable, check_messages


class Str(str):
    pass


class Int(int):
    pass


class Float(float):
    pass


class Text(TextPart, frozen=True, tag="text"):
    pass


class Msg(Message, frozen=True, kw_only=True):
    pass


def _unchecked(value: object) -> Any:
    """A deliberately ill-typed value: what an untyped caller can pass."""
    return value


def _deep(n: int) -> object:
    v: object = 1
    for _ in range(n):
        v = [v]
    return v


TEXTS = st.sampled_from(["hi", "", Str("hi"), 5, b"hi", None])
IDS = st.sampled_from(["c1", "c2", Str("c1"), 3, None])
ARGS = st.sampled_from([
    {}, {"x": 1}, {"x": object()}, {"x": _deep(MAX_JSON_DEPTH + 1)}, {1: "x"},
    MappingProxyType({"x": 1}), ["x"], "x", None,
])
RESULTS = st.sampled_from(["ok", 1, None, {"r": [1]}, object(), _deep(MAX_JSON_DEPTH + 2)])
BOOLS = st.sampled_from([False, True, 0, 1, None, "no"])

PARTS = st.one_of(
    st.builds(lambda t: TextPart(_unchecked(t)), TEXTS),
    st.builds(lambda t: Text(_unchecked(t)), TEXTS),
    st.builds(lambda i, n, a: ToolCallPart(_unchecked(i), _unchecked(n), _unchecked(a)),
              IDS, IDS, ARGS),
    st.builds(lambda i, n, r, e: ToolResultPart(_unchecked(i), _unchecked(n), r, _unchecked(e)),
              IDS, IDS, RESULTS, BOOLS),
    st.just(FilePart("image/png", "AAAA")),
    st.sampled_from(["hi", {"type": "text", "text": "hi"}, None]),
)

_FIELD_VALUES: dict[str, tuple[object, ...]] = {
    "id": ("m", Str("m"), 7, None),
    "role": ("user", "assistant", "tool", "system", "robot", Str("user"), 1),
    "parts": ((), [TextPart("hi")], "hello", None, ("hi",), ({"type": "text", "text": "hi"},),
              (FilePart("image/png", "AAAA"),)),
    "created_at": (0.0, 1, 2.5, True, "now", Int(1), Float(1.0), None),
    "thread_id": (None, "t", Str("t"), 3),
    "resource_id": (None, "r", Str("r"), b"r"),
    "incomplete": (False, True, 0, 1, None, "no"),
    "metadata": (None, {}, {"k": [1]}, [1], MappingProxyType({"k": 1}), {"k": object()},
                 {"k": _deep(MAX_JSON_DEPTH + 1)}),
}
FIELDS: dict[str, st.SearchStrategy[object]] = {
    name: st.sampled_from(values) for name, values in _FIELD_VALUES.items()
}
FIELDS["parts"] = st.one_of(
    st.lists(PARTS, max_size=3).map(tuple), st.lists(PARTS, max_size=2), FIELDS["parts"]
)
GOOD = Message(id="m", role="user", parts=(TextPart("hi"),))

_PART_VALUES: dict[str, tuple[object, ...]] = {
    "text": ("hi", "", Str("hi"), 5, b"hi", None),
    "tool_call_id": ("c1", Str("c1"), 3, None),
    "tool_name": ("t", Str("t"), 3, None),
    "args": ({}, {"x": 1}, {"x": object()}, {"x": _deep(MAX_JSON_DEPTH + 1)}, {1: "x"},
             MappingProxyType({"x": 1}), ["x"], "x", None),
    "result": ("ok", 1, None, {"r": [1]}, object(), _deep(MAX_JSON_DEPTH + 2)),
    "is_error": (False, True, 0, 1, None, "no"),
}
_GOOD_PARTS = (TextPart("hi"), Text("hi"), ToolCallPart("c1", "t", {}),
               ToolResultPart("c1", "t", "ok"))


def _one_change_each() -> list[object]:
    """GOOD with one field, or one field of its one part, changed: every listed value;
    and what is no Message, or a Message of a subclass."""
    out: list[object] = ["oops", {"role": "user", "content": "hi"}, None, ("m",),
                         Msg(id="m", role="user", parts=(TextPart("hi"),))]
    for part in _GOOD_PARTS:
        for name in part.__struct_fields__:
            for v in _PART_VALUES[name]:
                changed = msgspec.structs.replace(part, **{name: v})
                out.append(msgspec.structs.replace(GOOD, parts=(changed,)))
                out.append(msgspec.structs.replace(GOOD, parts=(TextPart("a"), changed)))
    for name, values in _FIELD_VALUES.items():
        out.extend(msgspec.structs.replace(GOOD, **{name: v}) for v in values)
    return out


@st.composite
def messages(draw: st.DrawFn) -> object:
    """Mostly plain good messages (so that one odd message is often the only one); else
    one or two fields changed, most often the parts, or no message at all."""
    kind = draw(st.integers(0, 19))
    if kind < 10:
        return GOOD
    if kind == 10:
        return draw(st.sampled_from(["oops", {"role": "user", "content": "hi"}, None]))
    if kind < 15:
        return msgspec.structs.replace(GOOD, parts=draw(st.lists(PARTS, max_size=2).map(tuple)))
    changed = draw(st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=2,
                            unique=True))
    return msgspec.structs.replace(GOOD, **{f: draw(FIELDS[f]) for f in changed})


def full_check(m: object, source: object) -> str | None:
    """The field the full check refuses `m` for, or None."""
    if not isinstance(m, Message):
        return "message"
    found = _message_problem(m) or _unencodable(m)
    if found is not None:
        return found[0]
    if not (isinstance(source, str) and source in ("input", "response", "memory", "system",
                                                   "context")):
        return "source"
    return None


@given(
    st.lists(
        st.tuples(messages(), st.sampled_from(["input"] * 12 + ["response", "memory",
                                                              "elsewhere", Str("input"), 1])),
        max_size=6,
    ),
    st.integers(0, 40),
)
def test_the_fast_pass_refuses_what_the_full_check_refuses(
    items: list[tuple[object, object]], good_first: int
) -> None:
    # a run of plain good messages first, as most input starts (the fast pass's case)
    pairs = [(GOOD, "input")] * good_first + items
    ml = MessageList(_unchecked(tuple(m for m, _ in pairs)), _unchecked(tuple(s for _, s in pairs)))
    verdicts = [full_check(m, s) for m, s in pairs]
    note(f"full check: {verdicts}")
    err = check_messages(ml)
    if all(v is None for v in verdicts):
        assert err is None
    else:
        assert err is not None and err.message_index is not None
        assert verdicts[err.message_index] is not None
        assert err.field == verdicts[err.message_index]


@pytest.mark.parametrize("good_first", [0, 3, 40])
def test_one_odd_value_anywhere_gets_the_full_checks_verdict(good_first: int) -> None:
    """Deterministic, for every listed value: one message with it, after good ones."""
    for m in _one_change_each():
        want = full_check(m, "input")
        err = check_messages(MessageList.of([GOOD] * good_first + [_unchecked(m)]))
        got = None if err is None else (err.message_index, err.field)
        assert got == (None if want is None else (good_first, want)), m


def test_a_mapping_that_is_no_dict_is_judged_by_the_full_check() -> None:
    meta: Mapping[str, object] = MappingProxyType({"k": 1})
    m = msgspec.structs.replace(GOOD, metadata=meta)
    assert full_check(m, "input") == "parts"  # it does not encode
    err = check_messages(MessageList.of([GOOD, m]))
    assert err is not None and (err.message_index, err.field) == (1, "parts")
