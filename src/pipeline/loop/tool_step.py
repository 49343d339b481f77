"""The tools of a step: the calls run, their results kept, checked and streamed.

`run_tools` binds each call of the response to its tool (an unknown tool, bad arguments
or deps of the wrong type are error results the model sees), hands the interpreter the
invocations (`RunTools`), keeps each result in one tool message (capped and made
encodable: `result_part`), and streams the results through the stream processors. What
those processors made of a result is what leaves the run (`state.LeavingResults`), while the
model reads the tool's own value.

On a cancel, the calls that finished keep their results (`keep_finished_tools`) and
every call still without one gets an error result (`answer_dangling_calls`), so the
history stays paired.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, cast

import msgspec

from effects import Abort, Publish, Replace, RunTools
from pipeline.agents import tool_value
from pipeline.approval import Edit, Resumption, approved_digests
from pipeline.loop.children import (
    approval_requests,
    fold_children,
    resumed_children,
    with_children,
)
from pipeline.loop.gate import (
    Suspend,
    decision_chunks,
    gate_calls,
    hold_calls,
    release_calls,
    resumed_entries,
)
from pipeline.loop.hooks import HookFailure, call_hook
from pipeline.loop.response import StepContent
from pipeline.loop.state import (
    RunConfig,
    RunState,
    Tripped,
    apply,
    loop_message,
    note_call_ids,
    trip,
)
from pipeline.loop.stream import deliver, process_chunk, process_chunk_io, stream_through
from pipeline.processor import ToolResultArgs
from pipeline.protocol.replies import (
    LoopCommand,
    ProtocolError,
    RunCancelled,
    ToolInvocation,
    ToolOutcome,
)
from pipeline.tools import Tool, tool_result, unencodable
from pipeline.tools.context import ToolContext, ToolWriter, deps_mismatch
from pipeline.values.chunks import Chunk, DataChunk, ToolError, ToolResult
from pipeline.values.context import RunContext
from pipeline.values.messages import (
    DataPart,
    MessageList,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.values.result import RunResult, Suspension

_call_id = attrgetter("tool_call_id")


def run_tools(
    rc: RunConfig,
    st: RunState,
    calls: tuple[ToolCallPart, ...],
    tools: tuple[Tool, ...],
    turn: tuple[MessageList, MessageList] | None,
    decided: list[ToolInvocation | ToolResultPart] | None = None,
    resumes: dict[str, Resumption] | None = None,
    approved: Mapping[str, str] | None = None,
) -> Generator[LoopCommand, object, tuple[ToolResultPart, ...]]:
    """Run the calls; their results go into one tool message. `turn`: the messages before
    the loop's own response and with it, when `calls` are that response's calls and
    nothing replaced it (the pairing check and the call ids then trust the turn).

    With `process_tool_call` hooks, each call that can run goes through them first
    (`gate.gate_calls`: a call may be answered without running, or the run
    suspends for approval). `decided`: a resumed step's entries, one per call (a
    `ToolResultPart` is a call answered without running): no gate is asked again.
    A call of an agent tool runs a child run (`children.py`; `resumes`: the resumed
    step's children that waited, by call id). `approved`: a resumed step's calls are
    gated again, each decided call's approval by its digest (`gate.gate_calls`)."""
    ctx = rc.ctx
    # (the agent's own tools were looked at once, `rc.tool_rules`; a step's others here)
    gated = bool(rc.h_tool_call) or rc.tool_rules or (
        tools is not rc.agent.tools and any(t.needs_approval is not False for t in tools)
    )
    writers: list[ToolWriter] | None = None  # made at the first tool that may write
    entries: Sequence[ToolInvocation | ToolResultPart]
    invocations: list[ToolInvocation] = []
    if decided is None:
        by_name = st.tools.by_name(tools)
        entries = invocations
        for c in calls:
            t = by_name.get(c.tool_name)
            if t is None:
                invocations.append(ToolInvocation(c, None, None, f"unknown tool {c.tool_name!r}"))
                continue
            try:
                kwargs = t.bind(c.args)
            except (msgspec.ValidationError, TypeError) as e:
                invocations.append(
                    ToolInvocation(c, t, None, f"invalid arguments for {c.tool_name!r}: {e}")
                )
                continue
            if t.context_param is not None:
                why = deps_mismatch(t.deps_type, ctx.deps)
                if why is not None:
                    invocations.append(ToolInvocation(c, t, None, f"tool {t.name!r} {why}"))
                    continue
                if not gated:  # (with gates: once they decided, below)
                    writers = _with_context(ctx, c, t, kwargs, writers)
            invocations.append(ToolInvocation(c, t, kwargs))
    else:
        by_name = st.tools.by_name(tools)
        entries = decided
    if gated and (decided is None or approved is not None):
        try:
            entries = yield from gate_calls(rc, st, calls, list(entries), approved)
        except (Tripped, HookFailure, RunCancelled) as stop:
            # Fail closed: no tool runs; each call goes out without its arguments and
            # gets one error result (a cancel's: `answer_dangling_calls`).
            unrun = tuple(
                ToolResultPart(c.tool_call_id, c.tool_name,
                               f"tool call not run: {_why_stopped(stop)}", True)
                for c in calls
            )
            st.pending = list(hold_calls(st, tuple(st.pending)))
            release_calls(st, list(unrun))
            if not isinstance(stop, RunCancelled):
                _add_results(rc, st, unrun)
            raise
    if gated or decided is not None:
        invocations = []
        for entry in entries:
            if type(entry) is ToolInvocation:
                t, given = entry.tool, entry.kwargs
                if t is not None and given is not None and t.context_param is not None:
                    writers = _with_context(ctx, entry.call, t, given, writers)
                invocations.append(entry)
        if gated:  # what a flush released is held too, then what may go out goes
            st.pending = list(hold_calls(st, tuple(st.pending)))
            release_calls(st, entries)
    if rc.children:  # calls of agent tools run child runs
        invocations, entries = with_children(rc, st, entries, resumes)
    if st.pending:
        out: Publish[Chunk] = Publish(tuple(st.pending))
        st.pending = []
        if (got := (yield out)) is not None:
            raise ProtocolError(out, got)
    got_t: object = ()
    run: RunTools[ToolInvocation, ToolOutcome] = RunTools(tuple(invocations))
    if invocations:
        try:
            got_t = yield run
        except RunCancelled as c:
            keep_finished_tools(rc, st, calls, c)
            raise
        finally:
            written = tuple(w.close() for w in writers) if writers is not None else ()
    else:
        written = ()
    merged = len(invocations) != len(calls)  # some calls were answered without running
    outs: tuple[object, ...]
    if merged:
        outs = outcomes_in_order(run, got_t, entries)
    elif type(got_t) is tuple and len(got_t) == len(calls):
        outs = got_t  # each checked below, as `outcomes_in_order` does (a call less a step)
    else:
        raise ProtocolError(run, got_t)
    child_chunks: list[tuple[DataChunk, ...]] = []
    if rc.children:
        try:
            outs, child_chunks = fold_children(rc, st, calls, entries, outs)
        except Suspend as s:  # a child waits for approvals: so does this run
            yield from stream_through(rc, st, approval_requests(s.pending))
            raise
    parts_l: list[ToolResultPart] = []
    for call, o in zip(calls, outs, strict=True):  # one per call
        t = by_name.get(call.tool_name)  # (`_result_cap` inline: a call less a call)
        cap = (
            rc.agent.max_tool_result_bytes if t is None or t.max_result_bytes is None
            else t.max_result_bytes
        )
        if type(o) is not ToolOutcome:
            if merged and type(o) is ToolResultPart:  # answered without running
                parts_l.append(result_part(call, o.result, o.is_error, cap))
                continue
            if not isinstance(o, ToolOutcome):
                raise ProtocolError(run, got_t)
        if o.tool_call_id != call.tool_call_id:
            raise ProtocolError(run, got_t)
        r = o.result
        if (
            (type(r) is str and r.isascii() and len(r) <= (cap - 2) // 6)
            or r is None or type(r) is bool
        ):
            # JSON as it is (an ASCII str has no lone surrogate), and short enough that
            # even all escapes (6 bytes a character) keep it under the cap
            parts_l.append(ToolResultPart(call.tool_call_id, call.tool_name, r, o.is_error))
        else:
            parts_l.append(result_part(call, r, o.is_error, cap))
    parts = tuple(parts_l)
    if rc.h_tool_result:
        parts = yield from results_through(rc, st, calls, entries, parts)
    # What the tools wrote, per call in call order, through the stream processors;
    # non-transient chunks that pass are kept with the results.
    data: tuple[DataPart, ...] = ()
    if child_chunks:  # what the children leave the stream, after what the tools wrote
        written = (*written, *child_chunks)
    if written and any(written):
        kept = StepContent()
        for chunks in written:
            for d in chunks:
                if rc.stream_io:
                    yield from process_chunk_io(rc, st, d, kept)
                elif rc.h_stream:
                    process_chunk(rc, st, d, kept)
                else:
                    deliver(st, d, kept)
        data = tuple(p for p in kept.parts if isinstance(p, DataPart))
    before = st.ml
    st.ml = after = before._add_one(
        loop_message(rc, st, "tool", (*parts, *data) if data else parts), "response"
    )
    if turn is not None and before is turn[1]:
        # The loop's own turn: its response (these calls, no result, parts of the
        # library's own kinds), then this message answering each call once, in order.
        ids = (calls[0].tool_call_id,) if len(calls) == 1 else tuple(map(_call_id, calls))
        st.call_ids.grew(turn[0], after, ids)
        st.pairing.turn(turn[0], after, ids)
    else:
        note_call_ids(st, before, parts)
    # (no comprehension: a call less a step)
    results = [_result_chunk(parts[0])] if len(parts) == 1 else list(map(_result_chunk, parts))
    if rc.bare_stream:
        st.pending.extend(results)
        return parts
    sent = len(st.pending)
    try:
        yield from stream_through(rc, st, results)
    except (Tripped, HookFailure, RunCancelled) as stop:
        st.leaving.approved(
            parts, results, st.pending[sent:], f"tool result withheld: {_why_stopped(stop)}"
        )
        raise
    return st.leaving.approved(parts, results, st.pending[sent:])


def _with_context(
    ctx: RunContext, c: ToolCallPart, t: Tool, kwargs: dict[str, object],
    writers: list[ToolWriter] | None,
) -> list[ToolWriter]:
    """`kwargs` given the call's `ToolContext`; its writer added to `writers`."""
    w = ToolWriter()
    if writers is None:
        writers = [w]
    else:
        writers.append(w)
    assert t.context_param is not None
    kwargs[t.context_param] = ToolContext(
        deps=ctx.deps, run=ctx, tool_call_id=c.tool_call_id, tool_name=c.tool_name, writer=w,
    )
    return writers


def run_resumed(
    rc: RunConfig, st: RunState, r: Resumption
) -> Generator[LoopCommand, object, tuple[tuple[ToolCallPart, ...], tuple[ToolResultPart, ...]]]:
    """The tools of a suspended step, as the gates and the approver decided: its calls
    and their results."""
    calls, entries = resumed_entries(rc, r)
    yield from stream_through(rc, st, decision_chunks(r))
    tools = tuple(e.tool for e in entries if type(e) is ToolInvocation and e.tool is not None)
    resumes = resumed_children(st, r.suspension.calls, r) if rc.children else None
    approved = None
    s = r.suspension
    if not r.skip_gates_on_resume and s.gate_states is not None:
        # The policy in force now decides: the gates are asked again, from their states
        # before they first gated this step (so nothing is counted twice).
        for b in rc.h_tool_call:
            if b.slot < len(s.gate_states):  # (a resumed run's slots are the suspended's)
                st.states[b.slot] = s.gate_states[b.slot]
        approved = approved_digests(r)
        entries = _as_the_model_made_them(s, entries, approved, r)
    return calls, (yield from run_tools(rc, st, calls, tools, None, entries, resumes,
                                        approved))


def _as_the_model_made_them(
    s: Suspension,
    entries: list[ToolInvocation | ToolResultPart],
    approved: dict[str, str],
    r: Resumption,
) -> list[ToolInvocation | ToolResultPart]:
    """The entries the gates are asked again with: each call that runs with the
    arguments the gates first saw (the model's, kept in the messages), so a gate that
    changes them does so once; an edited call with the edit's."""
    edited = {d.tool_call_id for d in r.decisions if isinstance(d, Edit)}
    first: dict[str, ToolCallPart] = {}
    want = {e.call.tool_call_id for e in entries if type(e) is ToolInvocation} - edited
    for m in reversed(s.messages.messages):
        if want <= first.keys():
            break
        for c in m.tool_calls():
            if c.tool_call_id in want:
                first.setdefault(c.tool_call_id, c)
    out: list[ToolInvocation | ToolResultPart] = []
    for e in entries:
        made = first.get(e.call.tool_call_id) if type(e) is ToolInvocation else None
        if type(e) is ToolInvocation and made is not None and made.args != e.call.args \
                and e.tool is not None:
            e = _bound(e, made, e.tool)
        out.append(e)
    return out


def _bound(e: ToolInvocation, made: ToolCallPart, t: Tool) -> ToolInvocation:
    """`e` with the call as the model made it (as it is when that does not bind: it
    bound when the step ran)."""
    try:
        return ToolInvocation(made, t, t.bind(made.args))
    except (msgspec.ValidationError, TypeError):
        return e


def results_through(
    rc: RunConfig,
    st: RunState,
    calls: tuple[ToolCallPart, ...],
    entries: Sequence[ToolInvocation | ToolResultPart],
    parts: tuple[ToolResultPart, ...],
) -> Generator[LoopCommand, object, tuple[ToolResultPart, ...]]:
    """process_tool_result: each result of a call through the processors in list order,
    before the model or the caller sees it: what its tool returned, or what a gate or
    the approver answered in its place (`SkipCall`, a denial). The library's own errors
    (unknown tool, invalid arguments) are not. An Abort or a processor failure withholds
    every result of the step (each call still gets one) and stops the run."""
    out = list(parts)
    step = len(st.steps)
    try:
        for i, (e, p) in enumerate(zip(entries, parts, strict=True)):
            if type(e) is ToolInvocation:
                if e.kwargs is None and e.child is None:
                    continue  # not run: the library's error, nothing a tool returned
                ran = e.call
            else:
                ran = calls[i]  # answered without running
            result, changed = p.result, False
            for b in rc.h_tool_result:
                a = ToolResultArgs(
                    call=ran, result=result, is_error=p.is_error, message_list=st.ml,
                    step_number=step, state=st.states[b.slot], context=rc.ctx,
                    ran=type(e) is ToolInvocation,
                )
                eff = apply(rc, st, b, (yield from call_hook(b, a)))
                if isinstance(eff, Abort):
                    raise trip(b, eff)
                if isinstance(eff, Replace):
                    result, changed = eff.value, True
            if changed:
                t = e.tool if type(e) is ToolInvocation else None
                out[i] = result_part(calls[i], result, p.is_error, _result_cap(rc, t))
    except (Tripped, HookFailure) as stop:
        _add_results(rc, st, tuple(
            ToolResultPart(c.tool_call_id, c.tool_name,
                           f"tool result withheld: {_why_stopped(stop)}", True)
            for c in calls
        ))
        raise
    return tuple(out)


def outcomes_in_order(
    run: RunTools[ToolInvocation, ToolOutcome],
    got: object,
    entries: Sequence[ToolInvocation | ToolResultPart],
) -> tuple[ToolOutcome | ToolResultPart, ...]:
    """The interpreter's reply to `run` checked (one ToolOutcome per invocation, in
    order, as `checked` does, inline), merged with the calls answered without running:
    one per call, in call order."""
    invs = run.calls
    if type(got) is not tuple or len(got) != len(invs):
        raise ProtocolError(run, got)
    outcome_t = ToolOutcome
    for inv, o in zip(invs, got, strict=True):
        if not (
            (type(o) is outcome_t or isinstance(o, outcome_t))
            and o.tool_call_id == inv.call.tool_call_id
        ):
            raise ProtocolError(run, got)
    if TYPE_CHECKING:
        got = cast(tuple[ToolOutcome, ...], got)
    if len(invs) == len(entries):
        return got
    ran = iter(got)
    return tuple(e if type(e) is ToolResultPart else next(ran) for e in entries)


def _why_stopped(stop: Tripped | HookFailure | RunCancelled) -> str:
    if isinstance(stop, Tripped):
        return stop.tripwire.reason
    if isinstance(stop, HookFailure):
        return f"processor {stop.processor_id!r} failed"
    return stop.reason


def _result_cap(rc: RunConfig, t: Tool | None) -> int:
    """The size cap of a tool's result: its own, else the agent's."""
    if t is None or t.max_result_bytes is None:
        return rc.agent.max_tool_result_bytes
    return t.max_result_bytes


def _result_chunk(p: ToolResultPart) -> Chunk:
    """What the caller is streamed of a tool result."""
    if p.is_error:
        return ToolError(p.tool_call_id, p.tool_name, str(p.result))
    return ToolResult(p.tool_call_id, p.tool_name, p.result)


def keep_finished_tools(
    rc: RunConfig, st: RunState, calls: tuple[ToolCallPart, ...], c: RunCancelled
) -> None:
    """A cancel while tools ran: the real results of the calls that finished (their
    side effects happened), an error result for the others, in call order.

    A real result leaves the run only through the tool-result and stream processors,
    which run no more after a cancel: with either, a finished call's result (or its own
    error) is withheld, the stream and the messages saying so (fail closed); without, it
    is kept and streamed as it is."""
    done = {o.tool_call_id: _plain(o) for o in c.tool_outcomes if isinstance(o, ToolOutcome)}
    if not done:
        return  # `answer_dangling_calls` answers every call
    unchecked = f"tool result withheld: the run was cancelled ({c.reason}) before it was checked"
    checked = bool(rc.h_stream or rc.h_tool_result)
    parts = tuple(
        (
            result_part(
                call, done[call.tool_call_id].result, done[call.tool_call_id].is_error,
                _result_cap(rc, st.tools.by_name().get(call.tool_name)),
            )
            if not checked
            else ToolResultPart(call.tool_call_id, call.tool_name, unchecked, True)
        )
        if call.tool_call_id in done
        else ToolResultPart(
            call.tool_call_id, call.tool_name, f"tool call cancelled: {c.reason}", True
        )
        for call in calls
    )
    _add_results(rc, st, parts)


def _plain(o: ToolOutcome) -> ToolOutcome:
    """A child run's outcome (its `RunResult`) as the call's result (`children.py`)."""
    if isinstance(o.result, RunResult):
        value, is_error = tool_value(o.result)
        return ToolOutcome(o.tool_call_id, value, is_error)
    return o


def result_part(
    call: ToolCallPart, result: object, is_error: bool, cap: int
) -> ToolResultPart:
    """A tool's result as kept in the history: a `returns` Result is unwrapped
    (`tools.tool_result`); one that cannot be encoded as JSON (a custom object, a
    recursive list, an awaitable never awaited) or whose JSON is over `cap` bytes is an
    error result the model sees, naming the type or the size, so the history always
    encodes and stays bounded."""
    if result is None or type(result) is bool:
        return ToolResultPart(call.tool_call_id, call.tool_name, result, is_error)
    result, is_error = tool_result(result, is_error)
    problem = unencodable(result, cap)
    if problem is not None:
        return ToolResultPart(
            call.tool_call_id, call.tool_name, f"tool {call.tool_name!r} returned {problem}", True
        )
    return ToolResultPart(call.tool_call_id, call.tool_name, result, is_error)


def answer_dangling_calls(rc: RunConfig, st: RunState, reason: str) -> None:
    """On cancel: an error result for each tool call of the response without one."""
    response = st.ml.response
    answered = {p.tool_call_id for m in response for p in m.tool_results()}
    parts = tuple(
        ToolResultPart(c.tool_call_id, c.tool_name, f"tool call cancelled: {reason}", True)
        for m in response
        for c in m.tool_calls()
        if c.tool_call_id not in answered
    )
    if parts:
        _add_results(rc, st, parts)


def _add_results(rc: RunConfig, st: RunState, parts: tuple[ToolResultPart, ...]) -> None:
    """A tool message of these results added to the run, and streamed (a cancel's)."""
    before = st.ml
    st.ml = before.add(loop_message(rc, st, "tool", parts), "response")
    note_call_ids(st, before, parts)
    st.pending.extend(_result_chunk(p) for p in parts)
