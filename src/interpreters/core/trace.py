"""A run's full trace: every command the loop issued, every processor effect, every chunk."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from effects import AwaitHook, RunTools
from pipeline.processor import HookEffect
from pipeline.protocol import EffectRecord, LoopCommand
from pipeline.tools.context import ToolContext
from pipeline.values.chunks import Chunk

C = TypeVar("C")


class Trace:
    """Filled in as a run goes; interpreters that are asked for one record into it."""

    __slots__ = ("chunks", "commands", "effects")

    def __init__(self) -> None:
        self.commands: list[LoopCommand] = []
        self.effects: list[EffectRecord] = []
        self.chunks: list[Chunk] = []

    def record_effect(self, e: EffectRecord) -> None:
        self.effects.append(e)

    def record_command(self, c: LoopCommand) -> None:
        self.commands.append(c)

    def effects_of(self, processor_id: str, hook: str | None = None) -> list[HookEffect]:
        """The effects one processor returned, in order (optionally for one hook)."""
        return [
            e.effect
            for e in self.effects
            if e.processor_id == processor_id and (hook is None or e.hook == hook)
        ]

    def commands_of(self, kind: type[C]) -> list[C]:
        """The commands of one kind, in order: `trace.commands_of(CallModel)`."""
        return [c for c in self.commands if isinstance(c, kind)]

    def chunk_types(self) -> list[str]:
        """The `type` tag of every chunk the caller received, in order."""
        return [_TAGS[type(c)] for c in self.chunks]

    def comparable(self) -> tuple[object, ...]:
        """A value equal for equal runs under any interpreter (awaitables are dropped)."""
        return (tuple(comparable_command(c) for c in self.commands), tuple(self.effects),
                tuple(self.chunks))


def comparable_command(c: LoopCommand) -> object:
    """A command as `Trace.comparable` compares it (awaitables dropped, tools by name)."""
    if isinstance(c, AwaitHook):
        return ("await", c.processor_id, c.hook)
    if isinstance(c, RunTools):  # tools by name: each Tool value has its own args class
        return ("tools", tuple((i.call, _arguments(i.kwargs), i.error) for i in c.calls))
    return c


def _arguments(kwargs: dict[str, object] | None) -> dict[str, object] | None:
    """A call's arguments, its tool context by what identifies the call: the deps and the
    writer in it are live objects of the run (another connection in a replay), not
    what the model asked for."""
    if kwargs is None or not any(isinstance(v, ToolContext) for v in kwargs.values()):
        return kwargs
    return {
        k: ("tool-context", v.tool_call_id, v.tool_name) if isinstance(v, ToolContext) else v
        for k, v in kwargs.items()
    }


def _tag(t: type) -> str:
    info = msgspec.inspect.type_info(t)
    assert isinstance(info, msgspec.inspect.StructType)
    return str(info.tag)


_TAGS: dict[type, str] = {t: _tag(t) for t in Chunk.__args__}
