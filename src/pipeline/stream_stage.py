"""process_output_stream: every chunk of a run through the stream processors.

Model chunks and the loop's own (step start/finish, tool results, finish) alike. This is
the per-chunk hot path of a run: keep it free of extra attribute lookups and calls.

A stream hook may replace a chunk by several or by none (`Replace((a, b))`, `Replace(())`),
so a processor can hold text back and release it later: each released chunk goes through
the later processors in order, as an ordinary chunk. When the model's response ends, each
processor's `flush_output_stream` (where it has one) releases or drops what it still holds,
before the response's message is made. Whatever is still held when a run ends early
(abort, failure, cancel) is simply never delivered: only `_deliver` hands chunks out.
"""

from __future__ import annotations

import inspect
from collections.abc import Generator, Iterable
from types import GeneratorType

from effects import Abort, Continue, Replace, Skip
from pipeline.chunks import Chunk, DataChunk
from pipeline.hooks import Bound, HookFailure, HookFn, Outcome, call_hook, check, invoke
from pipeline.processor import FlushArgs, ProcessorAbort, StreamArgs
from pipeline.protocol import LoopCommand
from pipeline.response import StepContent
from pipeline.run_state import RunState
from pipeline.stream_view import view_of


class StreamStage(RunState):
    """The stream processors' part of a run (a mixin of `_Run`)."""

    h_stream: tuple[Bound, ...]
    h_flush: tuple[tuple[Bound, int], ...]
    """Each `flush_output_stream` hook, with the index in `h_stream` from which what it
    releases goes on (the stream hooks of the processors after it)."""
    stream_io: bool
    """Some stream hook is async or asks for I/O: chunks go through `_process_chunk_io`."""
    seen: list[list[Chunk]]
    shared: list[Chunk] | None
    stream_plan: tuple[tuple[Bound, HookFn, int, bool], ...]
    data_all: bool
    data_any: bool

    def _init_stream(self, flush: tuple[Bound, ...] = ()) -> None:
        """Set up the stream state for `h_stream` and the `flush` hooks (from `_Run.__init__`).

        `flush` is in processor order, as `h_stream` is.
        """
        at = {id(p): i for i, p in enumerate(self.agent.output_processors)}
        self.h_flush = tuple(
            (f, sum(1 for b in self.h_stream if at[id(b.processor)] <= at[id(f.processor)]))
            for f in flush
        )
        self.stream_io = any(
            inspect.iscoroutinefunction(b.fn) or inspect.isgeneratorfunction(b.fn)
            for b in (*self.h_stream, *flush)
        )
        # Every chunk each stream processor has seen (its stream_parts), append-only.
        self.seen = [[] for _ in self.h_stream]
        # While every stream hook has seen the very same chunks (none was skipped, replaced
        # or held back from a later one), they share one list, so one view per chunk and,
        # for equal states, one args value; the first divergence splits it (`_unshare`).
        self.shared = [] if self.h_stream and not self.stream_io else None
        # What the per-chunk hot path needs of each stream hook, unpacked once.
        self.stream_plan = tuple((b, b.fn, b.slot, b.data_parts) for b in self.h_stream)
        self.data_all = all(b.data_parts for b in self.h_stream)
        self.data_any = any(b.data_parts for b in self.h_stream)

    def _stream_args(self, i: int, b: Bound, chunk: Chunk) -> StreamArgs[object]:
        seen = self.seen[i]
        seen.append(chunk)
        return StreamArgs(
            part=chunk,
            stream_parts=view_of(seen, len(seen)),
            state=self.states[b.slot],
            message_list=self.ml,
            context=self.ctx,
        )

    def _stream_effect(
        self, b: Bound, o: Outcome, chunk: Chunk, content: StepContent | None
    ) -> Chunk | tuple[Chunk, ...] | None:
        """Apply one stream hook's outcome: the chunk to pass on, the chunks it became
        (`Replace` with a tuple), or None when skipped.

        Chunks a stream hook emits while a model response streams belong to that response:
        kept in its message unless transient (emits on the loop's own chunks are held).
        """
        eff = self._apply(b, o, keep=content is None)
        if content is not None:
            for c in o.emit:
                content.add(c)
        if isinstance(eff, Abort):
            raise self._trip(b, eff)
        if isinstance(eff, Skip):
            return None
        if isinstance(eff, Replace):
            became: Chunk | tuple[Chunk, ...] = eff.value  # `check` made sure it is
            return became
        return chunk

    def _walk_all(
        self, chunks: tuple[Chunk, ...], content: StepContent | None, start: int
    ) -> None:
        """Chunks one hook released, each through the hooks from `start` on, in order."""
        for c in chunks:
            self._walk(c, content, start)

    def _deliver(self, chunk: Chunk, content: StepContent | None) -> None:
        if content is not None:
            content.add(chunk)
        self.pending.append(chunk)

    def _process_chunk(self, chunk: Chunk, content: StepContent | None) -> None:
        """One chunk through every stream processor: the per-chunk hot path.

        Used when every stream hook is a plain function. While the hooks share what they
        have seen, a pass-through Continue costs one call: the view of the shared list and
        the args value (for hooks whose states are the same object) are made once.
        """
        shared = self.shared
        if shared is None:
            self._walk(chunk, content, 0)
            return
        if type(chunk) is DataChunk and not self.data_all:
            if not self.data_any:  # no stream hook sees data chunks: it passes as it is
                self._deliver(chunk, content)
                return
            self._unshare(0, appended=False)  # some hooks see it, some do not
            self._walk(chunk, content, 0)
            return
        shared.append(chunk)
        view = view_of(shared, len(shared))
        ml, ctx, states, record = self.ml, self.ctx, self.states, self.record
        plan = self.stream_plan
        args: StreamArgs[object] | None = None
        last_state: object = None
        for i, (b, fn, slot, _) in enumerate(plan):
            state = states[slot]
            if args is None or state is not last_state:
                args = StreamArgs(
                    part=chunk, stream_parts=view, state=state, message_list=ml, context=ctx
                )
                last_state = state
            try:
                raw = fn(args)
            except ProcessorAbort as t:
                raw = Abort(t.reason, t.retry, t.metadata)
            except Exception as e:
                raise HookFailure(b.processor_id, b.hook, type(e).__name__, str(e)) from e
            if raw.__class__ is Continue and record is None:
                continue
            _refuse_io(b, raw)
            passed = self._stream_effect(b, check(b, raw), chunk, content)
            if passed is chunk:
                continue
            if i + 1 < len(plan):  # the later hooks see something else (or nothing)
                self._unshare(i + 1, appended=True)
                if passed is None:
                    return
                if isinstance(passed, tuple):
                    self._walk_all(passed, content, i + 1)
                else:
                    self._walk(passed, content, i + 1)
                return
            if passed is None:
                return
            if isinstance(passed, tuple):
                for c in passed:
                    self._deliver(c, content)
                return
            chunk = passed
        self._deliver(chunk, content)

    def _unshare(self, upto: int, *, appended: bool) -> None:
        """Give each stream hook its own list of what it has seen, from the shared one.

        Hooks before `upto` have seen all of the shared list; when `appended`, the others
        have not seen its last chunk (skipped or replaced before it reached them). Views
        already handed out stay valid: nothing is ever removed from a list.
        """
        shared = self.shared
        assert shared is not None
        lists: list[list[Chunk]] = []
        for k in range(len(self.stream_plan)):
            full = k < upto or not appended
            if k == 0 and full:
                lists.append(shared)
            else:
                lists.append(shared[:] if full else shared[:-1])
        self.seen = lists
        self.shared = None

    def _walk(self, chunk: Chunk, content: StepContent | None, start: int) -> None:
        """`_process_chunk` from hook `start` on, each hook with its own list."""
        ml, ctx, states, record, lists = self.ml, self.ctx, self.states, self.record, self.seen
        plan = self.stream_plan
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
            except ProcessorAbort as t:
                raw = Abort(t.reason, t.retry, t.metadata)
            except Exception as e:
                raise HookFailure(b.processor_id, b.hook, type(e).__name__, str(e)) from e
            if raw.__class__ is Continue and record is None:
                continue
            _refuse_io(b, raw)
            passed = self._stream_effect(b, check(b, raw), chunk, content)
            if passed is None:
                return
            if isinstance(passed, tuple):
                self._walk_all(passed, content, i + 1)
                return
            chunk = passed
            is_data = type(chunk) is DataChunk
        self._deliver(chunk, content)

    def _process_chunk_io(
        self, chunk: Chunk, content: StepContent | None, start: int = 0
    ) -> Generator[LoopCommand, object, None]:
        """Like `_process_chunk`, for stream hooks that are async or ask for I/O."""
        h_stream = self.h_stream
        for i in range(start, len(h_stream)):
            b = h_stream[i]
            if type(chunk) is DataChunk and not b.data_parts:
                continue
            o = yield from call_hook(b, self._stream_args(i, b, chunk))
            passed = self._stream_effect(b, o, chunk, content)
            if passed is None:
                return
            if isinstance(passed, tuple):
                for c in passed:
                    yield from self._process_chunk_io(c, content, i + 1)
                return
            chunk = passed
        self._deliver(chunk, content)

    # --- the end of a model response: flush what processors hold ---------------------

    def _flush_args(self, b: Bound) -> FlushArgs[object]:
        i = next((k for k, s in enumerate(self.h_stream) if s.processor is b.processor), None)
        if i is None:
            parts: list[Chunk] = []
        elif self.shared is not None:
            parts = self.shared
        else:
            parts = self.seen[i]
        return FlushArgs(
            stream_parts=view_of(parts, len(parts)),
            state=self.states[b.slot],
            message_list=self.ml,
            context=self.ctx,
        )

    def _flushed(self, b: Bound, o: Outcome, content: StepContent) -> tuple[Chunk, ...]:
        """Apply a flush hook's outcome: the chunks it releases (none for Continue)."""
        eff = self._apply(b, o)
        for c in o.emit:
            content.add(c)
        if isinstance(eff, Abort):
            raise self._trip(b, eff)
        if isinstance(eff, Replace):
            released: tuple[Chunk, ...] = eff.value  # `check` made sure it is
            return released
        return ()

    def _flush(self, content: StepContent) -> None:
        """The model's response ended: each flush hook, in processor order, releases what
        it holds, through the stream hooks after it (plain hooks)."""
        for b, start in self.h_flush:
            raw = invoke(b, self._flush_args(b))
            _refuse_io(b, raw)
            released = self._flushed(b, check(b, raw), content)
            if not released:
                continue
            if self.shared is not None and start < len(self.stream_plan):
                self._unshare(start, appended=False)
            self._walk_all(released, content, start)

    def _flush_io(self, content: StepContent) -> Generator[LoopCommand, object, None]:
        """`_flush` for hooks that are async or ask for I/O."""
        for b, start in self.h_flush:
            released = self._flushed(b, (yield from call_hook(b, self._flush_args(b))), content)
            for c in released:
                yield from self._process_chunk_io(c, content, start)

    def _stream_through(self, chunks: list[Chunk]) -> Iterable[LoopCommand]:
        """Loop-made chunks (step start/finish, tool results, finish) through the processors.

        Use as `yield from`. Only stream hooks that may do I/O need a generator; otherwise
        the chunks go through at once (before the `yield from`) and nothing is yielded.
        """
        if self.stream_io:
            return self._stream_through_io(chunks)
        if self.h_stream:
            for c in chunks:
                self._process_chunk(c, None)
        else:
            self.pending.extend(chunks)
        return ()

    def _stream_through_io(self, chunks: list[Chunk]) -> Generator[LoopCommand, object, None]:
        for c in chunks:
            yield from self._process_chunk_io(c, None)


def _refuse_io(b: Bound, raw: object) -> None:
    """A plain stream hook that returned an awaitable or a generator is a processor error."""
    if isinstance(raw, GeneratorType) or inspect.isawaitable(raw):
        raise HookFailure(
            b.processor_id, b.hook, "InvalidEffect",
            "returned an awaitable or generator from a plain function; "
            "declare the hook `async def` or as a generator function",
        )
