"""What a tool's signature says beyond msgspec: docstring parameter descriptions and
pydantic models as parameters. Both libraries are optional and imported only here, when
a tool is made: without `docstring-parser` the parameters have no descriptions (the whole
docstring is the tool's description); without pydantic there are no pydantic parameters.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import msgspec


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
