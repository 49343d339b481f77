"""Typed tools: a Python function whose signature is the tool's JSON schema.

The schema and the argument validation both come from msgspec: the parameters become
a Struct, so the model's arguments are checked (and converted) before the function runs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import get_type_hints, overload

import msgspec

from pipeline.messages import JsonObject

ToolFn = Callable[..., object]


class ToolSpec(msgspec.Struct, frozen=True):
    """What a provider is told about a tool."""

    name: str
    description: str
    parameters: JsonObject


class Tool(msgspec.Struct, frozen=True):
    """A tool the model may call. Build one with `tool(fn)` or `Tool.define(...)`."""

    spec: ToolSpec
    fn: ToolFn
    args_type: type[msgspec.Struct] | None = None
    is_async: bool = False

    @property
    def name(self) -> str:
        return self.spec.name

    def bind(self, args: JsonObject) -> dict[str, object]:
        """Validated keyword arguments for `fn`; raises msgspec.ValidationError."""
        if self.args_type is None:
            return dict(args)
        st = msgspec.convert(dict(args), self.args_type, strict=False)
        return msgspec.structs.asdict(st)

    @staticmethod
    def define(name: str, description: str, parameters: JsonObject, fn: ToolFn) -> Tool:
        """A tool with a hand-written JSON schema; `fn` gets the arguments as keywords."""
        return Tool(ToolSpec(name, description, parameters), fn, None, _is_async(fn))


@overload
def tool(fn: ToolFn, *, name: str | None = None, description: str | None = None) -> Tool: ...
@overload
def tool(
    fn: None = None, *, name: str | None = None, description: str | None = None
) -> Callable[[ToolFn], Tool]: ...
def tool(
    fn: ToolFn | None = None, *, name: str | None = None, description: str | None = None
) -> Tool | Callable[[ToolFn], Tool]:
    """Make a Tool from a function: its name, docstring and annotated parameters.

    Usable as `tool(fn)` or as a decorator `@tool` / `@tool(name=...)`.
    """

    def build(f: ToolFn) -> Tool:
        return make_tool(f, name=name, description=description)

    return build(fn) if fn is not None else build


def make_tool(fn: ToolFn, *, name: str | None = None, description: str | None = None) -> Tool:
    """Like `tool(fn)` with a precise return type."""
    tool_name = name or fn.__name__
    hints = get_type_hints(fn)
    fields: list[tuple[str, object] | tuple[str, object, object]] = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {tool_name!r}: *args/**kwargs cannot be described to a model")
        if p.name not in hints:
            raise TypeError(f"tool {tool_name!r}: parameter {p.name!r} needs a type annotation")
        if p.default is inspect.Parameter.empty:
            fields.append((p.name, hints[p.name]))
        else:
            fields.append((p.name, hints[p.name], p.default))
    args_type = msgspec.defstruct(f"{tool_name}_args", fields, forbid_unknown_fields=True)
    schema = _inline_schema(msgspec.json.schema(args_type))
    doc = description if description is not None else inspect.getdoc(fn) or ""
    return Tool(ToolSpec(tool_name, doc, schema), fn, args_type, _is_async(fn))


def _is_async(fn: ToolFn) -> bool:
    return inspect.iscoroutinefunction(fn)


def _inline_schema(schema: dict[str, object]) -> JsonObject:
    """msgspec puts the object under $defs; providers want it at the top level."""
    defs = schema.get("$defs")
    ref = schema.get("$ref")
    if isinstance(defs, Mapping) and isinstance(ref, str):
        top = dict(defs[ref.rsplit("/", 1)[-1]])
        top.pop("title", None)
        rest = {k: v for k, v in defs.items() if k != ref.rsplit("/", 1)[-1]}
        if rest:
            top["$defs"] = rest
        return top
    return schema


def unencodable(result: object) -> str | None:
    """Why a value (a tool's result, a data chunk's data) cannot be kept in the history
    (JSON), or None when it can.

    An awaitable (a sync tool that returned a coroutine) is closed here, so it is never
    left "never awaited".
    """
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if close is not None:
            close()
        return (
            f"an awaitable ({type(result).__name__}) from a sync function: "
            "declare the tool `async def` and use the async interpreter"
        )
    try:
        msgspec.json.encode(result)
    except (TypeError, ValueError, RecursionError) as e:
        return (
            f"a {type(result).__name__}, which cannot be encoded as JSON "
            f"({type(e).__name__}: {e})"
        )
    return None
