"""process_tool_call: each call that can run, through the gates, before any tool runs.

Per call, in call order, the processors in list order (input, then output processors):
`Continue`, `Replace(args)` (bound to the tool's schema again; arguments it refuses fail
the run, naming the processor), `SkipCall(result)` (the call's one result, the tool not
run), `AskApproval(message)` (the run suspends: `Suspend`), `Abort`. A decision other
than Continue or Replace is the last for that call: later processors are not asked.

While gates exist, the model's tool-call chunks are held back (`hold_calls`) and released
once the gates decided (`release_calls`): a call answered without running reaches the
caller with its arguments left out.

A resumed run (`pipeline.approval`) asks the gates again for the suspended step's calls
(`approved`: a person's decision answers the asks for exactly its call), from their
states before they first gated the step; with `skip_gates_on_resume`, what they decided
before the suspension, with the person's decisions, gives its entries
(`resumed_entries`). A tool's own `needs_approval` rule is asked after the gates; an
`ApprovalReviewer` reviews each call that would wait (`_review`).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence

import msgspec

from effects import Abort, AskApproval, Continue, Replace, SkipCall
from pipeline.approval import (
    Approve,
    Deny,
    Edit,
    Resumption,
    call_digest,
    resumed_tools,
)
from pipeline.loop.hooks import HookFailure, call_hook, invalid
from pipeline.loop.state import RunConfig, RunState, apply, trip
from pipeline.loop.stream import stream_through
from pipeline.processor import ToolCallArgs
from pipeline.protocol.replies import EffectRecord, LoopCommand, ToolInvocation
from pipeline.tools import Tool
from pipeline.tools.context import ToolContext, ToolWriter
from pipeline.values.chunks import (
    Chunk,
    ToolApprovalRequest,
    ToolApprovalResponse,
    ToolCall,
    ToolCallDelta,
)
from pipeline.values.messages import ToolCallPart, ToolResultPart
from pipeline.values.result import GatedCall, PendingApproval, Review, ReviewNote, StepResult

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
        self.tools: tuple[Tool, ...] = ()
        """Set by the step: the tools it offered (a resume finds them again)."""
        self.gate_states: tuple[object, ...] | None = None
        """The processors' states before the gates ran for the step (a resume gates
        its calls again from them)."""


def gate_calls(
    rc: RunConfig,
    st: RunState,
    calls: tuple[ToolCallPart, ...],
    entries: list[Entry],
    approved: Mapping[str, str] | None = None,
) -> Generator[LoopCommand, object, list[Entry]]:
    """The entries after the gates (see the module doc); raises `Suspend` when a call
    waits for approval (no tool of the step runs), `Tripped` on an Abort.

    `approved`: on a resumed step, the digest each decided call was approved (or
    edited) with, by call id. An `AskApproval` (or the tool's own rule) for exactly that
    call is answered by the decision, and the later gates are asked as for any call; a
    decided call whose arguments the gates change is not run (no one approved those)."""
    asks: dict[int, tuple[str, AskApproval, ToolCallPart]] = {}
    kept: dict[int, tuple[Tool, dict[str, object]]] = {}  # each ask's tool and arguments
    step = len(st.steps)
    before = tuple(st.states)  # what a resume gates the step's calls again from
    for i, e in enumerate(entries):
        if type(e) is not ToolInvocation or e.tool is None or e.kwargs is None:
            continue
        t, call, args = e.tool, e.call, e.call.args
        kwargs = e.kwargs
        decided = approved.get(call.tool_call_id) if approved is not None else None
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
                if decided is not None and decided == _digest(call):
                    continue  # a person decided this very call
                asks[i] = (b.processor_id, eff, call)
                kept[i] = (t, kwargs)
                break
        else:
            if t.needs_approval is not False and (decided is None or decided != _digest(call)):
                ask = _tool_rule(rc, t, call, kwargs)
                if ask is not None:
                    asks[i] = (f"tool:{t.name}", ask, call)
                    kept[i] = (t, kwargs)
                    continue
            if decided is not None and decided != _digest(call):
                entries[i] = ToolResultPart(
                    call.tool_call_id, call.tool_name,
                    "tool call not run: the gates changed the arguments the approver "
                    "decided on", True,
                )
            elif call is not e.call:
                entries[i] = ToolInvocation(call, t, kwargs)
    if asks and rc.h_review:
        yield from _review(rc, st, entries, asks, kept)
    if asks:  # the approver sees the calls waiting (and those that would run)
        st.pending = list(hold_calls(st, tuple(st.pending)))
        release_calls(st, entries)
        suspend = _suspend(calls, entries, asks, approved)
        suspend.gate_states = before
        yield from stream_through(rc, st, [
            ToolApprovalRequest(p.tool_call_id, p.tool_name, p.args, p.message, p.digest)
            for p in suspend.pending
        ])
        raise suspend
    return entries


def _review(
    rc: RunConfig,
    st: RunState,
    entries: list[Entry],
    asks: dict[int, tuple[str, AskApproval, ToolCallPart]],
    kept: dict[int, tuple[Tool, dict[str, object]]],
) -> Generator[LoopCommand, object, None]:
    """The approval reviewer's verdict on each call that asks: one it approves runs (no
    longer asks); any other (it refers the call, fails, or gives another effect) leaves
    the call to a person. Each verdict is kept (`RunResult.reviews`)."""
    b = rc.h_review[0]
    step = len(st.steps)
    for i in list(asks):
        call = asks[i][2]
        t, kwargs = kept[i]
        a = ToolCallArgs(call=call, args=call.args, tool_name=t.name, tool=t,
                         message_list=st.ml, step_number=step, state=st.states[b.slot],
                         context=rc.ctx)
        approved, reason, risk = False, "", None
        try:
            out = yield from call_hook(b, a)
        except HookFailure as e:  # failed (or its judge timed out): a person decides
            reason = f"the reviewer failed ({e.error_type}: {e.message}): a person decides"
        else:
            eff = apply(rc, st, b, out)
            note = st.states[b.slot]
            if isinstance(note, ReviewNote):  # what the reviewer's judge said
                reason, risk = note.reason, note.risk
            if type(eff) is Continue:
                approved = True
                reason = reason or "approved by the reviewer"
            elif isinstance(eff, AskApproval):
                reason = reason or eff.message
            else:
                reason = f"the reviewer answered {type(eff).__name__}: a person decides"
        st.reviews += (Review(run_id=rc.ctx.run_id, thread_id=rc.ctx.thread_id,
                                 resource_id=rc.ctx.resource_id,
                                 tool_call_id=call.tool_call_id, tool_name=t.name,
                                 digest=_digest(call), reviewer=b.processor_id,
                                 approved=approved, reason=reason, risk=risk),)
        if approved:
            del asks[i]
            entries[i] = ToolInvocation(call, t, kwargs)
        else:  # the person reads why the reviewer did not approve it
            asker, ask, _ = asks[i]
            asks[i] = (asker, msgspec.structs.replace(
                ask, message=f"{ask.message} (reviewer: {reason})"), call)


def _digest(call: ToolCallPart) -> str:
    return call_digest(call.tool_call_id, call.tool_name, call.args)


def _tool_rule(
    rc: RunConfig, t: Tool, call: ToolCallPart, kwargs: dict[str, object]
) -> AskApproval | None:
    """The tool's own `needs_approval` rule for this call: an `AskApproval`, or None.
    A rule that raises fails the run closed (no tool of the step runs)."""
    given = kwargs
    if t.needs_approval is not True and t.context_param is not None:
        given = dict(kwargs)
        w = ToolWriter()
        w.close()  # (a rule decides; it writes nothing)
        given[t.context_param] = ToolContext(
            deps=rc.ctx.deps, run=rc.ctx, tool_call_id=call.tool_call_id,
            tool_name=t.name, writer=w,
        )
    try:
        needed = t.approval_needed(given)
    except Exception as e:
        raise HookFailure(f"tool:{t.name}", "needs_approval", type(e).__name__, str(e)) from e
    if not needed:
        return None
    ask = AskApproval(f"{t.name} needs approval")
    if rc.record is not None:  # (a trace names the rule that asked, as it names a gate)
        rc.record(EffectRecord(f"tool:{t.name}", "needs_approval", ask))
    return ask


def _suspend(
    calls: tuple[ToolCallPart, ...],
    entries: list[Entry],
    asks: dict[int, tuple[str, AskApproval, ToolCallPart]],
    approved: Mapping[str, str] | None,
) -> Suspend:
    pending: list[PendingApproval] = []
    gated: list[GatedCall] = []
    for i, (c, e) in enumerate(zip(calls, entries, strict=True)):
        if i in asks:
            asker, ask, call = asks[i]
            pending.append(PendingApproval(
                tool_call_id=c.tool_call_id, tool_name=c.tool_name, args=call.args,
                message=ask.message, processor_id=asker,
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
                was = approved.get(c.tool_call_id) if approved is not None else None
                gated.append(GatedCall(call=e.call, kind="run", approved=was))
    return Suspend(tuple(pending), tuple(gated))


# --- the stream: tool-call chunks held until the gates decided -------------------------


def hold_calls(st: RunState, out: tuple[Chunk, ...]) -> tuple[Chunk, ...]:
    """`out` without its tool-call chunks, which are held (`st.held_calls`)."""
    if not any(type(c) is ToolCall or type(c) is ToolCallDelta for c in out):
        return out
    kept: list[Chunk] = []
    for c in out:
        if type(c) is ToolCall or type(c) is ToolCallDelta:
            st.held_calls += (c,)
        else:
            kept.append(c)
    return tuple(kept)


def release_calls(st: RunState, entries: Sequence[Entry]) -> None:
    """The held tool-call chunks, to go out before the tools run: as they came for a
    call that runs (or waits for approval); for a call answered without running, only
    the call, its arguments left out."""
    refused = {e.tool_call_id for e in entries if type(e) is ToolResultPart}
    held, st.held_calls = st.held_calls, ()
    for c in held:
        if c.tool_call_id not in refused:
            st.pending.append(c)
        elif type(c) is ToolCall:
            st.pending.append(ToolCall(c.tool_call_id, c.tool_name, {}))


# --- a resumed run ------------------------------------------------------------------


def decision_chunks(r: Resumption) -> list[Chunk]:
    """What a resumed run streams first: the decision for each call that waited."""
    return [
        ToolApprovalResponse(d.digest, d.tool_call_id, not isinstance(d, Deny),
                             d.reason or None, d.by or None)
        for d in r.decisions
    ]


def resumed_entries(rc: RunConfig, r: Resumption) -> tuple[tuple[ToolCallPart, ...], list[Entry]]:
    """The suspended step's calls (as the model made them) and their entries, from what
    the gates decided and the person's decisions (checked by `check_resumption`)."""
    s = r.suspension
    decided = {d.tool_call_id: d for d in r.decisions}
    tools = resumed_tools(rc.agent, r)
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
