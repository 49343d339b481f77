"""An agent's definition as plain data: everything that shapes a run of it.

A run that is resumed elsewhere (a durable run after a crash, a suspended run after its
approval) goes on with the agent of the process that resumes it. Whether that agent is
the one the run started on is decided on this description (`agent_definition`): the
model (with fallback models, the chain and its policy), the instructions, each tool's
name, description, parameter schema and result cap, each processor's stage, class, id,
hooks and settings (its public attributes: a PII guard's strategy, a judge's
threshold), the structured output's schema (and its mode, when chosen), and the run's
limits and request settings (`max_steps`, the retry limits and backoff policy,
`tool_choice`, model settings, provider options, the result cap, `prepare_step`).

Values that are not plain data count by what can be read of them the same way in
another process: a function by its qualified name (and the immutable values its closure
holds: a custom detector's pattern), a compiled pattern by its text and flags, anything
else by its type's qualified name. Pure.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types

import msgspec

from pipeline.agent import Agent
from pipeline.processor import BaseProcessor

__all__ = ["AgentDefinition", "JsonValue", "ProcessorShape", "ToolShape",
           "agent_definition", "processor_settings"]

JsonValue = str | int | float | bool | None | tuple["JsonValue", ...] | dict[str, "JsonValue"]


class ToolShape(msgspec.Struct, frozen=True):
    """What the model is told of one tool, and the cap on its result."""

    name: str
    description: str
    schema: str
    """Its parameter schema, canonical JSON."""
    max_result_bytes: int | None = None


class ProcessorShape(msgspec.Struct, frozen=True):
    """One processor: where it runs, what it is, its hooks and its settings (canonical
    JSON)."""

    stage: str
    cls: str
    id: str
    settings: str
    hooks: str = ""
    """Each hook it implements and the function that does (canonical JSON)."""


class AgentDefinition(msgspec.Struct, frozen=True):
    """The readable description of an agent: what a run of it depends on."""

    model: str
    """The model id; with fallback models, the chain and its policy (canonical JSON)."""
    instructions: tuple[str, ...]
    tools: tuple[ToolShape, ...]
    processors: tuple[ProcessorShape, ...]
    output: str | None
    """The structured output's schema (canonical JSON), None for text."""
    settings: str = ""
    """The run's limits and request settings (canonical JSON of `run_settings`)."""


_canon = msgspec.json.Encoder(order="sorted")


def agent_definition(agent: Agent) -> AgentDefinition:
    """The definition of `agent`."""
    stages = (
        ("input", agent.input_processors),
        ("output", agent.output_processors),
        ("error", agent.error_processors),
    )
    so = agent.structured_output
    return AgentDefinition(
        model=agent.model if agent.fallback is None else _json(
            msgspec.to_builtins(agent.fallback)),
        instructions=tuple(m.content for m in agent.instructions),
        tools=tuple(
            ToolShape(t.spec.name, t.spec.description, _json(t.spec.parameters),
                      t.max_result_bytes)
            for t in agent.tools
        ),
        processors=tuple(
            ProcessorShape(stage, qualname(type(p)), p.id, _json(processor_settings(p)),
                           _json(_hooks(p)))
            for stage, procs in stages
            for p in procs
        ),
        output=None if so is None else _json({
            "name": so.name, "schema": so.schema, "strict": so.strict,
            # (the mode only when chosen: the digests of agents from before stay)
            **({"mode": so.mode} if so.mode != "auto" else {}),
        }),
        settings=_json(run_settings(agent)),
    )


def run_settings(agent: Agent) -> dict[str, JsonValue]:
    """The agent's settings that shape a run besides its parts: limits, retries, and
    what each model request asks for."""
    return {
        "max_steps": agent.max_steps,
        "max_processor_retries": agent.max_processor_retries,
        "max_api_error_retries": agent.max_api_error_retries,
        "retry_policy": plain(agent.retry_policy),
        "tool_choice": plain(agent.tool_choice),
        "model_settings": plain(agent.model_settings),
        "provider_options": plain(agent.provider_options),
        "max_tool_result_bytes": agent.max_tool_result_bytes,
        "prepare_step": plain(agent.prepare_step),
    }


def processor_settings(p: BaseProcessor) -> JsonValue:
    """A processor's public settings as plain data (its name and data-part flag too)."""
    if isinstance(p, msgspec.Struct):
        fields = {f: getattr(p, f) for f in p.__struct_fields__}
    elif dataclasses.is_dataclass(p):
        fields = {f.name: getattr(p, f.name) for f in dataclasses.fields(p)}
    else:
        fields = dict(vars(p)) if hasattr(p, "__dict__") else {}
    fields.setdefault("name", p.name)
    fields.setdefault("process_data_parts", p.process_data_parts)
    fields.setdefault("concurrent", p.concurrent)
    return {k: plain(v) for k, v in fields.items() if not k.startswith("_")}


def _hooks(p: BaseProcessor) -> JsonValue:
    return {hook: plain(fn) for hook, fn in p.hook_functions().items()}


def qualname(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


_MUTABLE = (list, dict, set, bytearray)
_READ_AS_DATA = (type, types.FunctionType, types.MethodType, functools.partial, re.Pattern,
                 msgspec.Struct)


def plain(v: object, depth: int = 0) -> JsonValue:
    """`v` as plain data; what is not (or nests too deep) counts by its type's name."""
    if v is None or isinstance(v, str | bool | int | float):
        return v
    if depth < 8:
        if isinstance(v, list | tuple | frozenset | set):
            items = [plain(x, depth + 1) for x in v]
            if isinstance(v, frozenset | set):
                items.sort(key=lambda x: _canon.encode(x))
            return tuple(items)
        if isinstance(v, dict):
            return {str(k): plain(x, depth + 1) for k, x in v.items()}
        if isinstance(v, msgspec.Struct):
            return {f: plain(getattr(v, f), depth + 1) for f in v.__struct_fields__}
        if isinstance(v, re.Pattern):
            return {"pattern": plain(v.pattern), "flags": v.flags}
        if isinstance(v, functools.partial):
            return {"partial": plain(v.func, depth + 1), "args": plain(v.args, depth + 1),
                    "keywords": plain(v.keywords, depth + 1)}
        if isinstance(v, types.MethodType):
            return f"<method {qualname(type(v.__self__))}.{v.__func__.__name__}>"
        if isinstance(v, types.FunctionType):
            return _function(v, depth)
    if isinstance(v, type):
        return f"<class {qualname(v)}>"
    return f"<{qualname(type(v))}>"


def _function(fn: types.FunctionType, depth: int) -> JsonValue:
    """A function by its name, and the immutable values its closure holds (a mutable
    one, which a run may change, by its type)."""
    name = f"<function {fn.__module__}.{fn.__qualname__}>"
    cells = fn.__closure__ or ()
    if not cells:
        return name
    held: list[JsonValue] = []
    for cell in cells:
        try:
            value = cell.cell_contents
        except ValueError:  # a cell not yet filled
            held.append(None)
            continue
        mutable = isinstance(value, _MUTABLE) or (
            not isinstance(value, _READ_AS_DATA) and hasattr(value, "__dict__")
        )
        held.append(f"<{qualname(type(value))}>" if mutable else plain(value, depth + 1))
    return {"function": name, "closure": tuple(held)}


def _json(v: object) -> str:
    return _canon.encode(v).decode()
