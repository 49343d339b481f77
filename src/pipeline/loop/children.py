"""Child runs in the tool step: agents called as tools, handoffs (`docs/agents.md`).

A call of an `AgentTool` that the gates let run becomes a `ToolInvocation` carrying a
`ChildRun` (`with_children`); the interpreter drives the child's own loop through `relay`
and answers the call with the child's `RunResult`. `fold_children` then makes of each
child's outcome what the parent keeps:

- the call's result: its output (or text), or an error result for a child that did not
  finish, which goes through the parent's `process_tool_result` hooks and stream
  processors like any tool result;
- a `data-agent` chunk and the data chunks the child delivered, through the parent's
  stream processors (so a guard on the parent covers every descendant);
- its memory writes, held until the root is approved (`TreeState.writes`; the root's
  `process_approved` commits them with its own, all or none);
- its record, usage and cost (`RunResult.children`, and the parent's totals);
- a suspension: the parent suspends too, its pending list naming the nested calls, the
  siblings that finished kept with their results (`GatedCall.kept`), never run again.

Nothing here runs for an agent without an agent tool (`RunConfig.children`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

from effects import CommitWrites, Done, Perform, Publish, Pull
from pipeline.agent import AgentTool
from pipeline.agents import (
    ChildRun,
    agent_chunk,
    child_context,
    child_input,
    child_resumption,
    nested_pending,
    node_of,
    tool_value,
)
from pipeline.approval import Resumption
from pipeline.loop.cost import last_time
from pipeline.loop.gate import Entry, Suspend
from pipeline.loop.messages import loop_message
from pipeline.loop.response import StepContent
from pipeline.loop.state import RunConfig, RunState, TreeState
from pipeline.loop.stream import flush, flush_io, process_chunk, process_chunk_io
from pipeline.protocol.replies import AgentLoop, LoopCommand, ToolInvocation, ToolOutcome
from pipeline.values.chunks import (
    Chunk,
    DataChunk,
    TextDelta,
    TextEnd,
    TextStart,
    ToolApprovalRequest,
)
from pipeline.values.messages import ToolCallPart, ToolResultPart
from pipeline.values.result import GatedCall, KeptChild, PendingApproval, RunResult

_EMPTY_PULL: Pull[Chunk, object] = Pull(())


def relay(child: ChildRun, inner: AgentLoop) -> AgentLoop:
    """The child's loop as the interpreter drives it: its commands as they are, but what
    it publishes is kept in its box (the parent streams it, through its own processors)
    and the writes it asks to commit are kept there too (the root commits them), each
    answered here. A cancel or failure thrown in goes on to the child's loop."""
    box = child.box
    kept = box.chunks
    send = inner.send
    cmd: LoopCommand = next(inner)
    while True:
        t = type(cmd)
        if t is Pull:
            if cmd.publish:  # type: ignore[union-attr]
                kept.extend(cmd.publish)  # type: ignore[union-attr]
                out: LoopCommand = _EMPTY_PULL  # type: ignore[assignment]
            else:
                out = cmd
        elif t is Publish:
            kept.extend(cmd.chunks)  # type: ignore[union-attr]
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
            yield cmd
            return result
        else:
            out = cmd
        try:
            reply = yield out
        except GeneratorExit:
            inner.close()
            raise
        except BaseException as e:  # a cancel, a failure of the command: the child's
            cmd = inner.throw(e)
            continue
        cmd = send(reply)


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
            e = ToolInvocation(e.call, t, None, child=_child_run(rc, st, t, e.call, resumes))
        if type(e) is ToolInvocation:
            invocations.append(e)
        out.append(e)
    return invocations, out


def _child_run(
    rc: RunConfig, st: RunState, t: AgentTool, call: ToolCallPart,
    resumes: dict[str, Resumption] | None,
) -> ChildRun:
    ctx = child_context(t, rc.ctx, call.tool_call_id)
    resume = resumes.get(call.tool_call_id) if resumes else None
    # (a handoff's filter reads the history with the response that handed over last)
    messages = child_input(t, call.args, st.ml, ctx.run_id, last_time(st))
    path = (call.tool_call_id,)
    return ChildRun(tool=t, messages=messages, context=ctx, path=path,
                    parent_run_id=rc.ctx.run_id, resume=resume)


def fold_children(
    rc: RunConfig,
    st: RunState,
    calls: tuple[ToolCallPart, ...],
    entries: Sequence[Entry],
    outs: tuple[object, ...],
) -> tuple[tuple[object, ...], list[tuple[DataChunk, ...]]]:
    """The outcomes with each child's made the call's result, and the chunks each child
    leaves the parent's stream (see the module doc). Raises `Suspend` (after the caller
    streamed nothing yet) when a child waits for approvals: `suspended` is then set."""
    tree = st.tree
    if tree is None:
        tree = st.tree = TreeState()
    new: list[object] = []
    chunks: list[tuple[DataChunk, ...]] = []
    waiting: dict[int, RunResult] = {}
    kept: dict[int, KeptChild] = {}
    for i, (e, o) in enumerate(zip(entries, outs, strict=True)):
        child = e.child if type(e) is ToolInvocation else None
        if child is None:
            new.append(o)
            if type(e) is ToolResultPart and tree.kept_chunks:
                chunks.append(tree.kept_chunks.pop(e.tool_call_id, ()))
            continue
        result = child.box.result
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
        calls_made = _model_calls(result)
        tree.add(node, calls_made)
        value, is_error = tool_value(result)
        out: tuple[DataChunk, ...] = (
            agent_chunk(child, result, child.box.chunks),
            *(c for c in child.box.chunks if isinstance(c, DataChunk)),
        )
        if result.status == "finished":
            tree.writes.extend(child.box.writes)
            if child.kind == "handoff" and tree.answer is None:
                tree.answer = result
                tree.answered_by = result.answered_by or child.tool.agent.name
        chunks.append(out)
        kept[i] = KeptChild(node=node, chunks=out, writes=(
            tuple(child.box.writes) if result.status == "finished" else ()))
        new.append(ToolOutcome(child.path[-1], value, is_error))
    if waiting:
        raise _nested_suspend(calls, entries, tuple(new), waiting, kept)
    return tuple(new), chunks


def _model_calls(r: RunResult) -> int:
    """The model calls a child run paid for, its descendants' too (for budgets)."""
    return len(r.steps) + r.retry_count + len(r.judges)


def _nested_suspend(
    calls: tuple[ToolCallPart, ...],
    entries: Sequence[Entry],
    outs: tuple[object, ...],
    waiting: dict[int, RunResult],
    kept: dict[int, KeptChild],
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
            gated.append(GatedCall(call=c, kind="answered", result=o.result,
                                   is_error=o.is_error, kept=kept.get(i)))
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
            tree.add(node, 0)
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
    "answer_of_handoff", "approval_requests", "fold_children", "relay", "resumed_children",
    "with_children",
]
