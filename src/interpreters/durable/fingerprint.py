"""The fingerprint of an agent definition, recorded with each durable run.

A resumed run replays its recorded steps by position and generic name (`model`,
`tool:<name>`): on an agent whose instructions, tools or processors changed it would
replay outcomes that agent never produced and report success. So a run records the
definition it started on (`AgentDefinition`, a readable form) and a resume compares it
with the worker's own: `changes` names what differs, `digest` is the short stable id a
worker names to accept a run recorded on another definition (an explicit migration).

The definition is what shapes the run's path: the model id, the instructions, each
tool's name, description and parameter schema, each processor's stage, class, id and
settings (its public attributes), and the structured output schema. Settings that are
not plain data (a callable, a client) count by their type's qualified name, so two
processes with the same code give the same fingerprint.
"""

from __future__ import annotations

import dataclasses
import hashlib

import msgspec

from pipeline.agent import Agent
from pipeline.processor import BaseProcessor

JsonValue = str | int | float | bool | None | tuple["JsonValue", ...] | dict[str, "JsonValue"]


class ToolShape(msgspec.Struct, frozen=True):
    """What the model is told of one tool."""

    name: str
    description: str
    schema: str
    """Its parameter schema, canonical JSON."""


class ProcessorShape(msgspec.Struct, frozen=True):
    """One processor: where it runs, what it is, and its settings (canonical JSON)."""

    stage: str
    cls: str
    id: str
    settings: str


class AgentDefinition(msgspec.Struct, frozen=True):
    """The readable fingerprint of an agent: what a recorded run depends on."""

    model: str
    """The model id; with fallback models, the chain and its policy (canonical JSON)."""
    instructions: tuple[str, ...]
    tools: tuple[ToolShape, ...]
    processors: tuple[ProcessorShape, ...]
    output: str | None
    """The structured output's schema (canonical JSON), None for text."""


_canon = msgspec.json.Encoder(order="sorted")
DEFINITION = msgspec.json.Decoder(AgentDefinition)


def definition(agent: Agent) -> AgentDefinition:
    """The fingerprint of `agent`'s definition."""
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
            ToolShape(t.spec.name, t.spec.description, _json(t.spec.parameters))
            for t in agent.tools
        ),
        processors=tuple(
            ProcessorShape(stage, _qualname(type(p)), p.id, _json(_settings(p)))
            for stage, procs in stages
            for p in procs
        ),
        output=None if so is None else _json({
            "name": so.name, "schema": so.schema, "strict": so.strict,
            # (the mode only when chosen: the digests of agents from before stay)
            **({"mode": so.mode} if so.mode != "auto" else {}),
        }),
    )


def encode(d: AgentDefinition) -> bytes:
    """The canonical encoding of a definition (what `digest` hashes)."""
    return _canon.encode(d)


def digest(d: AgentDefinition) -> str:
    """A short stable id of a definition (16 hex digits of its SHA-256)."""
    return hashlib.sha256(encode(d)).hexdigest()[:16]


def changes(recorded: AgentDefinition, current: AgentDefinition) -> tuple[str, ...]:
    """What differs from `recorded` to `current`, one phrase per field (empty: nothing)."""
    found: list[str] = []
    if recorded.model != current.model:
        found.append(f"model ({recorded.model!r} -> {current.model!r})")
    if recorded.instructions != current.instructions:
        found.append("instructions")
    if recorded.tools != current.tools:
        found.append("tools (" + _diff_named(
            {t.name: t for t in recorded.tools}, {t.name: t for t in current.tools}
        ) + ")")
    if recorded.processors != current.processors:
        found.append("processors (" + _diff_named(
            {f"{p.stage}:{p.id}": p for p in recorded.processors},
            {f"{p.stage}:{p.id}": p for p in current.processors},
        ) + ")")
    if recorded.output != current.output:
        found.append("output type")
    return tuple(found)


def _diff_named(old: dict[str, msgspec.Struct], new: dict[str, msgspec.Struct]) -> str:
    parts = [f"{k} removed" for k in old if k not in new]
    parts += [f"{k} added" for k in new if k not in old]
    parts += [f"{k} changed" for k in old if k in new and old[k] != new[k]]
    return ", ".join(parts) or "reordered"


def _qualname(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _settings(p: BaseProcessor) -> JsonValue:
    """A processor's public settings as plain data (its name and data-part flag too)."""
    if isinstance(p, msgspec.Struct):
        fields = {f: getattr(p, f) for f in p.__struct_fields__}
    elif dataclasses.is_dataclass(p):
        fields = {f.name: getattr(p, f.name) for f in dataclasses.fields(p)}
    else:
        fields = dict(vars(p)) if hasattr(p, "__dict__") else {}
    fields.setdefault("name", p.name)
    fields.setdefault("process_data_parts", p.process_data_parts)
    return {k: _plain(v) for k, v in fields.items() if not k.startswith("_")}


def _plain(v: object, depth: int = 0) -> JsonValue:
    """`v` as plain data; what is not (or nests too deep) counts by its type's name."""
    if v is None or isinstance(v, str | bool | int | float):
        return v
    if depth < 8:
        if isinstance(v, list | tuple | frozenset | set):
            items = [_plain(x, depth + 1) for x in v]
            if isinstance(v, frozenset | set):
                items.sort(key=lambda x: _canon.encode(x))
            return tuple(items)
        if isinstance(v, dict):
            return {str(k): _plain(x, depth + 1) for k, x in v.items()}
        if isinstance(v, msgspec.Struct):
            return {f: _plain(getattr(v, f), depth + 1) for f in v.__struct_fields__}
    if isinstance(v, type):
        return f"<class {_qualname(v)}>"
    return f"<{_qualname(type(v))}>"


def _json(v: object) -> str:
    return _canon.encode(v).decode()
