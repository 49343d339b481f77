"""Typed output: `Agent.create(..., output_type=T)`, and the schema forms providers want.

`TypedOutput.of(T)` is a `StructuredOutput` (so it goes wherever one goes: the agent, a
`StepChange`) that also knows how to decode the reply into a T: a msgspec Struct, a
dataclass, a TypedDict (anything msgspec decodes), or a pydantic model when pydantic is
installed. Its schema has its `$ref`s inlined, so its top level is the object itself
(Anthropic's forced tool needs that); `strict_schema` makes the form OpenAI's strict
`response_format` demands. The loop decodes a final reply; one that does not decode goes
back to the model as feedback (bounded by `max_processor_retries`), then the run fails
with `OutputInvalid`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import ModuleType
from typing import Generic, cast

import msgspec
from typing_extensions import TypeVar

from pipeline.values.bounds import MAX_JSON_DEPTH, json_too_deep
from pipeline.values.messages import JsonObject, SystemMessage
from pipeline.values.model import OutputMode, StructuredOutput
from pipeline.values.result import OutputInvalid
from pipeline.values.schema import pydantic_param

__all__ = ["OutputDecodeError", "OutputInvalid", "TypedOutput", "inline_refs", "strict_schema"]

_DEFS = "#/$defs/"
_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(.*)\n\s*```\s*$", re.S)
_NAME = re.compile(r"[^a-zA-Z0-9_-]")

T = TypeVar("T", default=object)
"""The output type a `TypedOutput` decodes into."""


class OutputDecodeError(ValueError):
    """A reply that is not a valid output; the message says why (for the model)."""


class TypedOutput(StructuredOutput, Generic[T], frozen=True):
    """Structured output that is decoded into `target` (see the module doc).

    What a model request carries is the plain `StructuredOutput` (`wire()`). `mode`
    says how the model is asked (`OutputMode`); `partial` streams the output as it grows
    (`OutputPartial` chunks, made from what the stream processors released).
    """

    target: object = None
    partial: bool = False

    @staticmethod
    def of(
        target: type[T],
        *,
        name: str | None = None,
        strict: bool = True,
        mode: OutputMode = "auto",
        partial: bool = False,
    ) -> TypedOutput[T]:
        """The typed output of `target`; TypeError when it is not an object type,
        ValueError for a mode that is not one (`OutputMode`)."""
        model = pydantic_param(target)
        if model is not None:
            raw: JsonObject = model.schema
        else:
            try:
                raw = msgspec.json.schema(target)
            except TypeError as e:
                raise TypeError(f"output_type {target!r} has no JSON schema: {e}") from e
        schema = inline_refs(raw)
        if schema.get("type") != "object":
            raise TypeError(
                f"output_type must be an object type (a Struct, dataclass, TypedDict or "
                f"pydantic model), got {target!r}"
            )
        if type(partial) is not bool:
            raise ValueError(f"partial must be True or False, got {partial!r}")
        if partial:
            partial_parser()  # the extra is there, or the error says which
        label = name or _NAME.sub("_", getattr(target, "__name__", "output"))[:64] or "output"
        return TypedOutput(
            schema, label, strict, mode, target=target, partial=partial
        )

    def wire(self) -> StructuredOutput:
        return StructuredOutput(self.schema, self.name, self.strict, self.mode)

    def decode(self, text: str) -> T:
        """The reply as a `target`, or OutputDecodeError."""
        fenced = _FENCE.match(text)
        if fenced is not None:  # a reply wrapped in a ```json fence
            text = fenced.group(1)
        assert isinstance(self.target, type)
        if json_too_deep(text):
            raise OutputDecodeError(f"the reply's JSON nests deeper than {MAX_JSON_DEPTH} levels")
        model = pydantic_param(self.target)
        try:
            if model is None:
                out: T = msgspec.json.decode(text, type=self.target)
                return out
            return cast(T, model.validate(msgspec.json.decode(text)))
        except msgspec.DecodeError as e:  # ValidationError is a DecodeError
            raise OutputDecodeError(str(e)) from e

    def convert(self, data: JsonObject) -> T:
        """A JSON object (a partial reply's, as parsed) as a `target`; OutputDecodeError
        when it is not one (yet)."""
        assert isinstance(self.target, type)
        model = pydantic_param(self.target)
        try:
            if model is None:
                out: T = msgspec.convert(data, type=self.target)
                return out
            return cast(T, model.validate(data))
        except msgspec.ValidationError as e:
            raise OutputDecodeError(str(e)) from e


OUTPUT_PROMPT_TAG = "output-schema"
"""The tag of the system message that asks for prompted output."""


def output_prompt(so: StructuredOutput) -> SystemMessage:
    """The system message of `prompted` mode: the schema the reply must match, last."""
    schema = msgspec.json.encode(so.schema, order="sorted").decode()
    return SystemMessage(
        f"Reply with only a JSON object (no other text, no code fence) that matches this "
        f"JSON schema, named {so.name}:\n{schema}",
        OUTPUT_PROMPT_TAG,
    )


def inline_refs(schema: JsonObject) -> dict[str, object]:
    """`schema` with every `$ref` into its `$defs` replaced by the definition; a recursive
    definition stays a `$ref`, and only such ones stay under `$defs`."""
    defs_raw = schema.get("$defs")
    defs: Mapping[str, object] = defs_raw if isinstance(defs_raw, Mapping) else {}
    recursive: set[str] = set()

    def walk(node: object, stack: frozenset[str]) -> object:
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(_DEFS) and ref[len(_DEFS):] in defs:
                name = ref[len(_DEFS):]
                rest = {k: walk(v, stack) for k, v in node.items() if k not in ("$ref", "$defs")}
                if name in stack:
                    recursive.add(name)
                    return {"$ref": ref, **rest}
                target = walk(defs[name], stack | {name})
                assert isinstance(target, dict)
                return {**target, **rest}
            return {k: walk(v, stack) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list | tuple):
            return [walk(v, stack) for v in node]
        return node

    out = walk(schema, frozenset())
    assert isinstance(out, dict)
    kept: dict[str, object] = {}
    while recursive - kept.keys():
        for name in sorted(recursive - kept.keys()):
            kept[name] = walk(defs[name], frozenset({name}))
    if kept:
        out["$defs"] = kept
    return out


def strict_schema(schema: JsonObject) -> dict[str, object]:
    """The form OpenAI's strict mode demands: refs inlined, every object closed
    (`additionalProperties: false`) with every property required, no `default`s."""

    def strict(node: object) -> object:
        if isinstance(node, Mapping):
            out: dict[str, object] = {}
            for k, v in node.items():
                if k in ("properties", "$defs") and isinstance(v, Mapping):
                    out[k] = {name: strict(sub) for name, sub in v.items()}
                elif k != "default":
                    out[k] = strict(v)
            props = out.get("properties")
            if isinstance(props, Mapping) or (
                out.get("type") == "object" and "additionalProperties" not in out
            ):
                out["additionalProperties"] = False
                out["required"] = list(props) if isinstance(props, Mapping) else []
                out.setdefault("properties", {})
            return out
        if isinstance(node, list | tuple):
            return [strict(v) for v in node]
        return node

    out = strict(inline_refs(schema))
    assert isinstance(out, dict)
    return out


def partial_parser() -> ModuleType:
    """jiter, which parses a reply's JSON as far as it streamed (the `partial` extra);
    imported when typed partial output is first asked for, not with the core."""
    try:
        import jiter
    except ImportError:
        raise ImportError(
            "typed partial output (partial=True) parses JSON with jiter: "
            "pip install 'pipeline-agents[partial]'"
        ) from None
    return jiter
