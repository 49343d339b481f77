"""What a tool's signature says beyond msgspec: docstring parameter descriptions,
pydantic models as parameters, and `pattern`s held to JSON Schema's meaning. Both
libraries are optional and imported only here, when a tool is made: without
`docstring-parser` the parameters have no descriptions (the whole docstring is the
tool's description); without pydantic there are no pydantic parameters.
"""

from __future__ import annotations

import sys
import types
import typing
from collections.abc import Callable
from typing import Annotated, Union, get_args, get_origin

import msgspec

_META_FIELDS = (
    "gt", "ge", "lt", "le", "multiple_of", "pattern", "min_length", "max_length", "tz",
    "title", "description", "examples", "extra_json_schema", "extra",
)


class ModelParam(msgspec.Struct, frozen=True):
    """A pydantic model parameter: its JSON schema and how to validate a JSON value."""

    schema: dict[str, object]
    validate: Callable[[object], object]
    dump: Callable[[object], object]
    """A model value as JSON data (a parameter's default, in the schema)."""


def docstring_params(doc: str) -> tuple[str, dict[str, str]]:
    """The tool description (the docstring without its parameter section) and each
    parameter's description (Google, NumPy or Sphinx style)."""
    try:
        import docstring_parser
    except ImportError:  # the optional extra is not installed: no parameter descriptions
        return doc, {}
    parsed = docstring_parser.parse(doc)
    params = {p.arg_name: p.description for p in parsed.params if p.description}
    if not params:
        return doc, {}
    text = "\n\n".join(
        t for t in (parsed.short_description, parsed.long_description) if t
    )
    return text, params


def pydantic_param(hint: object) -> ModelParam | None:
    """The schema and validator of a parameter annotated with a pydantic model, else None.

    pydantic is only looked at if the program imported it already: a tool cannot have a
    pydantic model parameter otherwise.
    """
    pydantic = sys.modules.get("pydantic")
    if pydantic is None or not isinstance(hint, type):
        return None
    if not issubclass(hint, pydantic.BaseModel):
        return None
    adapter = pydantic.TypeAdapter(hint)

    def validate(value: object) -> object:
        try:
            return adapter.validate_python(value)
        except pydantic.ValidationError as e:
            # The loop turns msgspec's error into an error result the model sees.
            raise msgspec.ValidationError(str(e)) from e

    schema: dict[str, object] = adapter.json_schema()
    def dump(value: object) -> object:
        return adapter.dump_python(value, mode="json")

    return ModelParam(schema, validate, dump)


def ecma_pattern(pattern: str) -> str:
    """A JSON Schema (ECMA-262) pattern as a Python one with the same meaning for `$`:
    the end of the string (Python's `$` also matches before a final newline, so
    `^[a-z]+$` would take "ab\\n"). An escaped `\\$` and a `$` in a class stay literal."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "$":
            c = "\\Z"
        out.append(c)
        i += 1
    return "".join(out)


def ecma_hint(hint: object) -> object:
    """`hint` with every `msgspec.Meta(pattern=...)` in it (also inside lists, dicts,
    unions and optionals) made `ecma_pattern`; the same object when it has none.
    (The tool's schema is made from the hint as written.)"""
    origin = get_origin(hint)
    if origin is Annotated:
        inner, *metas = get_args(hint)
        new_inner = ecma_hint(inner)
        new_metas = [_ecma_meta(m) if isinstance(m, msgspec.Meta) else m for m in metas]
        if new_inner is inner and all(a is b for a, b in zip(new_metas, metas, strict=True)):
            return hint
        return Annotated[(new_inner, *new_metas)]
    args = get_args(hint)
    if origin is None or not args:
        return hint
    new_args = tuple(ecma_hint(a) for a in args)
    if all(a is b for a, b in zip(new_args, args, strict=True)):
        return hint
    if origin is Union or origin is types.UnionType:
        return typing.Union[new_args]  # noqa: UP007 (built from a tuple)
    return origin[new_args]


def _ecma_meta(meta: msgspec.Meta) -> msgspec.Meta:
    if meta.pattern is None:
        return meta
    kw = {f: getattr(meta, f) for f in _META_FIELDS if getattr(meta, f) is not None}
    kw["pattern"] = ecma_pattern(meta.pattern)
    return msgspec.Meta(**kw)
