"""Typed tools: a Python function whose signature is the tool's JSON schema.

The schema and the argument validation both come from msgspec: the parameters become
a Struct, so the model's arguments are checked (and converted) before the function runs.
"""

from __future__ import annotations

import copy
import functools
import inspect
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import (
    Annotated,
    Any,
    Concatenate,
    Generic,
    Protocol,
    TypedDict,
    cast,
    get_type_hints,
    overload,
)

import msgspec
from typing_extensions import ParamSpec, TypeVar, Unpack

from pipeline.tools.context import ToolContext, deps_mismatch, deps_type, is_context_type
from pipeline.values.bounds import MAX_JSON_DEPTH, check_cap, json_too_deep, value_too_deep
from pipeline.values.messages import JsonObject
from pipeline.values.model import ToolSpec
from pipeline.values.schema import docstring_params, ecma_hint, pydantic_param

ToolFn = Callable[..., object]

NeedsDeps = TypeVar("NeedsDeps", contravariant=True, default=Any)
"""The deps a tool needs (`Tool[Db]`: a function whose first parameter is a
`ToolContext[Db]`); a tool without a context takes any (`Tool[object]`). Contravariant:
a tool that needs less fits an agent that gives more. A bare `Tool` is any tool."""
D = TypeVar("D")
ContextToolFn = Callable[Concatenate[ToolContext[D], ...], object]
"""A tool function whose first parameter is its context."""
P = ParamSpec("P")

NeedsApproval = bool | Callable[..., bool]
"""A tool's approval rule (`tool(fn, needs_approval=...)`): True (every call waits for
a person), False (none does), or a predicate called with the call's validated arguments
as the tool function gets them (its `ToolContext` too, when it takes one) that says
whether this call waits."""


class Tool(msgspec.Struct, Generic[NeedsDeps], frozen=True):
    """A tool the model may call. Build one with `tool(fn)` or `Tool.define(...)`."""

    spec: ToolSpec
    fn: ToolFn
    args_type: type[msgspec.Struct] | None = None
    is_async: bool = False
    context_param: str | None = None
    """The parameter that gets the `ToolContext` (not in the schema), if any."""
    deps_type: type | None = None
    """The class its `ToolContext[Deps]` asks for, when it can be checked."""
    validators: tuple[tuple[str, Callable[[object], object]], ...] = ()
    """Per parameter, a second validation after msgspec's (pydantic models)."""
    max_result_bytes: int | None = None
    """This tool's cap on its result (encoded JSON bytes); None: the agent's."""
    needs_approval: NeedsApproval = False
    """Whether a call waits for a person's decision before it runs (`tool(...,
    needs_approval=...)`): asked after the agent's `process_tool_call` gates let the
    call through, with the arguments they left (`pipeline.loop.gate`)."""

    @property
    def name(self) -> str:
        return self.spec.name

    # A tool equals a tool. Compared with a string (`args.tool == "refund"` in a gate,
    # never true, so the gate would let the call through) it raises instead.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            raise TypeError(_COMPARED_WITH_STR.format(name=self.spec.name, other=other))
        return _struct_eq(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = msgspec.Struct.__hash__  # (defining __eq__ would drop it)

    def bind(self, args: JsonObject) -> dict[str, object]:
        """Validated keyword arguments for `fn`; raises msgspec.ValidationError."""
        for v in args.values():
            if type(v) is dict or type(v) is list:  # a tool may change what it is given:
                if value_too_deep(args):  # (so the copy below cannot recurse too far)
                    raise msgspec.ValidationError(
                        f"arguments nested deeper than {MAX_JSON_DEPTH} levels"
                    )
                args = _fresh(args)  # never the call's own arguments, kept in the history
                break
        if self.args_type is None:
            return dict(args)
        # (convert never changes its input: a dict goes in as it is, uncopied)
        st = msgspec.convert(
            args if type(args) is dict else dict(args), self.args_type, strict=False
        )
        kwargs = msgspec.structs.asdict(st)
        if self.validators:
            for name, validate in self.validators:
                kwargs[name] = validate(kwargs[name])
        return kwargs

    @staticmethod
    def define(
        name: str, description: str, parameters: JsonObject, fn: ToolFn,
        *, max_result_bytes: int | None = None, needs_approval: NeedsApproval = False,
    ) -> Tool[object]:
        """A tool with a hand-written JSON schema; `fn` gets the arguments as keywords
        (and a `needs_approval` predicate too)."""
        if max_result_bytes is not None:
            check_cap("max_result_bytes", max_result_bytes)
        return Tool(
            ToolSpec(name, description, parameters), fn, None, _is_async(fn),
            max_result_bytes=max_result_bytes,
            needs_approval=check_rule(name, needs_approval),
        )

    def approval_needed(self, kwargs: Mapping[str, object]) -> bool:
        """Whether the call with these validated keyword arguments (`bind`, with the
        `ToolContext` when the tool takes one) waits for a person. A predicate that
        raises, or answers other than a bool, raises (the run fails closed)."""
        rule = self.needs_approval
        if rule is True or rule is False:
            return rule
        answer = rule(**kwargs)
        if type(answer) is not bool:
            raise TypeError(
                f"the needs_approval rule of tool {self.name!r} answered "
                f"{type(answer).__name__}, not a bool"
            )
        return answer


_COMPARED_WITH_STR = (
    "a Tool ({name!r}) was compared with the string {other!r}, which is never equal; "
    "compare its name: args.tool_name == {other!r} (or tool.name)"
)
_struct_eq = msgspec.Struct.__eq__


class StepTools(msgspec.Struct, gc=False, eq=False):
    """A run's view of its step's tools: their specs (what the model is sent) and the
    tools by name (how a call finds its tool), each made again only when the step's tools
    are another tuple (most runs: the same tuple step after step). Private to its run,
    so in no cycle: untracked by the collector."""

    specs_of: tuple[Tool, ...] | None = None
    """The tools `specs` was made of (read: the step asks `is not` before `make`)."""
    specs: tuple[ToolSpec, ...] = ()
    _named_of: tuple[Tool, ...] | None = None
    _named: dict[str, Tool] = {}

    def make_specs(self, tools: tuple[Tool, ...]) -> tuple[ToolSpec, ...]:
        """The specs of `tools`, kept for the steps that ask with the same tuple (the
        step reads `specs` itself when `specs_of is tools`: a call less per step)."""
        self.specs_of, self.specs = tools, tuple(t.spec for t in tools)
        return self.specs

    def by_name(self, tools: tuple[Tool, ...] | None = None) -> dict[str, Tool]:
        """`tools` by name; without `tools`, the last ones asked for."""
        if tools is not None and tools is not self._named_of:
            self._named_of, self._named = tools, {t.name: t for t in tools}
        return self._named


def _fresh(value: JsonObject) -> JsonObject:
    """A copy of a call's arguments down to every dict and list (JSON values: no cycles)."""
    return {k: _copy(v) for k, v in value.items()}


def _copy(v: object) -> object:
    t = type(v)
    if t is dict:
        return {k: _copy(x) for k, x in cast("dict[str, object]", v).items()}
    if t is list:
        return [_copy(x) for x in cast("list[object]", v)]
    return v


class ToolOptions(TypedDict, total=False):
    """What `tool` and `make_tool` take besides the function."""

    name: str | None
    """The tool's name; by default the function's."""
    description: str | None
    """What the model is told the tool does; by default the summary of its docstring."""
    max_result_bytes: int | None
    """A cap on its result (encoded JSON), in place of the agent's."""


@overload
def tool(
    fn: Callable[Concatenate[ToolContext[D], P], object],
    *,
    needs_approval: bool | Callable[Concatenate[ToolContext[D], P], bool] = ...,
    **options: Unpack[ToolOptions],
) -> Tool[D]: ...
@overload
def tool(
    fn: Callable[P, object],
    *,
    needs_approval: bool | Callable[P, bool] = ...,
    **options: Unpack[ToolOptions],
) -> Tool[object]: ...
@overload
def tool(
    fn: None = None, *, needs_approval: bool = ..., **options: Unpack[ToolOptions]
) -> _ToolDecorator: ...
@overload
def tool(
    fn: None = None,
    *,
    needs_approval: Callable[Concatenate[ToolContext[D], P], bool],
    **options: Unpack[ToolOptions],
) -> _RuledDecorator[Concatenate[ToolContext[D], P], D]: ...
@overload
def tool(
    fn: None = None, *, needs_approval: Callable[P, bool], **options: Unpack[ToolOptions]
) -> _RuledDecorator[P, object]: ...
def tool(
    fn: ToolFn | None = None, *, name: str | None = None, description: str | None = None,
    max_result_bytes: int | None = None, needs_approval: NeedsApproval = False,
) -> Tool | _ToolDecorator | _RuledDecorator[..., Any]:
    """Make a Tool from a function: its name, docstring and annotated parameters.

    Usable as `tool(fn)` or as a decorator `@tool` / `@tool(name=...)`.
    `max_result_bytes` caps its result (encoded JSON), in place of the agent's cap.
    `needs_approval`: True (every call waits for a person's decision), or a predicate
    over the call's arguments, with the tool function's own parameters (its
    `ToolContext` first when it takes one; mypy checks it against the function), that
    says whether this call waits: `needs_approval=lambda order, amount: amount > 100`.
    """

    def build(f: ToolFn) -> Tool:
        return make_tool(f, name=name, description=description,
                         max_result_bytes=max_result_bytes, needs_approval=needs_approval)

    return build(fn) if fn is not None else cast("_ToolDecorator", build)


class _ToolDecorator(Protocol):
    """What `@tool(name=...)` is: typed like `tool(fn)`."""

    @overload
    def __call__(self, fn: ContextToolFn[D], /) -> Tool[D]: ...
    @overload
    def __call__(self, fn: ToolFn, /) -> Tool[object]: ...


WantsDeps = TypeVar("WantsDeps", contravariant=True)


class _RuledDecorator(Protocol[P, WantsDeps]):
    """What `@tool(needs_approval=rule)` is: it takes a function with the rule's
    parameters (mypy checks the rule against the tool)."""

    def __call__(self, fn: Callable[P, object], /) -> Tool[WantsDeps]: ...


def check_rule(name: str, rule: object) -> NeedsApproval:
    """`rule` as a tool's `needs_approval`, checked: a bool or a callable."""
    if isinstance(rule, bool) or callable(rule):
        return cast("NeedsApproval", rule)
    raise TypeError(
        f"tool {name!r}: needs_approval is True, False or a predicate over the call's "
        f"arguments, not {rule!r}"
    )


@overload
def make_tool(
    fn: Callable[Concatenate[ToolContext[D], P], object],
    *,
    needs_approval: bool | Callable[Concatenate[ToolContext[D], P], bool] = ...,
    **options: Unpack[ToolOptions],
) -> Tool[D]: ...
@overload
def make_tool(
    fn: Callable[P, object],
    *,
    needs_approval: bool | Callable[P, bool] = ...,
    **options: Unpack[ToolOptions],
) -> Tool[object]: ...
def make_tool(
    fn: ToolFn, *, name: str | None = None, description: str | None = None,
    max_result_bytes: int | None = None, needs_approval: NeedsApproval = False,
) -> Tool:
    """Like `tool(fn)` with a precise return type."""
    if max_result_bytes is not None:
        check_cap("max_result_bytes", max_result_bytes)
    tool_name = name or fn.__name__
    # include_extras: `Annotated[int, msgspec.Meta(ge=1)]` keeps its constraints.
    hints = get_type_hints(fn, include_extras=True)
    summary, param_docs = docstring_params(inspect.getdoc(fn) or "")
    fields: list[tuple[str, object] | tuple[str, object, object]] = []
    context_param: str | None = None
    wants: type | None = None
    validators: list[tuple[str, Callable[[object], object]]] = []
    extra_schemas: dict[str, dict[str, object]] = {}
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {tool_name!r}: *args/**kwargs cannot be described to a model")
        if p.name not in hints:
            raise TypeError(f"tool {tool_name!r}: parameter {p.name!r} needs a type annotation")
        hint = hints[p.name]
        if is_context_type(hint):
            context_param, wants = p.name, deps_type(hint)
            continue
        model = pydantic_param(hint)
        if model is not None:
            validators.append((p.name, model.validate))
            extra_schemas[p.name] = model.schema
            hint = Any  # any JSON here; the model's own validation follows
        doc = param_docs.get(p.name)
        if doc and not _has_description(hint):
            hint = Annotated[hint, msgspec.Meta(description=doc)]
        if p.default is inspect.Parameter.empty:
            fields.append((p.name, hint))
        elif model is None:
            fields.append((p.name, hint, p.default))
        else:  # a model default as JSON data: it is validated into the model like any value
            fresh = functools.partial(copy.deepcopy, model.dump(p.default))
            fields.append((p.name, hint, msgspec.field(default_factory=fresh)))
    args_type = msgspec.defstruct(f"{tool_name}_args", fields, forbid_unknown_fields=True)
    schema = inline_schema(msgspec.json.schema(args_type))
    # The model reads the patterns as JSON Schema; the arguments are checked the same way.
    checked = [(f[0], ecma_hint(f[1]), *f[2:]) for f in fields]
    if any(c[1] is not f[1] for c, f in zip(checked, fields, strict=True)):
        args_type = msgspec.defstruct(
            f"{tool_name}_args", checked, forbid_unknown_fields=True
        )
    if extra_schemas:
        schema = _with_models(schema, extra_schemas)
    doc = description if description is not None else summary
    return Tool(
        ToolSpec(tool_name, doc, schema), fn, args_type, _is_async(fn),
        context_param, wants, tuple(validators), max_result_bytes,
        check_rule(tool_name, needs_approval),
    )


def _has_description(hint: object) -> bool:
    return any(
        isinstance(m, msgspec.Meta) and m.description for m in getattr(hint, "__metadata__", ())
    )


def _with_models(schema: JsonObject, models: Mapping[str, dict[str, object]]) -> JsonObject:
    """Put each pydantic parameter's own schema in place of its placeholder, keeping the
    description; the model's `$defs` join the tool's."""
    out = dict(schema)
    old_props, old_defs = out.get("properties"), out.get("$defs")
    props = dict(old_props) if isinstance(old_props, Mapping) else {}
    defs = dict(old_defs) if isinstance(old_defs, Mapping) else {}
    for pname, model_schema in models.items():
        ms = dict(model_schema)
        inner = ms.pop("$defs", None)
        if isinstance(inner, Mapping):
            defs.update(inner)
        old = props.get(pname)
        if isinstance(old, Mapping) and "description" in old:
            ms["description"] = old["description"]
        props[pname] = ms
    out["properties"] = props
    if defs:
        out["$defs"] = defs
    return out


def _is_async(fn: ToolFn) -> bool:
    return inspect.iscoroutinefunction(fn)


def inline_schema(schema: dict[str, object]) -> JsonObject:
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


_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None), dict, list, tuple})
"""Exact types that are neither a `returns` container nor an awaitable: what tools
return nearly always. Their checks below (abc instance checks, slow) are skipped."""


def tool_result(value: object, is_error: bool) -> tuple[object, bool]:
    """A tool's return value as a result and whether it is an error: a `returns` Result is
    unwrapped (`Success(v)` is v; `Failure(e)` an error result, an exception as
    "Type: message" as for a tool that raised). An `IOResult` (what an awaited
    `@future_safe` tool gives) is unwrapped the same way."""
    if type(value) in _PLAIN or "returns.result" not in sys.modules:
        # (no `returns` container exists before `returns` is imported: it is imported
        # here only then, not with every run's imports)
        return value, is_error
    from returns.io import IOFailure, IOSuccess
    from returns.result import Failure, Success
    from returns.unsafe import unsafe_perform_io

    if isinstance(value, IOSuccess):
        value = Success(unsafe_perform_io(value.unwrap()))
    elif isinstance(value, IOFailure):
        value = Failure(unsafe_perform_io(value.failure()))
    if isinstance(value, Success):
        return value.unwrap(), is_error
    if isinstance(value, Failure):
        err = value.failure()
        return (f"{type(err).__name__}: {err}" if isinstance(err, Exception) else err), True
    return value, is_error


def unencodable(result: object, cap: int | None = None) -> str | None:
    """Why a value (a tool's result, a data chunk's data) cannot be kept in the history
    (JSON), or None when it can: it does not encode, nests deeper than `MAX_JSON_DEPTH`,
    or encodes to more than `cap` bytes (when given).

    An awaitable (a sync tool that returned a coroutine) is closed here, so it is never
    left "never awaited".
    """
    if type(result) not in _PLAIN and inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if close is not None:
            close()
        return (
            f"an awaitable ({type(result).__name__}) from a sync function: "
            "declare the tool `async def` and use the async interpreter"
        )
    try:
        encoded = msgspec.json.encode(result)
    except (TypeError, ValueError, RecursionError) as e:
        return (
            f"a {type(result).__name__}, which cannot be encoded as JSON "
            f"({type(e).__name__}: {e})"
        )
    size = len(encoded)
    if type(result) is not str and json_too_deep(encoded):
        return f"a {type(result).__name__} nested deeper than {MAX_JSON_DEPTH} levels"
    if cap is not None and size > cap:
        return (
            f"a result of {size} bytes of JSON, {size - cap} bytes over its cap of {cap} "
            "(max_result_bytes): ask for less, or a part of it"
        )
    return None


def check_deps(tools: Iterable[Tool], deps: object) -> None:
    """Refuse a run whose deps a tool cannot take, before it starts."""
    for t in tools:
        why = deps_mismatch(t.deps_type, deps) if t.context_param is not None else None
        if why is not None:
            raise TypeError(f"tool {t.name!r} {why}")
