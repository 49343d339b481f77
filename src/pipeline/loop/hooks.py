"""How one hook runs across a processor list: order, chaining, state, effect checks.

This is the one place that knows the hook semantics common to all ten hooks:
- processors run in list order and a processor without the hook is skipped;
- a hook's return value is an effect, or `Out(effect, state, emit)`;
- `abort(...)` (a raised ProcessorAbort) becomes `Abort`; any other exception fails closed as
  `HookFailure`, naming the processor and the hook;
- an effect the hook does not allow is a `HookFailure` too;
- a coroutine result is awaited through the interpreter (`AwaitHook`), a generator hook
  has its I/O requests carried out through the interpreter (`Perform`).

One way to call a hook: `call_hook` is `invoke` (the call; a raise becomes what `raised`
makes of it, the one exception-to-effect mapping) then `settle` (drive, await, `check`).
Where hooks run in a loop (the per-step hooks, step.py and output.py, and the per-chunk
stream hooks, stream.py) `invoke` is written out inline, a call less per hook (see
docs/DESIGN.md, decisions made for speed), and a hook that passes skips the generator of
`settle`: a plain `Continue` with nothing recording effects is passed over, anything else
goes to `settle`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Mapping
from types import GeneratorType
from typing import cast

import msgspec

from effects import UNCHANGED, Abort, AwaitHook, Continue, Emit, Out, Perform, Replace, Retry
from effects.started import Collect
from pipeline.loop.judges import JudgeLedger
from pipeline.processor import (
    ALLOWED_EFFECTS,
    CHUNK_TYPES,
    REPLACE_PAYLOAD,
    AskModel,
    BaseProcessor,
    HookEffect,
    HookName,
    ModelAnswer,
    ProcessorAbort,
    StepChange,
)
from pipeline.tools import unencodable
from pipeline.values.chunks import DataChunk
from pipeline.values.messages import MessageList
from pipeline.values.validate import check_messages

HookFn = Callable[..., object]
Yielded = Perform[object] | AwaitHook
"""Commands a hook call may yield to the interpreter."""


class HookFailure(Exception):
    """A processor raised, or returned something its hook does not allow."""

    def __init__(self, processor_id: str, hook: str, error_type: str, message: str) -> None:
        super().__init__(f"processor {processor_id!r} failed in {hook}: {error_type}: {message}")
        self.processor_id = processor_id
        self.hook = hook
        self.error_type = error_type
        self.message = message


class Bound(msgspec.Struct, frozen=True):
    """One processor's implementation of one hook, ready to call."""

    processor: BaseProcessor
    processor_id: str
    hook: HookName
    fn: HookFn
    slot: int
    """Index of the processor's state in the run's state vector."""
    data_parts: bool
    judges: JudgeLedger | None = None
    """The run's judge calls (`judges`): an `AskModel` answered is counted there."""


class Outcome(msgspec.Struct, frozen=True):
    """A hook call's checked result."""

    effect: HookEffect
    state: object
    emit: tuple[DataChunk, ...]
    changed_state: bool


def bind(
    processors: tuple[BaseProcessor, ...],
    hook: HookName,
    slots: Mapping[int, int],
    found: Mapping[int, Mapping[HookName, HookFn]] | None = None,
    judges: JudgeLedger | None = None,
) -> tuple[Bound, ...]:
    """The processors implementing `hook`, in list order. `found`: each processor's
    `hook_functions()` by `id`, asked once per run for every hook name; `judges`: where
    the run counts the model calls its hooks ask for."""
    out: list[Bound] = []
    for p in processors:
        fn = (p.hook_functions() if found is None else found[id(p)]).get(hook)
        if fn is not None:
            out.append(Bound(p, p.id, hook, fn, slots[id(p)], p.process_data_parts, judges))
    return tuple(out)


def call_hook(b: Bound, args: object) -> Generator[Yielded, object, Outcome]:
    """Call one hook and check what it returned: `settle(b, invoke(b, args))`."""
    return (yield from settle(b, invoke(b, args)))


def invoke(b: Bound, args: object) -> object:
    """The first half of `call_hook`: what `b.fn(args)` returned (a raise as `raised`
    makes it)."""
    try:
        return b.fn(args)
    except Exception as e:
        return raised(b, e)


def raised(b: Bound, e: Exception) -> Abort:
    """What an exception a hook raised becomes (the one mapping, for every way a hook is
    called; call it in the `except`): a raised tripwire is an Abort; anything else fails
    the run (HookFailure, as it is if it is one already)."""
    if isinstance(e, ProcessorAbort):
        return Abort(e.reason, e.retry, e.metadata)
    if isinstance(e, HookFailure):
        raise e
    raise HookFailure(b.processor_id, b.hook, type(e).__name__, str(e)) from e


def settle(b: Bound, raw: object) -> Generator[Yielded, object, Outcome]:
    """The second half of `call_hook`: drive a generator hook, await an awaitable, check."""
    try:
        if isinstance(raw, GeneratorType):
            raw = yield from _drive(b, raw)
        elif inspect.isawaitable(raw):
            raw = yield AwaitHook(b.processor_id, b.hook, raw)
    except Exception as e:
        raw = raised(b, e)
    return check(b, raw)


def _drive(
    b: Bound, gen: Generator[object, object, object]
) -> Generator[Yielded, object, object]:
    """Run a generator hook: each value it yields is an I/O request for the interpreter."""
    try:
        request = next(gen)
        while True:
            try:
                answer = yield Perform(b.processor_id, b.hook, request)
            except Exception as e:  # the I/O failed: let the hook handle it or fail
                request = gen.throw(e)
            else:
                if b.judges is not None and answer.__class__ is ModelAnswer:
                    # a judge's answer, asked for at once or collected (a started job)
                    asked = request.job.request if type(request) is Collect else request
                    if isinstance(asked, AskModel):
                        assert isinstance(answer, ModelAnswer)
                        b.judges.add(b.processor_id, b.hook, asked, answer)
                request = gen.send(answer)
    except StopIteration as done:  # the hook returned its result
        return done.value
    finally:
        # Cancelled (or failed) while the hook waited for its I/O: its cleanup runs now,
        # before the run ends, not whenever the generator is collected.
        gen.close()


_ALWAYS_OK = (Continue,)
_CARRIES_PAYLOAD = (Replace, Retry)
"""A tuple, not `Replace | Retry`: the union of generic classes is a typing.Union built
anew (about a microsecond) at every check."""


def check(b: Bound, raw: object) -> Outcome:
    """Validate a hook's return value against what its hook allows."""
    if raw.__class__ is Continue:  # allowed from every hook, carries nothing to check
        return Outcome(raw, None, (), False)
    if isinstance(raw, Out):
        effect, state, emit = raw.effect, raw.state, raw.emit
        changed = state is not UNCHANGED  # `Out(effect, emit=...)` keeps the state
    else:
        effect, state, emit, changed = raw, None, (), False
    if effect is None:  # the commonest slip: a hook that falls off its end
        raise invalid(
            b,
            "returned None; a hook must return an effect: return Continue() to change nothing",
        )
    if isinstance(effect, Emit):
        emit = (*emit, *effect.chunks)
    allowed = ALLOWED_EFFECTS[b.hook]
    if not isinstance(effect, allowed):
        names = ", ".join(t.__name__ for t in allowed)
        raise invalid(
            b,
            f"returned {type(effect).__name__}, which {b.hook} does not allow (allowed: {names})",
        )
    payload_types = REPLACE_PAYLOAD.get(b.hook)
    if payload_types is not None and isinstance(effect, _CARRIES_PAYLOAD):
        value = effect.value
        if not isinstance(value, payload_types):
            raise invalid(
                b,
                f"{type(effect).__name__} carries {type(value).__name__}, "
                f"expected {' or '.join(t.__name__ for t in payload_types)}",
            )
        if value.__class__ is tuple:  # several chunks (stream hooks): each must be one
            for c in value:
                if not isinstance(c, CHUNK_TYPES):
                    raise invalid(
                        b,
                        f"Replace carries a tuple holding {type(c).__name__}, "
                        "expected chunks only",
                    )
        if isinstance(value, StepChange):
            value = value.message_list
        if isinstance(value, MessageList):
            problem = check_messages(value)
            if problem is not None:  # messages no provider could be sent
                raise invalid(b, str(problem), "InvalidMessages")
    chunks: list[DataChunk] = []
    for c in emit:
        if not isinstance(c, DataChunk):
            raise invalid(
                b,
                f"can only emit data-* chunks (DataChunk), got {type(c).__name__}",
            )
        _check_data(b, c)
        chunks.append(c)
    if effect.__class__ is Replace and isinstance(effect.value, DataChunk):
        _check_data(b, effect.value)
    # Checked above against ALLOWED_EFFECTS and REPLACE_PAYLOAD, made from HookEffect.
    return Outcome(cast(HookEffect, effect), state, tuple(chunks), changed)


def _check_data(b: Bound, c: DataChunk) -> None:
    """A data chunk is kept in the messages and sent on the wire: it must encode."""
    problem = unencodable(c.data)
    if problem is not None:
        raise invalid(b, f"data chunk {c.name!r} holds {problem}")


def invalid(b: Bound, message: str, kind: str = "InvalidEffect") -> HookFailure:
    """The failure of a hook that returned what its hook does not allow."""
    return HookFailure(b.processor_id, b.hook, kind, message)


__all__ = [
    "Bound", "HookFailure", "Outcome", "bind", "call_hook", "check",
    "invalid", "invoke", "raised", "settle",
]
