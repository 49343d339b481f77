"""process_tool_call: each call that can run, through the gates, before any tool runs.

Per call, in call order, the processors in list order (input, then output processors):
`Continue`, `Replace(args)` (bound to the tool's schema again; arguments it refuses fail
the run, naming the processor), `SkipCall(result)` (the call's one result, the tool not
run), `AskApproval(message)` (the run suspends: `Suspend`), `Abort`. A decision other
than Continue or Replace is the last for that call: later processors are not asked.

While gates exist, the model's tool-call chunks are held back (`hold_calls`) and released
once the gates decided (`release_calls`): a call answered without running reaches the
caller with its arguments left out.

A resumed run (`pipeline.approval`) does not ask the gates again: what they decided
before the suspension, with the person's decisions, gives its entries (`resumed_entries`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence

import msgspec

from effects import Abort, AskApproval, Replace, SkipCall
from pipeline.approval import (
    Approve,
    Deny,
    Edit,
    Resumption,
    call_digest,
    tools_of,
)
from pipeline.loop.hooks import Bound, call_hook, invalid
from pipeline.loop.state import RunConfig, RunState, apply, trip
from pipeline.loop.stream import stream_through
from pipeline.processor import ToolCallArgs
from pipeline.protocol.replies import LoopCommand, ToolInvocation
from pipeline.values.chunks import (
    Chunk,
    ToolApprovalRequest,
    ToolApprovalResponse,
    ToolCall,
    ToolCallDelta,
)
from pipeline.values.messages import ToolCallPart, ToolResultPart
from pipeline.values.result import GatedCall, PendingApproval, StepResult

Entry = ToolInvocation | ToolResultPart
"""One call of a step on its way: to run (or an error the interpreter answers), or
answered without running."""


class Suspend(Exception):
    """Raised inside the loop when a gate asks for approval: the run ends "suspended"."""

    def __init__(
        self, pending: tuple[PendingApproval, ...], calls: tuple[GatedCall, ...]
    ) -> None:
        self.pending = pending
        self.calls = calls
        self.step: StepResult | None = None
        """Set by the step (what the model answered), before the run ends."""


def gate_calls(
    rc: RunConfig, st: RunState, calls: tuple[ToolCallPart, ...], entries: list[Entry]
) -> Generator[LoopCommand, object, list[Entry]]:
    """The entries after the gates (see the module doc); raises `Suspend` when a call
    waits for approval (no tool of the step runs), `Tripped` on an Abort."""
    asks: dict[int, tuple[Bound, AskApproval, ToolCallPart]] = {}
    step = len(st.steps)
    for i, e in enumerate(entries):
        if type(e) is not ToolInvocation or e.tool is None or e.kwargs is None:
            continue
        t, call, args = e.tool, e.call, e.call.args
        kwargs = e.kwargs
        for b in rc.h_tool_call:
            a = ToolCallArgs(
                call=e.call, args=args, tool_name=t.name, tool=t, message_list=st.ml,
                step_number=step,
                state=st.states[b.slot], context=rc.ctx,
            )
            eff = apply(rc, st, b, (yield from call_hook(b, a)))
            if isinstance(eff, Abort):
                raise trip(b, eff)
            if isinstance(eff, Replace):
                new = eff.value
                try:
                    kwargs = t.bind(new)
                except (msgspec.ValidationError, TypeError) as err:
                    raise invalid(
                        b, f"Replace(args) for tool {t.name!r}: {err}", "InvalidArguments"
                    ) from err
                args = dict(new)
                call = msgspec.structs.replace(e.call, args=args)
            elif isinstance(eff, SkipCall):
                entries[i] = ToolResultPart(
                    call.tool_call_id, call.tool_name, eff.result, eff.is_error
                )
                break
            elif isinstance(eff, AskApproval):
                asks[i] = (b, eff, call)
                break
        else:
            if call is not e.call:
                entries[i] = ToolInvocation(call, t, kwargs)
    if asks:  # the approver sees the calls waiting (and those that would run)
        st.pending = list(hold_calls(st, tuple(st.pending)))
        release_calls(st, entries)
        suspend = _suspend(calls, entries, asks)
        yield from stream_through(rc, st, [
            ToolApprovalRequest(p.tool_call_id, p.tool_name, p.args, p.message, p.digest)
            for p in suspend.pending
        ])
        raise suspend
    return entries


def _suspend(
    calls: tuple[ToolCallPart, ...],
    entries: list[Entry],
    asks: dict[int, tuple[Bound, AskApproval, ToolCallPart]],
) -> Suspend:
    pending: list[PendingApproval] = []
    gated: list[GatedCall] = []
    for i, (c, e) in enumerate(zip(calls, entries, strict=True)):
        if i in asks:
            b, ask, call = asks[i]
            pending.append(PendingApproval(
                tool_call_id=c.tool_call_id, tool_name=c.tool_name, args=call.args,
                message=ask.message, processor_id=b.processor_id,
                digest=call_digest(c.tool_call_id, c.tool_name, call.args),
                metadata=ask.metadata,
            ))
            gated.append(GatedCall(call=call, kind="ask"))
        elif type(e) is ToolResultPart:
            gated.append(GatedCall(call=c, kind="answered", result=e.result,
                                   is_error=e.is_error))
        else:
            assert isinstance(e, ToolInvocation)
            if e.error is not None:
                gated.append(GatedCall(call=c, kind="answered", result=e.error, is_error=True))
            else:
                gated.append(GatedCall(call=e.call, kind="run"))
    return Suspend(tuple(pending), tuple(gated))


# --- the stream: tool-call chunks held until the gates decided -------------------------


def hold_calls(st: RunState, out: tuple[Chunk, ...]) -> tuple[Chunk, ...]:
    """`out` without its tool-call chunks, which are held (`st.held_calls`)."""
    if not any(type(c) is ToolCall or type(c) is ToolCallDelta for c in out):
        return out
    kept: list[Chunk] = []
    for c in out:
        if type(c) is ToolCall or type(c) is ToolCallDelta:
            st.held_calls.append(c)
        else:
            kept.append(c)
    return tuple(kept)


def release_calls(st: RunState, entries: Sequence[Entry]) -> None:
    """The held tool-call chunks, to go out before the tools run: as they came for a
    call that runs (or waits for approval); for a call answered without running, only
    the call, its arguments left out."""
    refused = {e.tool_call_id for e in entries if type(e) is ToolResultPart}
    held, st.held_calls = st.held_calls, []
    for c in held:
        if c.tool_call_id not in refused:
            st.pending.append(c)
        elif type(c) is ToolCall:
            st.pending.append(ToolCall(c.tool_call_id, c.tool_name, {}))


# --- a resumed run ------------------------------------------------------------------


def decision_chunks(r: Resumption) -> list[Chunk]:
    """What a resumed run streams first: the decision for each call that waited."""
    return [
        ToolApprovalResponse(
            d.digest, d.tool_call_id, not isinstance(d, Deny),
            (d.reason or None) if isinstance(d, Deny) else None,
        )
        for d in r.decisions
    ]


def resumed_entries(rc: RunConfig, r: Resumption) -> tuple[tuple[ToolCallPart, ...], list[Entry]]:
    """The suspended step's calls (as the model made them) and their entries, from what
    the gates decided and the person's decisions (checked by `check_resumption`)."""
    s = r.suspension
    decided = {d.tool_call_id: d for d in r.decisions}
    tools = tools_of(rc.agent)
    model_calls = {c.tool_call_id: c for c in s.step.tool_calls}
    calls: list[ToolCallPart] = []
    entries: list[Entry] = []
    for g in s.calls:
        c = g.call
        calls.append(model_calls.get(c.tool_call_id, c))
        if g.kind == "answered":
            entries.append(ToolResultPart(c.tool_call_id, c.tool_name, g.result, g.is_error))
            continue
        if g.kind == "ask":
            d = decided[c.tool_call_id]
            if isinstance(d, Deny):
                why = f": {d.reason}" if d.reason else ""
                entries.append(ToolResultPart(
                    c.tool_call_id, c.tool_name, f"tool call denied by the approver{why}", True
                ))
                continue
            if isinstance(d, Edit):
                c = msgspec.structs.replace(c, args=dict(d.args))
            assert isinstance(d, Approve | Edit)
        t = tools[c.tool_name]
        entries.append(ToolInvocation(c, t, t.bind(c.args)))
    return tuple(calls), entries
