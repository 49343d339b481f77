"""What a tool that asks for it gets: `ctx: ToolContext[Deps]`.

The run's dependencies (`run(..., deps=...)` on every interpreter), the run context, and
a writer for `data-*` chunks. The writer only collects: the loop takes the chunks back
with the tool's outcome and streams them (through the stream processors) before the
tool's result, so the loop stays pure and the order per tool call is fixed however the
interpreter schedules its tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, get_args, get_origin

import msgspec
from typing_extensions import TypeVar

from pipeline.values.chunks import DataChunk

if TYPE_CHECKING:
    from pipeline.values.context import RunContext

Deps = TypeVar("Deps", default=Any)
"""What a run is given as `deps`: `Agent[Deps, ...]`, `ToolContext[Deps]`, the options'
`deps=`. A bare `Agent` or `ToolContext` takes any."""

MAX_TOOL_CHUNKS = 1024
"""How many chunks one tool call may write (every buffer has a cap)."""


class ToolWriterFull(RuntimeError):
    """A tool wrote more chunks than its writer holds."""


class ToolWriter:
    """Collects the `data-*` chunks one tool call writes (Mastra's `writer.custom()`)."""

    __slots__ = ("_chunks", "_open", "cap")

    def __init__(self, cap: int = MAX_TOOL_CHUNKS) -> None:
        self._chunks: list[DataChunk] = []
        self._open = True
        self.cap = cap

    def __eq__(self, other: object) -> bool:
        """By what was written, so equal runs' traces (their RunTools commands) are equal.
        (Defining __eq__ leaves it unhashable, as a mutable value should be.)"""
        if not isinstance(other, ToolWriter):
            return NotImplemented
        return (self._chunks, self._open, self.cap) == (other._chunks, other._open, other.cap)

    def __repr__(self) -> str:
        return f"ToolWriter({self._chunks!r}, open={self._open})"

    def custom(self, name: str, data: object, *, transient: bool = False) -> None:
        """Write a `data-*` chunk; a transient one is streamed but not kept in the messages.

        Raises ValueError for a name without the `data-` prefix.
        """
        self.write(DataChunk(name, data, transient))

    def write(self, chunk: DataChunk) -> None:
        if not isinstance(chunk, DataChunk):
            raise TypeError(f"a tool writes DataChunk values, got {type(chunk).__name__}")
        if not self._open:
            raise RuntimeError("this tool call is over: its writer is closed")
        if len(self._chunks) >= self.cap:
            raise ToolWriterFull(f"a tool call may write at most {self.cap} chunks")
        self._chunks.append(chunk)

    @property
    def written(self) -> tuple[DataChunk, ...]:
        """What the call wrote so far, in order (a journal records it; a replay writes it
        again, since the tool does not run then)."""
        return tuple(self._chunks)

    def close(self) -> tuple[DataChunk, ...]:
        """End the tool call: what it wrote, in order; later writes raise."""
        self._open = False
        return tuple(self._chunks)


class ToolContext(msgspec.Struct, Generic[Deps], frozen=True, kw_only=True):
    """Given to a tool that declares a parameter annotated `ToolContext[Deps]`.

    That parameter is not part of the tool's schema: the model never sees or fills it.
    """

    deps: Deps
    run: RunContext[Deps]
    tool_call_id: str
    tool_name: str
    writer: ToolWriter


def is_context_type(hint: object) -> bool:
    return hint is ToolContext or get_origin(hint) is ToolContext


def deps_type(hint: object) -> type | None:
    """The class a `ToolContext[X]` annotation asks for, when it can be checked."""
    args = get_args(hint)
    if len(args) == 1 and isinstance(args[0], type) and get_origin(args[0]) is None:
        return None if args[0] is object else args[0]
    return None


def deps_mismatch(want: type | None, deps: object) -> str | None:
    """Why `deps` cannot be given to a tool that wants `want`, or None."""
    if want is None or isinstance(deps, want):
        return None
    return f"needs deps of type {want.__name__}, the run has {type(deps).__name__}"
