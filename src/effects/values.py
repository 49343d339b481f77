"""Effect values: what a processor hook returns.

Each hook accepts only some of them (see `pipeline.processor`); the per-hook return
types make an illegal effect a mypy error, and the runner rejects one at run time too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar

import msgspec

T = TypeVar("T")
E = TypeVar("E")
S = TypeVar("S")
C = TypeVar("C")
T_co = TypeVar("T_co", covariant=True)
"""Replace's payload is covariant (it is frozen): `Replace[TextDelta]` is a
`Replace[Chunk]`, and a hook's result type may admit one payload or several kinds of it
(a chunk or a tuple of chunks) in a single `Replace[...]`."""


class Continue(msgspec.Struct, frozen=True, tag=True):
    """Pass on unchanged (for an API error: not handled by this processor)."""


class Replace(msgspec.Struct, Generic[T_co], frozen=True, tag=True):
    """Replace the hook's subject (messages, step settings, a chunk) with `value`.

    From `process_output_stream`, `value` may also be a tuple of chunks: the chunk is
    replaced by several, or by none (`Replace(())`), so text held back can be released
    later as ordinary chunks.
    """

    value: T_co


class Abort(msgspec.Struct, frozen=True, tag=True):
    """Stop the run with a tripwire.

    `retry=True` from `process_output_step` discards the response and asks the model
    again with `reason` as feedback (bounded by `max_processor_retries`); from any other
    hook it is a plain abort. An empty reason becomes "Tripwire triggered by <processor id>".
    """

    reason: str = ""
    retry: bool = False
    metadata: Mapping[str, object] | None = None


class Retry(msgspec.Struct, Generic[T], frozen=True, tag=True):
    """From `process_api_error`: call the model again, with `value` as the new messages
    when given (say, trimmed history after a context-length error)."""

    value: T | None = None


class Skip(msgspec.Struct, frozen=True, tag=True):
    """From `process_output_stream`: drop this chunk; later processors never see it."""


class SkipCall(msgspec.Struct, frozen=True, tag=True):
    """From `process_tool_call`: do not run the tool; `result` is the call's one result
    (the model sees it; `is_error` marks it as an error result, e.g. a refusal)."""

    result: object
    is_error: bool = False


class AskApproval(msgspec.Struct, frozen=True, tag=True):
    """From `process_tool_call`: the call runs only once a person approves it. The run
    ends `suspended`, listing the call with `message` (what to show the approver)."""

    message: str = ""
    metadata: Mapping[str, object] | None = None


class Emit(msgspec.Struct, Generic[C], frozen=True, tag=True):
    """Send extra `data-*` chunks to the caller, beside the hook's main effect."""

    chunks: tuple[C, ...]


class Unchanged:
    """The type of `UNCHANGED`: an `Out` that leaves the processor's state as it was."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = Unchanged()


class Out(msgspec.Struct, Generic[E, S], frozen=True, tag=True):
    """A hook's effect together with the processor's new state and chunks to emit.

    A hook that returns a bare effect keeps its state as it was, and so does an `Out`
    without a state: `Out(Continue(), emit=(chunk,))` only emits.
    """

    effect: E
    state: S | Unchanged = UNCHANGED
    emit: tuple[object, ...] = ()


Effect = (
    Continue | Replace[object] | Abort | Retry[object] | Skip | SkipCall | AskApproval
    | Emit[object]
)
