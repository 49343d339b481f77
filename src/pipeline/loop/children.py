"""Child runs in the tool step: agents called as tools, handoffs (`docs/agents.md`).

A call of an `AgentTool` that the gates let run becomes a `ToolInvocation` carrying a
`ChildRun` (`with_children`); the interpreter drives the child's own loop through `relay`
and answers the call with the child's `RunResult`. `fold_children` then makes of each
child's outcome what the parent keeps:

- the call's result: its output (or text), or an error result for a child that did not
  finish, which goes through the parent's `process_tool_result` hooks and stream
  processors like any tool result;
- what the child says, through the stream processors of every run above it (so a guard
  on the parent covers every descendant): as it comes (`carry`, from the relay: its text
  as `data-agent` deltas, its data chunks) when those processors are plain functions,
  else when its call ends (its data chunks); then a `data-agent` chunk with how it
  ended, through the parent's stream processors;
- its memory writes, held until the root is approved (`TreeState.writes`; the root's
  `process_approved` commits them with its own, all or none);
- its record, usage and cost (`RunResult.children`, and the parent's totals);
- a suspension: the parent suspends too, its pending list naming the nested calls, the
  siblings that finished kept with their results (`GatedCall.kept`), never run again.

A run's children reach it through its `Level` (`ChildBox.up`): its stream processors
pass their chunks on (one child's text block at a time across the tree: `StreamLock`),
its budget bounds them while they run (`tree_bounds`, `live_spent`).

Nothing here runs for an agent without an agent tool (`RunConfig.children`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import cast

import msgspec

from effects import CallModel, CommitWrites, Done, Perform, Publish, Pull, RunTools
from pipeline.agent import AgentTool
from pipeline.agents import (
    ChildBox,
    ChildRun,
    agent_chunk,
    agent_delta,
    agent_discarded,
    child_context,
    child_input,
    child_resumption,
    delivered_text,
    nested_pending,
    node_of,
    tool_value,
)
from pipeline.approval import Resumption
from pipeline.loop.cost import last_time, spending
from pipeline.loop.gate import Entry, Suspend
from pipeline.loop.hooks import Bound, HookFailure, HookFn
from pipeline.loop.response import StepContent
from pipeline.loop.state import (
    Level,
    RunConfig,
    RunState,
    StreamLock,
    TreeState,
    Tripped,
    loop_message,
)
from pipeline.loop.stream import flush, flush_io, process_chunk, process_chunk_io
from pipeline.processor import BaseProcessor, InputStepArgs
from pipeline.protocol.driver import Watch
from pipeline.protocol.replies import (
    AgentLoop,
    LoopCommand,
    RunCancelled,
    ToolInvocation,
    ToolOutcome,
)
from pipeline.values.chunks import (
    Chunk,
    DataChunk,
    TextDelta,
    TextEnd,
    TextStart,
    ToolApprovalRequest,
)
from pipeline.values.messages import TextPart, ToolCallPart, ToolResultPart
from pipeline.values.result import (
    AgentNode,
    GatedCall,
    KeptChild,
    PendingApproval,
    RunResult,
    Spending,
)

_EMPTY_PULL: Pull[Chunk, object] = Pull(())

STOPPED = "a run above it was stopped by a stream processor"
"""Why a child run is cancelled when a stream processor above it stopped its parent."""

DISCARDED = "data-step-discarded"


def relay(child: ChildRun, inner: AgentLoop) -> AgentLoop:
    """The child's loop as the interpreter drives it: its commands as they are, but what
    it publishes is kept in its box and its writes too (the root commits them), each
    answered here; with a live parent (`Level.live`) its text and data chunks go on as
    they come, through the stream processors of every run above it (`carry`), in the
    Pull or Publish that hands them to the caller. A cancel or failure thrown in goes on
    to the child's loop."""
    box = child.box
    parent = cast("Level | None", box.up)
    live = parent is not None and parent.live
    up = cast(Level, parent)  # (read only when `live`: there is a parent)
    kept = box.chunks
    watched = box.watched
    send = inner.send
    cmd: LoopCommand = next(inner)
    while True:
        t = type(cmd)
        if t is Pull:
            pub: tuple[Chunk, ...] = cmd.publish  # type: ignore[union-attr]
            if not pub:
                out = cmd
            elif live:
                carried = carry(up, child, pub)
                if up.lock.failures and up.stopped():
                    live = False
                    cmd = inner.throw(RunCancelled(STOPPED))
                    continue
                out = Pull(carried) if carried else _EMPTY_PULL  # type: ignore[assignment]
            else:
                kept.extend(pub)
                out = _EMPTY_PULL  # type: ignore[assignment]
        elif t is Publish:
            chunks: tuple[Chunk, ...] = cmd.chunks  # type: ignore[union-attr]
            if live:
                carried = carry(up, child, chunks)
                if up.lock.failures and up.stopped():
                    live = False
                    cmd = inner.throw(RunCancelled(STOPPED))
                    continue
                if carried:
                    out = Publish(carried)
                    if watched:
                        box.origin = (out, None)
                    try:
                        yield out
                    except GeneratorExit:
                        _let_go(up, box)
                        inner.close()
                        raise
                    except BaseException as e:
                        cmd = inner.throw(e)
                        continue
            else:
                kept.extend(chunks)
            cmd = send(None)
            continue
        elif t is Perform and type(cmd.request) is CommitWrites:  # type: ignore[union-attr]
            who = cmd.processor_id  # type: ignore[union-attr]
            box.writes.extend((who, w) for w in cmd.request.writes)  # type: ignore[union-attr]
            cmd = send(None)
            continue
        elif t is Done:
            result: RunResult = cmd.result  # type: ignore[union-attr]
            box.result = result
            if parent is not None:
                tail = finish(parent, child)
                if tail:
                    made = Publish(tail)
                    if watched:
                        box.origin = (made, None)
                    try:
                        yield made
                    except GeneratorExit:
                        raise
                    except BaseException:  # a cancel now: the run is over, its result stands
                        tail = ()
            yield cmd
            return result
        else:
            if (live and up.lock.failures and (t is CallModel or t is RunTools)
                    and up.stopped()):  # a run above it stopped: no more calls
                live = False
                cmd = inner.throw(RunCancelled(STOPPED))
                continue
            out = cmd
        if watched and out is not cmd:
            box.origin = (out, cmd)
        try:
            reply = yield out
        except GeneratorExit:
            if parent is not None:
                _let_go(parent, box)
            inner.close()
            raise
        except BaseException as e:  # a cancel, a failure of the command: the child's
            cmd = inner.throw(e)
            continue
        cmd = send(reply)


def watched_relay(
    child: ChildRun, inner: AgentLoop, watch: Watch | None
) -> tuple[AgentLoop, Watch | None]:
    """`relay(child, inner)`, and `watch` told of the child's own commands (a Pull with
    the chunks the child published, not those the relay carries up in its place; not a
    Publish the relay makes of carried chunks): its observers see its run, and a
    journal records it, as the child ran it, whatever the runs above did with its
    chunks."""
    if watch is None:
        return relay(child, inner), None
    child.box.watched = True
    return relay(child, inner), _OwnCommands(child.box, watch)


class _OwnCommands:
    """A child run's `Watch`, told of the commands as the child's loop gave them."""

    __slots__ = ("box", "watch")

    def __init__(self, box: ChildBox, watch: Watch) -> None:
        self.box = box
        self.watch = watch

    def _own(self, c: LoopCommand) -> LoopCommand | None:
        origin = self.box.origin
        if origin is not None and origin[0] is c:
            return cast("LoopCommand | None", origin[1])
        return c

    def command(self, cmd: LoopCommand) -> None:
        own = self._own(cmd)
        if own is not None:
            self.watch.command(own)

    def reply(self, cmd: LoopCommand, reply: object) -> None:
        own = self._own(cmd)
        if own is not None:
            self.watch.reply(own, reply)

    def failed(self, cmd: LoopCommand, error: BaseException) -> None:
        own = self._own(cmd)
        if own is not None:
            self.watch.failed(own, error)

    def end(self, result: RunResult | None) -> None:
        self.watch.end(result)


# --- a child's chunks on their way to the caller ------------------------------------------


def carry(level: Level, child: ChildRun, chunks: Sequence[Chunk]) -> tuple[Chunk, ...]:
    """What the caller gets now of `chunks`, which `child` (a child of `level`'s run)
    published: its text and data chunks through the stream processors of `level`'s run
    and of every run above it, as the root hands them out (`_at_root`). While another
    child's text block is open in the tree (`StreamLock`), they wait; what waited goes
    on once the lock is free, in the order it came. A stream processor that stops a run
    (an abort, a crash) marks it (`Level.failed`): nothing more goes through it."""
    box = child.box
    out: list[Chunk] = []
    if level.bare:  # no stream processor above: only their form for the caller
        _bare(child, box, chunks, out)
        return tuple(out)
    lock = level.lock
    if lock.owner is None and lock.waiting:
        _drain(lock, out)
    text = box.text
    for c in chunks:
        t = type(c)
        # (its own text is kept as it comes: it may wait for the lock past its end)
        if t is TextDelta:
            text.append(c.text)  # type: ignore[union-attr]
        elif t is DataChunk:
            if c.name == DISCARDED:  # type: ignore[union-attr]
                text.clear()
        elif t is not TextStart and t is not TextEnd:
            continue
        owner = lock.owner
        if owner is not None and owner is not box:
            lock.waiting.append((child, level, c))
            continue
        _pass(level, child, c, out)
        if lock.owner is None and lock.waiting:
            _drain(lock, out)
    return tuple(out)


def _bare(child: ChildRun, box: ChildBox, chunks: Sequence[Chunk], out: list[Chunk]) -> None:
    """`carry` with no stream processor in the runs above (`Level.bare`)."""
    for_root = box.for_root
    for c in chunks:
        t = type(c)
        if t is TextDelta:
            text: str = c.text  # type: ignore[union-attr]
            box.text.append(text)
            if child.tool.kind == "handoff":
                box.answer.append(text)
            out.append(c if for_root else agent_delta(child, text))
        elif t is DataChunk:
            if c.name == DISCARDED:  # type: ignore[union-attr]
                box.text.clear()
                out.append(c if for_root else agent_discarded(child))
            else:
                out.append(c)
        elif for_root and (t is TextStart or t is TextEnd):
            out.append(c)


def finish(level: Level, child: ChildRun) -> tuple[Chunk, ...]:
    """A child run ended: a text block it left open is closed (what the processors
    above hold of it is released or dropped, as at a block's end), and what waited for
    it goes on."""
    box = child.box
    lock = level.lock
    out: list[Chunk] = []
    if lock.owner is box:
        if box.open_text is not None:
            _pass(level, child, TextEnd(box.open_text), out)
        lock.owner = None
        box.open_text = None
    if lock.owner is None and lock.waiting:
        _drain(lock, out)
    return tuple(out)


def _let_go(level: Level, box: ChildBox) -> None:
    """A child closed before it ended (its interpreter stopped): the lock is freed; what
    it held in the processors above stays there, never released by it."""
    if level.lock.owner is box:
        level.lock.owner = None
        box.open_text = None


def _drain(lock: StreamLock, out: list[Chunk]) -> None:
    """What waited, in order, as long as its child may go (the lock free, or its own)."""
    waiting = lock.waiting
    while waiting:
        child, level, c = waiting[0]
        if lock.owner is not None and lock.owner is not child.box:
            return
        del waiting[0]
        _pass(level, child, c, out)


def _pass(level: Level, child: ChildRun, c: Chunk, out: list[Chunk]) -> None:
    """One chunk of `child` through the stream processors of `level`'s run and the runs
    above it; the lock taken at a text block's start, freed at its end."""
    box = child.box
    t = type(c)
    if t is TextStart:
        assert isinstance(c, TextStart)
        level.lock.owner = box
        box.open_text = c.id
    chunks: list[Chunk] = [c]
    lv: Level | None = level
    while lv is not None and chunks:
        if lv.failed is not None:
            chunks = []
            break
        if lv.rc.h_stream:
            chunks = _through(lv, chunks, t is TextEnd)
        if lv is level and child.tool.kind == "handoff":  # its answer, as its parent passed it
            box.answer.extend(x.text for x in chunks if isinstance(x, TextDelta))
        lv = lv.up
    if t is TextEnd:
        level.lock.owner = None
        box.open_text = None
    if chunks and lv is None:
        _at_root(child, chunks, out)


def _through(lv: Level, chunks: list[Chunk], block_end: bool) -> list[Chunk]:
    """`chunks` through `lv`'s stream processors (plain ones: `Level.live`), as loop-made
    chunks are (an emit kept for the run's next message); at a block's end its flush
    hooks release what they hold. A processor that stops the run marks it failed."""
    rc, st = lv.rc, lv.st
    mine, st.pending = st.pending, []  # (the run waits at its tool step: nothing of its own)
    try:
        for c in chunks:
            process_chunk(rc, st, c, None)
        if block_end and rc.h_flush:
            flush(rc, st, StepContent())
        return st.pending
    except (Tripped, HookFailure) as e:
        lv.failed = e
        lv.lock.failures += 1
        return []
    finally:
        st.pending = mine


def _at_root(child: ChildRun, chunks: list[Chunk], out: list[Chunk]) -> None:
    """A child's chunks as the caller gets them: a chain of handoffs from the root
    answers for it (its text is the root's); any other child's text goes as
    `data-agent` deltas, its data chunks as they are (a discarded step as a
    `data-agent` status)."""
    if child.box.for_root:
        out.extend(chunks)
        return
    for c in chunks:
        t = type(c)
        if t is TextDelta:
            out.append(agent_delta(child, c.text))  # type: ignore[union-attr]
        elif t is DataChunk:
            assert isinstance(c, DataChunk)
            out.append(agent_discarded(child) if c.name == DISCARDED else c)


# --- budgets over the tree -----------------------------------------------------------------


class _Running:
    """A child run while it runs (`ChildBox.running`)."""

    __slots__ = ("rc", "st")

    def __init__(self, rc: RunConfig, st: RunState) -> None:
        self.rc = rc
        self.st = st

    def spent(self) -> Spending:
        return live_spent(self.rc, self.st)


def running(rc: RunConfig, st: RunState) -> _Running:
    """A child run's spending as its ancestors' budgets read it while it runs."""
    return _Running(rc, st)


def live_spent(rc: RunConfig, st: RunState) -> Spending:
    """What a run and every run under it have paid for so far: its own spending (its
    children that returned included) and that of its children still running."""
    total = spending(rc, st)
    tree = st.tree
    if tree is not None:
        for box in tree.running:
            r = box.result
            if box.running is not None:
                total = total + box.running.spent()
            elif r is not None:
                total = total + _spent_of(r)
    return total


def _spent_of(r: RunResult) -> Spending:
    """What a child run paid for, from its result (a child run this loop did not start)."""
    return Spending(len(r.steps) + r.retry_count + len(r.judges), r.total_usage, r.cost)


def tree_bounds(up: Level, slot: int) -> tuple[Bound, ...]:
    """The input-step hooks a child run gets from the runs above it: each processor of
    theirs that bounds its descendants (`BaseProcessor.bounds_descendants`), asked with
    what the whole tree under its run has paid for and its run's state (`slot`: the
    child's slot for them, whose state is not read)."""
    out: list[Bound] = []
    level: Level | None = up
    while level is not None:
        for b in level.bounds:
            proxy = BaseProcessor()  # (not one that bounds: the child's children ask `b`)
            proxy.id = b.processor_id
            out.append(Bound(proxy, b.processor_id, "process_input_step",
                             _bounded(level, b), slot, False, b.judges))
        level = level.up
    return tuple(out)


def _bounded(level: Level, b: Bound) -> HookFn:
    def ask(args: InputStepArgs[object]) -> object:
        spent = live_spent(level.rc, level.st)
        return b.fn(msgspec.structs.replace(args, state=level.st.states[b.slot], spent=spent))
    return ask


# --- the parent's tool step ----------------------------------------------------------------


def with_children(
    rc: RunConfig,
    st: RunState,
    entries: Sequence[Entry],
    resumes: dict[str, Resumption] | None = None,
) -> tuple[list[ToolInvocation], list[Entry]]:
    """The step's invocations and entries with each call of an agent tool made a child
    run (after the gates: they saw it as any call). Of several handoffs in one response
    the first runs; the others are answered with an error without running."""
    invocations: list[ToolInvocation] = []
    out: list[Entry] = []
    handoff = False
    level: Level | None = None
    for e in entries:
        if type(e) is ToolInvocation and isinstance(e.tool, AgentTool) and e.kwargs is not None:
            t = e.tool
            if t.kind == "handoff":
                if handoff:
                    out.append(ToolResultPart(
                        e.call.tool_call_id, e.call.tool_name,
                        "not run: the conversation was handed over by an earlier call", True,
                    ))
                    continue
                handoff = True
            if level is None:
                level = _level(rc, st)
            child = _child_run(rc, st, level, t, e.call, resumes)
            e = ToolInvocation(e.call, t, None, child=child)
        if type(e) is ToolInvocation:
            invocations.append(e)
        out.append(e)
    return invocations, out


def _level(rc: RunConfig, st: RunState) -> Level:
    """The run as its children reach it (made once per run), its step's children not
    running yet."""
    tree = st.tree
    if tree is None:
        tree = st.tree = TreeState()
    if tree.level is None:
        tree.level = Level(rc, st)
    tree.running = []
    return tree.level


def _child_run(
    rc: RunConfig, st: RunState, level: Level, t: AgentTool, call: ToolCallPart,
    resumes: dict[str, Resumption] | None,
) -> ChildRun:
    ctx = child_context(t, rc.ctx, call.tool_call_id)
    resume = resumes.get(call.tool_call_id) if resumes else None
    # (a handoff's filter reads the history with the response that handed over last)
    messages = child_input(t, call.args, st.ml, ctx.run_id, last_time(st))
    child = ChildRun(tool=t, messages=messages, context=ctx,
                     path=(*level.path, call.tool_call_id), parent_run_id=rc.ctx.run_id,
                     resume=resume, kinds=(*level.kinds, t.kind))
    box = child.box
    box.up = level
    box.for_root = t.kind == "handoff" and all(k == "handoff" for k in level.kinds)
    assert st.tree is not None
    st.tree.running.append(box)
    return child


def fold_children(
    rc: RunConfig,
    st: RunState,
    calls: tuple[ToolCallPart, ...],
    entries: Sequence[Entry],
    outs: tuple[object, ...],
) -> tuple[tuple[object, ...], list[tuple[DataChunk, ...]]]:
    """The outcomes with each child's made the call's result, and the chunks each child
    leaves the parent's stream (see the module doc). Raises `Suspend` (after the caller
    streamed nothing yet) when a child waits for approvals; what a stream processor of
    this run raised on a child's chunk (`Level.failed`) once every child is back."""
    tree = st.tree
    if tree is None:
        tree = st.tree = TreeState()
    level = tree.level
    if level is not None and level.up is None and level.lock.waiting:
        # Every run of the tree is back: what still waits (a child whose interpreter
        # closed it held the lock) goes nowhere. (Under a child, what its children left
        # waiting goes on when the lock is free: another subtree's text holds it.)
        level.lock.waiting = []
    new: list[object] = []
    chunks: list[tuple[DataChunk, ...]] = []
    waiting: dict[int, RunResult] = {}
    kept: dict[int, tuple[AgentNode, tuple[DataChunk, ...], ChildBox]] = {}
    for i, (e, o) in enumerate(zip(entries, outs, strict=True)):
        child = e.child if type(e) is ToolInvocation else None
        if child is None:
            new.append(o)
            if type(e) is ToolResultPart and tree.kept_chunks:
                chunks.append(tree.kept_chunks.pop(e.tool_call_id, ()))
            continue
        box = child.box
        result = box.result
        if type(o) is not ToolOutcome or o.result is not result or result is None:
            # An interpreter that did not run the child (or answered another value):
            # the call fails closed, nothing of the child is kept.
            why = o.result if type(o) is ToolOutcome and o.is_error else "no child run"
            new.append(ToolOutcome(child.path[-1], f"agent not run: {why}", True))
            continue
        node = node_of(child, result)
        if result.status == "suspended" and result.suspension is not None:
            waiting[i] = result
            new.append(o)
            continue
        tree.add(node, box.running.spent() if box.running is not None else _spent_of(result))
        value, is_error = tool_value(result)
        live = box.up is not None and box.up.live
        out: tuple[DataChunk, ...] = (agent_chunk(child, result, "".join(box.text)),) if live \
            else (agent_chunk(child, result, delivered_text(box.chunks)),
                  *(c for c in box.chunks if isinstance(c, DataChunk)))
        if result.status == "finished":
            tree.writes.extend(box.writes)
            if child.tool.kind == "handoff" and tree.answer is None:
                tree.answer = result
                tree.answered_by = result.answered_by or child.tool.agent.name
                tree.answer_text = box.answer if live else None
        chunks.append(out)
        kept[i] = (node, out, box)  # (a `KeptChild` only if a sibling waits)
        new.append(ToolOutcome(child.path[-1], value, is_error))
    tree.running = []
    if level is not None and level.failed is not None:  # (their usage counted above)
        raise level.failed
    if waiting:
        raise _nested_suspend(calls, entries, tuple(new), waiting, kept)
    return tuple(new), chunks


def _nested_suspend(
    calls: tuple[ToolCallPart, ...],
    entries: Sequence[Entry],
    outs: tuple[object, ...],
    waiting: dict[int, RunResult],
    kept: dict[int, tuple[AgentNode, tuple[DataChunk, ...], ChildBox]],
) -> Suspend:
    """The parent's suspension when children wait: their calls listed with their paths,
    every other call of the step kept as answered (it ran, or was answered: it does not
    run again)."""
    pending: list[PendingApproval] = []
    gated: list[GatedCall] = []
    for i, (c, e, o) in enumerate(zip(calls, entries, outs, strict=True)):
        if i in waiting:
            s = waiting[i].suspension
            assert s is not None
            pending.extend(nested_pending(c.tool_call_id, s))
            gated.append(GatedCall(call=c, kind="child", child=s))
        elif type(e) is ToolResultPart:
            gated.append(GatedCall(call=c, kind="answered", result=e.result,
                                   is_error=e.is_error))
        else:
            assert type(o) is ToolOutcome
            finished = kept.get(i)
            keep = None
            if finished is not None:
                node, chunks, box = finished
                keep = KeptChild(node=node, chunks=chunks, writes=(
                    tuple(box.writes) if node.status == "finished" else ()))
            gated.append(GatedCall(call=c, kind="answered", result=o.result,
                                   is_error=o.is_error, kept=keep))
    return Suspend(tuple(pending), tuple(gated))


def approval_requests(pending: tuple[PendingApproval, ...]) -> list[Chunk]:
    """What the parent streams of the nested calls that wait."""
    return [
        ToolApprovalRequest(p.tool_call_id, p.tool_name, p.args, p.message, p.digest)
        for p in pending
    ]


def resumed_children(
    st: RunState, calls: tuple[GatedCall, ...], r: Resumption
) -> dict[str, Resumption]:
    """A resumed step's children: each child that waited, with its own resumption (by
    call id); the children that had finished left in the tree as they were kept (their
    writes, records and chunks: they do not run again)."""
    resumes: dict[str, Resumption] = {}
    for g in calls:
        if g.kind == "child" and g.child is not None:
            resumes[g.call.tool_call_id] = child_resumption(
                g.call.tool_call_id, g.child, r.decisions
            )
        elif g.kept is not None:
            tree = st.tree
            if tree is None:
                tree = st.tree = TreeState()
            node = g.kept.node
            tree.add(node, Spending())  # (paid for before: in the suspension's `spent`)
            tree.writes.extend(g.kept.writes)
            tree.kept_chunks[g.call.tool_call_id] = g.kept.chunks
    return resumes


def answer_of_handoff(rc: RunConfig, st: RunState) -> Generator[LoopCommand, object, None]:
    """The handoff's answer as the run's: a text response through the parent's stream
    processors (held text flushed at its end), kept as an assistant message; the run's
    output is the answer's."""
    tree = st.tree
    assert tree is not None and tree.answer is not None
    answer, tree.answer = tree.answer, None
    st.output = answer.output
    if tree.answer_text is not None:  # it reached the caller as it came: only kept here
        text, tree.answer_text = "".join(tree.answer_text), None
        if text:
            message = loop_message(rc, st, "assistant", (TextPart(text),))
            st.ml = st.ml._add_one(message, "response")
        return
    if not answer.text:
        return
    tid = st.ids.next("text")
    content = StepContent()
    chunks: list[Chunk] = [TextStart(tid), TextDelta(tid, answer.text), TextEnd(tid)]
    if rc.stream_io:
        for c in chunks:
            yield from process_chunk_io(rc, st, c, content)
        yield from flush_io(rc, st, content)
    elif rc.h_stream:
        for c in chunks:
            process_chunk(rc, st, c, content)
        flush(rc, st, content)
    else:
        for c in chunks:
            content.add(c)
        st.pending.extend(chunks)
    parts = content.message_parts(complete=True)
    if parts:
        st.ml = st.ml._add_one(loop_message(rc, st, "assistant", parts), "response")


__all__ = [
    "STOPPED", "answer_of_handoff", "approval_requests", "carry", "finish", "fold_children",
    "live_spent", "relay", "resumed_children", "running", "tree_bounds", "watched_relay",
    "with_children",
]
