"""Typed output schemas, for generated nested Struct types:

- `strict_schema` has no `$ref` left, every object in it is closed
  (`additionalProperties: false`) and requires every one of its properties;
- the encoded value of any instance decodes back through `TypedOutput` to the same value
  (the schema and the decoder describe one type).
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from pipeline.values.output_type import TypedOutput, strict_schema

_names = itertools.count()

LEAVES: tuple[tuple[Any, st.SearchStrategy[Any]], ...] = (
    (int, st.integers(-5, 5)),
    (str, st.text(max_size=3)),
    (bool, st.booleans()),
    (int | None, st.none() | st.integers(0, 3)),
    (tuple[str, ...], st.lists(st.text(max_size=2), max_size=2).map(tuple)),
)


@st.composite
def struct_types(draw: st.DrawFn, depth: int = 0) -> tuple[Any, st.SearchStrategy[Any]]:
    """A Struct type with 1-3 fields (leaves or nested Structs) and a strategy for its
    instances."""
    n = draw(st.integers(1, 3))
    fields: list[tuple[str, Any]] = []
    values: dict[str, st.SearchStrategy[Any]] = {}
    for i in range(n):
        nested = depth < 2 and draw(st.booleans())
        typ, strat = draw(struct_types(depth + 1)) if nested else draw(st.sampled_from(LEAVES))
        fields.append((f"f{i}", typ))
        values[f"f{i}"] = strat
    cls = msgspec.defstruct(f"S{next(_names)}", fields, frozen=True)
    return cls, st.fixed_dictionaries(values).map(lambda kw: cls(**kw))


def _walk(node: object) -> list[object]:
    out = [node]
    if isinstance(node, dict):
        out += [x for v in node.values() for x in _walk(v)]
    elif isinstance(node, list):
        out += [x for v in node for x in _walk(v)]
    return out


@given(st.data())
def test_strict_schemas_are_closed_and_inlined(data: st.DataObject) -> None:
    cls, _ = data.draw(struct_types())
    schema = strict_schema(msgspec.json.schema(cls))
    nodes = _walk(schema)
    assert not any(isinstance(n, dict) and "$ref" in n for n in nodes)
    objects = [n for n in nodes if isinstance(n, dict) and n.get("type") == "object"]
    assert objects and objects[0] is schema
    for o in objects:
        assert o["additionalProperties"] is False
        assert sorted(o["required"]) == sorted(o["properties"])


@given(st.data())
def test_an_encoded_instance_decodes_through_the_typed_output(data: st.DataObject) -> None:
    cls, values = data.draw(struct_types())
    value = data.draw(values)
    typed = TypedOutput.of(cls)
    assert typed.decode(msgspec.json.encode(value).decode()) == value
