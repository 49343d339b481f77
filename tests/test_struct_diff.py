"""The assertion message for two unequal msgspec values names the fields that differ."""

from __future__ import annotations

from pipeline.values.chunks import TextDelta, Usage
from pipeline.values.messages import Message, TextPart
from tests.struct_diff import struct_diff


def test_names_each_differing_field_by_its_path() -> None:
    a = Message(id="m1", role="user", parts=(TextPart("hello"),))
    b = Message(id="m1", role="assistant", parts=(TextPart("hullo"),))
    lines = struct_diff(a, b)
    assert lines is not None
    assert "  role: 'user' != 'assistant'" in lines
    assert "  parts[0].text: 'hello' != 'hullo'" in lines
    assert not any(line.startswith("  id") for line in lines)


def test_other_values_are_left_to_pytest() -> None:
    assert struct_diff(1, 2) is None
    assert struct_diff(TextDelta("t", "a"), Usage()) == [
        "TextDelta != Usage: fields that differ:",
        f"  (value): {TextDelta('t', 'a')!r} != {Usage()!r}",
    ]
