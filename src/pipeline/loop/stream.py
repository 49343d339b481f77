"""process_output_stream: every chunk of a run through the stream processors.

Model chunks and the loop's own (step start/finish, tool results, finish) alike. This is
the per-chunk hot path of a run: keep it free of extra attribute lookups and calls.

A stream hook may replace a chunk by several or by none (`Replace((a, b))`, `Replace(())`),
so a processor can hold text back and release it later: each released chunk goes through
the later processors in order, as an ordinary chunk. When the model's response ends, each
processor's `flush_output_stream` (where it has one) releases or drops what it still holds,
before the response's message is made. Whatever is still held when a run ends early
(abort, failure, cancel) is simply never delivered: only `deliver` hands chunks out.

Each function here takes the run's configuration and state (`rc`, `st`: state.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Iterable
from types import GeneratorType
from typing import TypedDict

from effects import Abort, Continue, Replace, Skip
from pipeline.agent import Agent
from pipeline.loop.hooks import Bound, HookFn, Outcome, call_hook, check, invalid, invoke, raised
from pipeline.loop.response import StepContent
from pipeline.loop.state import RunConfig, RunState, SeenChunks, apply, trip, view_of
from pipeline.processor import FlushArgs, StreamArgs
from pipeline.protocol.replies import LoopCommand
from pipeline.values.chunks import Chunk, DataChunk, TextDelta


class StreamPlan(TypedDict):
    """The stream part of a run's configuration: `RunConfig` fields of the same names
    (`RunConfig(..., **plan)`)."""

    h_flush: tuple[tuple[Bound, int], ...]
    stream_io: bool
    stream_plan: tuple[tuple[Bound, HookFn, int, bool], ...]
    data_all: bool
    data_any: bool
    bare_stream: bool


def plan_stream(
    agent: Agent, h_stream: tuple[Bound, ...], flush: tuple[Bound, ...] = ()
) -> StreamPlan:
    """The stream configuration for the stream hooks `h_stream` and the `flush` hooks.

    `flush` is in processor order, as `h_stream` is.
    """
    if not h_stream and not flush:
        return _NO_STREAM_HOOKS
    at = {id(p): i for i, p in enumerate(agent.output_processors)}
    io = any(
        inspect.iscoroutinefunction(b.fn) or inspect.isgeneratorfunction(b.fn)
        for b in (*h_stream, *flush)
    )
    return StreamPlan(
        h_flush=tuple(
            (f, sum(1 for b in h_stream if at[id(b.processor)] <= at[id(f.processor)]))
            for f in flush
        ),
        stream_io=io,
        stream_plan=tuple((b, b.fn, b.slot, b.data_parts) for b in h_stream),
        data_all=all(b.data_parts for b in h_stream),
        data_any=any(b.data_parts for b in h_stream),
        bare_stream=not h_stream and not io,
    )


_NO_STREAM_HOOKS = StreamPlan(
    h_flush=(), stream_io=False, stream_plan=(), data_all=True, data_any=False, bare_stream=True
)
"""The plan of an agent with no stream hook (`all` of nothing is True, `any` False)."""


def fresh_seen(rc: RunConfig) -> SeenChunks:
    """What the run's stream hooks have seen at its start: nothing. Plain hooks share
    one list until they diverge (`SeenChunks`)."""
    return SeenChunks.fresh(len(rc.h_stream), bool(rc.h_stream) and not rc.stream_io)


def stream_args(rc: RunConfig, st: RunState, i: int, b: Bound, chunk: Chunk) -> StreamArgs[object]:
    seen = st.seen.lists[i]
    seen.append(chunk)
    return StreamArgs(
        part=chunk,
        stream_parts=view_of(seen, len(seen)),
        state=st.states[b.slot],
        message_list=st.ml,
        context=rc.ctx,
    )


def stream_effect(
    rc: RunConfig, st: RunState, b: Bound, o: Outcome, chunk: Chunk, content: StepContent | None
) -> Chunk | tuple[Chunk, ...] | None:
    """Apply one stream hook's outcome: the chunk to pass on, the chunks it became
    (`Replace` with a tuple), or None when skipped.

    Chunks a stream hook emits while a model response streams belong to that response:
    kept in its message unless transient (emits on the loop's own chunks are held).
    """
    eff = apply(rc, st, b, o, keep=content is None)
    if content is not None:
        for c in o.emit:
            content.add(c)
    if isinstance(eff, Abort):
        raise trip(b, eff)
    if isinstance(eff, Skip):
        return None
    if isinstance(eff, Replace):
        became: Chunk | tuple[Chunk, ...] = eff.value  # `check` made sure it is
        return became
    return chunk


def walk_all(
    rc: RunConfig, st: RunState, chunks: tuple[Chunk, ...], content: StepContent | None, start: int
) -> None:
    """Chunks one hook released, each through the hooks from `start` on, in order."""
    for c in chunks:
        walk(rc, st, c, content, start)


def deliver(st: RunState, chunk: Chunk, content: StepContent | None) -> None:
    if content is not None:
        content.add(chunk)
    st.pending.append(chunk)


def process_chunk(rc: RunConfig, st: RunState, chunk: Chunk, content: StepContent | None) -> None:
    """One chunk through every stream processor: the per-chunk hot path.

    Used when every stream hook is a plain function. While the hooks share what they
    have seen, a pass-through Continue costs one call: the view of the shared list and
    the args value (for hooks whose states are the same object) are made once.
    """
    shared = st.seen.shared
    if shared is None:
        walk(rc, st, chunk, content, 0)
        return
    if type(chunk) is DataChunk and not rc.data_all:
        if not rc.data_any:  # no stream hook sees data chunks: it passes as it is
            deliver(st, chunk, content)
            return
        st.seen.unshare(0, appended=False)  # some hooks see it, some do not
        walk(rc, st, chunk, content, 0)
        return
    shared.append(chunk)
    view = view_of(shared, len(shared))
    ml, ctx, states, record = st.ml, rc.ctx, st.states, rc.record
    plan = rc.stream_plan
    args: StreamArgs[object] | None = None
    last_state: object = None
    for entry in plan:  # (no enumerate: the index is needed only off the pass-through path)
        b, fn, slot, _ = entry
        state = states[slot]
        if args is None or state is not last_state:
            args = StreamArgs(
                part=chunk, stream_parts=view, state=state, message_list=ml, context=ctx
            )
            last_state = state
        try:
            raw = fn(args)
        except Exception as e:
            raw = raised(b, e)
        if raw.__class__ is Continue and record is None:
            continue
        passed = stream_effect(rc, st, b, _checked(b, raw), chunk, content)
        if passed is chunk:
            continue
        i = next(k for k, e in enumerate(plan) if e is entry)  # (by identity, not ==)
        if i + 1 < len(plan):  # the later hooks see something else (or nothing)
            st.seen.unshare(i + 1, appended=True)
            if passed is None:
                return
            if isinstance(passed, tuple):
                walk_all(rc, st, passed, content, i + 1)
            else:
                walk(rc, st, passed, content, i + 1)
            return
        if passed is None:
            return
        if isinstance(passed, tuple):
            for c in passed:
                deliver(st, c, content)
            return
        chunk = passed
    if content is not None:  # `deliver`, inline
        if type(chunk) is TextDelta and (buf := content.texts.get(chunk.id)) is not None:
            buf.append(chunk.text)  # (`StepContent.add` for more of a text, inline)
        else:
            content.add(chunk)
    st.pending.append(chunk)


def walk(
    rc: RunConfig, st: RunState, chunk: Chunk, content: StepContent | None, start: int
) -> None:
    """`process_chunk` from hook `start` on, each hook with its own list."""
    ml, ctx, states, record, lists = st.ml, rc.ctx, st.states, rc.record, st.seen.lists
    plan = rc.stream_plan
    is_data = type(chunk) is DataChunk
    for i in range(start, len(plan)):
        b, fn, slot, data_parts = plan[i]
        if is_data and not data_parts:
            continue
        seen = lists[i]
        seen.append(chunk)
        try:
            raw = fn(StreamArgs(
                part=chunk, stream_parts=view_of(seen, len(seen)), state=states[slot],
                message_list=ml, context=ctx,
            ))
        except Exception as e:
            raw = raised(b, e)
        if raw.__class__ is Continue and record is None:
            continue
        passed = stream_effect(rc, st, b, _checked(b, raw), chunk, content)
        if passed is None:
            return
        if isinstance(passed, tuple):
            walk_all(rc, st, passed, content, i + 1)
            return
        chunk = passed
        is_data = type(chunk) is DataChunk
    deliver(st, chunk, content)


def process_chunk_io(
    rc: RunConfig, st: RunState, chunk: Chunk, content: StepContent | None, start: int = 0
) -> Generator[LoopCommand, object, None]:
    """Like `process_chunk`, for stream hooks that are async or ask for I/O."""
    h_stream = rc.h_stream
    for i in range(start, len(h_stream)):
        b = h_stream[i]
        if type(chunk) is DataChunk and not b.data_parts:
            continue
        o = yield from call_hook(b, stream_args(rc, st, i, b, chunk))
        passed = stream_effect(rc, st, b, o, chunk, content)
        if passed is None:
            return
        if isinstance(passed, tuple):
            for c in passed:
                yield from process_chunk_io(rc, st, c, content, i + 1)
            return
        chunk = passed
    deliver(st, chunk, content)


# --- the end of a model response: flush what processors hold ---------------------------


def flush_args(rc: RunConfig, st: RunState, b: Bound) -> FlushArgs[object]:
    i = next((k for k, s in enumerate(rc.h_stream) if s.processor is b.processor), None)
    if i is None:
        parts: list[Chunk] = []
    else:
        parts = st.seen.of(i)
    return FlushArgs(
        stream_parts=view_of(parts, len(parts)),
        state=st.states[b.slot],
        message_list=st.ml,
        context=rc.ctx,
    )


def flushed(
    rc: RunConfig, st: RunState, b: Bound, o: Outcome, content: StepContent
) -> tuple[Chunk, ...]:
    """Apply a flush hook's outcome: the chunks it releases (none for Continue)."""
    eff = apply(rc, st, b, o)
    for c in o.emit:
        content.add(c)
    if isinstance(eff, Abort):
        raise trip(b, eff)
    if isinstance(eff, Replace):
        released: tuple[Chunk, ...] = eff.value  # `check` made sure it is
        return released
    return ()


def flush(rc: RunConfig, st: RunState, content: StepContent) -> None:
    """The model's response ended: each flush hook, in processor order, releases what
    it holds, through the stream hooks after it (plain hooks)."""
    for b, start in rc.h_flush:
        raw = invoke(b, flush_args(rc, st, b))
        released = flushed(rc, st, b, _checked(b, raw), content)
        if not released:
            continue
        if st.seen.shared is not None and start < len(rc.stream_plan):
            st.seen.unshare(start, appended=False)
        walk_all(rc, st, released, content, start)


def flush_io(
    rc: RunConfig, st: RunState, content: StepContent
) -> Generator[LoopCommand, object, None]:
    """`flush` for hooks that are async or ask for I/O."""
    for b, start in rc.h_flush:
        released = flushed(rc, st, b, (yield from call_hook(b, flush_args(rc, st, b))), content)
        for c in released:
            yield from process_chunk_io(rc, st, c, content, start)


def stream_through(rc: RunConfig, st: RunState, chunks: list[Chunk]) -> Iterable[LoopCommand]:
    """Loop-made chunks (step start/finish, tool results, finish) through the processors.

    Use as `yield from`. Only stream hooks that may do I/O need a generator; otherwise
    the chunks go through at once (before the `yield from`) and nothing is yielded.
    """
    if rc.stream_io:
        return _stream_through_io(rc, st, chunks)
    if rc.h_stream:
        for c in chunks:
            process_chunk(rc, st, c, None)
    else:
        st.pending.extend(chunks)
    return ()


def _stream_through_io(
    rc: RunConfig, st: RunState, chunks: list[Chunk]
) -> Generator[LoopCommand, object, None]:
    for c in chunks:
        yield from process_chunk_io(rc, st, c, None)


def _checked(b: Bound, raw: object) -> Outcome:
    """What a plain stream or flush hook returned, checked (`hooks.check`); an awaitable
    or a generator is a processor error (a plain hook's result is not awaited)."""
    if isinstance(raw, GeneratorType) or inspect.isawaitable(raw):
        raise invalid(
            b,
            "returned an awaitable or generator from a plain function; "
            "declare the hook `async def` or as a generator function",
        )
    return check(b, raw)
