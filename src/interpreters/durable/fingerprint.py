"""The fingerprint of an agent definition, recorded with each durable run.

A resumed run replays its recorded steps by position and generic name (`model`,
`tool:<name>`): on an agent whose instructions, tools, processors or limits changed it
would replay outcomes that agent never produced and report success (a `max_steps` cut
from 10 to 1 ends the replay early with an empty answer). So a run records the
definition it started on (`pipeline.definition.AgentDefinition`, a readable form of
everything that shapes a run) and a resume compares it with the worker's own: `changes`
names what differs, `digest` is the short stable id a worker names to accept a run
recorded on another definition (an explicit migration).
"""

from __future__ import annotations

import hashlib

import msgspec

from pipeline.agent import Agent
from pipeline.definition import AgentDefinition, agent_definition

_canon = msgspec.json.Encoder(order="sorted")
DEFINITION = msgspec.json.Decoder(AgentDefinition)
_SETTINGS = msgspec.json.Decoder(dict[str, object])


def definition(agent: Agent) -> AgentDefinition:
    """What a run of `agent` records (`pipeline.definition.agent_definition`)."""
    return agent_definition(agent)


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
    if recorded.settings != current.settings:
        found.append(_diff_settings(recorded.settings, current.settings))
    return tuple(found)


def _diff_named(old: dict[str, msgspec.Struct], new: dict[str, msgspec.Struct]) -> str:
    parts = [f"{k} removed" for k in old if k not in new]
    parts += [f"{k} added" for k in new if k not in old]
    parts += [f"{k} changed" for k in old if k in new and old[k] != new[k]]
    return ", ".join(parts) or "reordered"


def _diff_settings(old: str, new: str) -> str:
    """`settings (max_steps 10 -> 1, model_settings)`: scalars with their values."""
    if not old or not new:
        return "settings (recorded by another version)"
    a, b = _SETTINGS.decode(old), _SETTINGS.decode(new)
    parts = []
    for key in sorted(a.keys() | b.keys()):
        x, y = a.get(key), b.get(key)
        if x == y:
            continue
        scalar = all(v is None or isinstance(v, int | float | bool)
                     or (isinstance(v, str) and not v.startswith("<")) for v in (x, y))
        parts.append(f"{key} {x!r} -> {y!r}" if scalar else key)
    return f"settings ({', '.join(parts)})"
