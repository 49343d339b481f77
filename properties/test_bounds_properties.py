"""The depth check on JSON text agrees with the depth of the value it encodes, whatever
the strings hold (brackets, quotes, backslashes), for every limit."""

from __future__ import annotations

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from pipeline.values.bounds import json_too_deep, value_too_deep

_tricky = st.text(alphabet='[]{}"\\ab', max_size=6)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | _tricky,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky, inner, max_size=3),
    max_leaves=30,
)


def depth(value: object) -> int:
    """Containers nested in `value` (0 for a scalar), walked with a stack."""
    most = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
        else:
            continue
        most = max(most, d + 1)
    return most


@given(json_values, st.integers(min_value=0, max_value=8))
def test_the_text_check_and_the_value_check_agree_with_the_depth(
    value: object, limit: int
) -> None:
    text = msgspec.json.encode(value)
    assert json_too_deep(text, limit) is (depth(value) > limit)
    assert json_too_deep(text.decode(), limit) is (depth(value) > limit)
    assert value_too_deep(value, limit) is (depth(value) > limit)
