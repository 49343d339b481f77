"""The agent loop: a pure state machine that yields commands and is sent their replies.

`agent_loop(...)` returns a generator. An interpreter drives it:

    cmd = next(gen)
    while not isinstance(cmd, Done):
        cmd = gen.send(reply_to(cmd))      # or gen.throw(exc) when carrying it out failed

To cancel a run, an interpreter throws `RunCancelled(reason)` in at the pending command
(`cmd = gen.throw(RunCancelled("timeout"))`): the loop then yields only `Publish` and
`Done`, so it finishes with no further I/O (see `RunCancelled`). The commands, their
replies and the records an interpreter deals in are `pipeline.protocol.replies`'s.

Nothing here does I/O or reads a clock: ids come from `Ids`, time from the `clock`
the interpreter hands in. So one agent, input and model script always give one run.

Order of a run: process_input once; then per step: process_input_step (+ prepare_step
last), the model call (transient failures retried by the RetryPolicy, rejections offered
to process_api_error), every streamed chunk through process_output_stream,
process_output_step (which may discard the response and retry), tools; finally
process_output_result. See docs/DESIGN.md for the contract.

This module is the run and its steps. Each phase is a function over the run's
configuration and state, `(rc, st, ...)` (state.py), in the module of its phase:
- start.py: the run's configuration (hooks bound to state slots) and first state;
- step.py: process_input_step (+ prepare_step) and the model request;
- model_call.py: the model call, process_api_error, and the model's stream;
- stream.py: process_output_stream, the per-chunk path;
- response.py: what one model response delivered, and the run's response text;
- output.py: process_output_step, the output type's decode, process_output_result;
- tool_step.py: the step's tools, their results, and the results a cancel leaves;
- cost.py: what the run's model calls cost;
- gate.py: process_tool_call; race.py: input guards racing the first model call;
- state.py: what a run holds between them: tool-call ids unique across the run, what the
  stream hooks have seen, what leaves the run, and the messages the loop makes.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Literal

import msgspec

from effects import Abort, Done, Publish, Replace
from pipeline.agent import Agent
from pipeline.agents import ChildRun
from pipeline.approval import (
    Resumption,
    agent_digest,
    check_resumption,
    offered_tools,
    resumed_context,
    resumed_tools,
)
from pipeline.loop.children import answer_of_handoff
from pipeline.loop.cost import count_stopped, price_call, run_cost, spending
from pipeline.loop.fallback import attempts
from pipeline.loop.gate import Suspend
from pipeline.loop.hooks import HookFailure, call_hook
from pipeline.loop.model_call import answered, ask_model, call_model, consume
from pipeline.loop.output import (
    approved,
    approved_input,
    check_output,
    output_result,
    output_step,
)
from pipeline.loop.race import drop_racing, feed, race_gate, start_racing
from pipeline.loop.response import StepContent, response_text
from pipeline.loop.start import start_run
from pipeline.loop.state import (
    NO_IDS,
    Failed,
    RunConfig,
    RunState,
    Tripped,
    apply,
    keep_held,
    loop_message,
    trip,
    unforged,
)
from pipeline.loop.step import base_settings, input_step, step_tools
from pipeline.loop.stream import stream_through
from pipeline.loop.tool_step import answer_dangling_calls, run_resumed, run_tools
from pipeline.processor import InputArgs, StepSettings
from pipeline.protocol.replies import (
    AgentLoop,
    EffectRecorder,
    LoopCommand,
    ProtocolError,
    RunCancelled,
)
from pipeline.values.chunks import Chunk, ErrorChunk, StepFinish, StepStart, Tripwire, Usage
from pipeline.values.chunks import Finish as FinishChunk
from pipeline.values.context import RunContext
from pipeline.values.cost import Pricer
from pipeline.values.messages import Message, MessageList, SourcePart, ToolResultPart
from pipeline.values.model import ModelFailed
from pipeline.values.output_type import TypedOutput
from pipeline.values.result import (
    Cancelled,
    InvalidInput,
    JudgeCall,
    ProcessorFailed,
    RunError,
    RunResult,
    Status,
    StepResult,
    Suspension,
)
from pipeline.values.validate import check_messages

StepOutcome = Literal["next", "stop", "rerun"]
"""After a step: "next" (tools ran: the model sees their results), "stop" (a final
answer), "rerun" (a processor or the output type discarded the response: run the step
again, with the feedback)."""

__all__ = ["agent_loop", "rejected"]


def agent_loop(
    agent: Agent,
    messages: MessageList,
    *,
    context: RunContext,
    clock: Callable[[], float] = lambda: 0.0,
    record: EffectRecorder | None = None,
    price: Pricer | None = None,
    resume: Resumption | None = None,
    child: ChildRun | None = None,
) -> AgentLoop:
    """The run of `agent` on `messages`, as a command generator. See the module doc.

    `resume`: go on with a suspended run (`pipeline.approval`) instead, from its kept
    messages (`messages` are not read), in its thread and resource (`context`'s, when it
    names them, must be those); raises an `ApprovalError` at once when `agent` is not
    the one that suspended, an edit does not fit its tool or `context` names another
    owner (`OwnerMismatch`).

    `price` prices each model call (`pipeline.values.cost`): the result then carries its cost.
    Messages that are not a conversation the library can send (wrong types, an unknown
    role...) fail the run at once with `InvalidInput`, before any call. `child`: the
    `ChildRun` this run is (`docs/agents.md`; drive it through `pipeline.loop.relay`).
    """
    if resume is not None:
        context = resumed_context(context, resume.suspension)
        check_resumption(agent, resume)
        messages = resume.suspension.messages
    used: set[str] = set()
    if child is None or resume is not None or child.kind != "tool":
        invalid = check_messages(messages, used)
        if invalid is not None:
            return rejected(invalid)
    # (else a child's input is one user message the parent's loop made of a call it
    # checked: `pipeline.agents.child_input`)
    rc, st = start_run(  # (an empty set is dropped: the run keeps no set until an id comes)
        agent, messages, context, clock, record, price, used or NO_IDS, resume, child
    )
    return _run(rc, st, resume)


def rejected(error: InvalidInput) -> AgentLoop:
    """The run of an input that was refused: it fails at once, calling nothing."""
    result = RunResult(
        status="failed",
        text="",
        messages=MessageList(),
        steps=(),
        usage=Usage(),
        finish_reason="error",
        error=error,
    )
    yield Publish((ErrorChunk("InvalidInput", str(error)),))
    yield Done(result)
    return result


# --- the run: each phase a function over the run's configuration and state ----------------


def _run(rc: RunConfig, st: RunState, resume: Resumption | None = None) -> AgentLoop:
    """The whole run; the phases that ask the interpreter are its sub-generators."""
    status_error: RunError | None = None
    tripwire: Tripwire | None = None
    suspension: Suspension | None = None
    before_result: MessageList | None = None  # the messages the result processors got
    try:
        if resume is None:
            if rc.h_input:
                yield from _process_input(rc, st)
            step = 0
        else:  # the suspended step's tools, then the steps after it
            step = resume.suspension.step.step_number + 1
            try:
                yield from _resumed_step(rc, st, resume.suspension.step, resume)
            except _HandedOver:
                step = rc.agent.max_steps  # the handoff's answer is the run's
        inputs = approved_input(rc, st) if rc.h_approved else ()
        base = base_settings(rc, st.ml.system)
        while step < rc.agent.max_steps:
            outcome = yield from _step(rc, st, step, base)
            if outcome == "rerun":  # discarded by a processor retry: run it again
                continue
            step += 1
            if outcome == "stop":
                break
        before_result = st.ml
        if rc.h_result:
            yield from output_result(rc, st)
        if rc.bare_stream:  # no stream hook: the finish chunk goes out as it is
            st.pending.append(FinishChunk(st.finish_reason, st.usage))
        else:  # inside the try: a stream processor may abort (or fail) on it too
            yield from stream_through(rc, st, [FinishChunk(st.finish_reason, st.usage)])
        if rc.h_approved or (st.tree is not None and st.tree.writes):
            # every output processor approved: what memory may save (the children's
            # writes too, held for the root: `children.py`)
            yield from approved(rc, st, inputs, before_result)
    except Tripped as t:
        tripwire = t.tripwire
    except Failed as f:
        status_error = f.error
    except HookFailure as h:
        status_error = ProcessorFailed(h.processor_id, h.hook, h.error_type, h.message)
    except RunCancelled as c:
        status_error = Cancelled(c.reason)
        answer_dangling_calls(rc, st, c.reason)
    except Suspend as s:
        suspension = _suspension(rc, st, s)
    if st.racing:  # the run ended before the first model call's gate (race.py)
        drop_racing(st)

    status: Status
    if suspension is not None:
        st.finish_reason = "tool-calls"
        status = "suspended"
    elif tripwire is not None:
        st.finish_reason = "tripwire"
        st.pending.append(tripwire)
        status = "tripped"
    elif status_error is not None:
        cancelled = isinstance(status_error, Cancelled)
        st.finish_reason = "cancelled" if cancelled else "error"
        st.pending.append(ErrorChunk(type(status_error).__name__, str(status_error)))
        status = "cancelled" if cancelled else "failed"
    else:
        status = "finished"
    if st.held:
        keep_held(rc, st)
    judges: tuple[JudgeCall, ...] = ()
    if st.judges is None or not st.judges.asked:  # (`run_cost` inline: no judge asked)
        cost = st.cost if st.cost_known else None
    else:
        judges, cost = run_cost(rc, st)
    usage = st.usage
    tree = st.tree
    if tree is not None:  # the children's usage and cost are the tree's
        usage = usage + tree.usage
        if cost is not None:
            cost = cost + tree.cost if tree.cost is not None else None
        if not tree.cost_known:
            cost = None
    result = RunResult(
        status=status,
        text=response_text(st.ml),
        messages=st.leaving.messages(st.ml, before_result),
        steps=st.steps,
        usage=usage,
        finish_reason=st.finish_reason,
        tripwire=tripwire,
        error=status_error,
        retry_count=st.retry_count,
        api_error_retry_count=st.api_retry_count,
        output=st.output if status == "finished" else None,
        cost=cost,
        judges=judges,
        unmetered_calls=st.unmetered,
        suspension=suspension,
        children=tuple(tree.nodes) if tree is not None else (),
        answered_by=tree.answered_by if tree is not None else None,
        reviews=st.reviews,
    )
    if st.pending:
        out: Publish[Chunk] = Publish(tuple(st.pending))
        try:  # (not contextlib.suppress: a context manager object every run)
            reply = yield out
        except RunCancelled:
            pass  # the run is over already: a cancel now changes nothing in its result
        else:
            if reply is not None:  # (`checked` inline: a Publish is answered with None)
                raise ProtocolError(out, reply)
        st.pending = []
    yield Done(result)
    return result


def _process_input(rc: RunConfig, st: RunState) -> Generator[LoopCommand, object, None]:
    for b in rc.h_input:
        args = InputArgs(
            system_messages=st.ml.system,
            message_list=st.ml,
            state=st.states[b.slot],
            retry_count=0,
            context=rc.ctx,
        )
        if b.processor.concurrent:  # runs beside the first model call (race.py)
            yield from start_racing(rc, st, b, args)
            continue
        eff = apply(rc, st, b, (yield from call_hook(b, args)))
        if isinstance(eff, Abort):
            raise trip(b, eff)
        if isinstance(eff, Replace):
            st.ml = eff.value


def _step(
    rc: RunConfig, st: RunState, step: int, base: StepSettings
) -> Generator[LoopCommand, object, StepOutcome]:
    """One step, and what comes after it (see `StepOutcome`)."""
    cfg = (yield from input_step(rc, st, step, base)) if rc.h_input_step else base
    if rc.bare_stream:  # no stream hook: loop-made chunks go out as they are
        st.pending.append(StepStart(step))
    else:
        yield from stream_through(rc, st, [StepStart(step)])
    so = cfg.structured_output
    # (inline `fallback.plain_step`: a call less on a path that runs once per step)
    if cfg.fallback is None and (so is None or so.__class__ is not TypedOutput or not so.partial):
        # The step's first model call is asked here, not in a `call_model` generator:
        # one generator fewer alive per run while the model answers (docs/DESIGN.md,
        # decisions made for speed); a failed call is retried by `call_model`.
        out, ask = ask_model(st, step, cfg, 0)
        if out is not None:
            if (got := (yield out)) is not None:
                raise ProtocolError(out, got)
            del out
        first_reply = yield ask
        if answered(st, ask, first_reply):
            content = StepContent()
        else:
            assert type(first_reply) is ModelFailed
            content, first_reply = yield from call_model(rc, st, step, cfg, None, first_reply)
        del ask
        try:
            if st.racing:  # input guards still running: hold the model's events (race.py)
                first_reply, held, ended = yield from race_gate(rc, st, first_reply)
                yield from feed(consume(rc, st, step, content, first_reply), held, ended)
            else:
                yield from consume(rc, st, step, content, first_reply)
        except (Tripped, Failed, HookFailure, RunCancelled):
            count_stopped(rc, st, cfg.model, content.finish)
            raise
    else:  # fallback models, or typed partial output (fallback.py)
        content, cfg = yield from attempts(rc, st, step, cfg)
    fin = content.finish
    assert fin is not None
    # Every response the model sent was billed, also one a processor discards.
    st.usage = st.usage + fin.usage
    parts = content.message_parts(complete=True)
    if st.held:  # data hooks emitted for this step before the response came
        parts = (*st.held, *parts)
        st.held = ()
    response = loop_message(rc, st, "assistant", parts)
    response_id = response.id
    call_cost = (
        price_call(rc, st, cfg.model, fin, response.created_at) if rc.price is not None else None
    )
    before = st.ml
    st.ml = added = before._add_one(response, "response") if parts else before
    tool_calls = tuple(content.tool_calls)
    if not tool_calls:  # no new tool-call id (with calls: `run_tools` notes the turn)
        st.call_ids.grew(before, added, ())
    text = content.text if content.texts else ""  # (no property call for a calls-only reply)
    try:
        keep = (
            (yield from output_step(rc, st, step, cfg, tool_calls, text, fin, before))
            if rc.h_output_step else True
        )
    except (HookFailure, RunCancelled):
        # Fail closed: a response whose check crashed, or was cancelled (a timeout)
        # before every processor approved it, is not kept.
        st.ml = before
        raise
    if not keep:
        return "rerun"
    st.finish_reason = fin.finish_reason
    if content.leaving:  # calls the stream processors passed on changed: what leaves
        st.leaving.calls_changed(content.leaving)
    # Tools run for the calls still present in the (possibly replaced) response.
    own = st.ml is added and bool(parts)  # no processor replaced the messages
    if own:
        kept: Message | None = response
        calls = tool_calls
    else:
        kept = _last_with_id(st.ml.messages, response_id)
        if kept is not None:
            kept = unforged(st, kept)
        calls = kept.tool_calls() if kept is not None else ()
    if st.held and kept is not None:  # data process_output_step emitted: its answer's
        keep_held(rc, st)
    results: tuple[ToolResultPart, ...] = ()
    if calls:
        try:
            results = yield from run_tools(
                rc, st, calls,
                # (`step_tools` inline when no step narrowed them: a call less a step)
                cfg.tools if cfg.active_tools is None else step_tools(cfg),
                (before, added) if own else None,
            )
        except Suspend as s:  # the step goes on when the run is resumed
            s.step = StepResult(
                step_number=step, model=cfg.model, text=text,
                reasoning=content.reasoning_text, tool_calls=st.leaving.calls_out(calls),
                tool_results=(),
                sources=tuple(p for p in response.parts if isinstance(p, SourcePart)),
                finish_reason=fin.finish_reason, usage=fin.usage, cost=call_cost,
                attempts=content.attempts,
            )
            s.tools = step_tools(cfg)
            raise
    elif isinstance(cfg.structured_output, TypedOutput):
        # (the kept reply is checked; the step's `text` stays the model's, as without one)
        reply = kept.text if kept is not None else ""
        if not (yield from check_output(rc, st, step, cfg.structured_output, reply, before)):
            return "rerun"
    st.steps += (
        StepResult(
            step_number=step,
            model=cfg.model,
            text=text,
            reasoning=content.reasoning_text if content.reasoning else "",
            tool_calls=st.leaving.calls_out(calls) if st.leaving.calls else calls,
            tool_results=results,
            sources=(
                tuple(p for p in response.parts if isinstance(p, SourcePart))
                if content.sources else ()
            ),
            finish_reason=fin.finish_reason,
            usage=fin.usage,
            cost=call_cost,
            attempts=content.attempts,
        ),
    )
    if rc.bare_stream:
        st.pending.append(StepFinish(step, fin.finish_reason, fin.usage))
    else:
        yield from stream_through(rc, st, [StepFinish(step, fin.finish_reason, fin.usage)])
    if st.tree is not None and st.tree.answer is not None:  # handed over: its answer
        yield from answer_of_handoff(rc, st)
        return "stop"
    return "next" if calls else "stop"


def _resumed_step(
    rc: RunConfig, st: RunState, step: StepResult, resume: Resumption
) -> Generator[LoopCommand, object, None]:
    """A suspended step's tools, as decided, and the end of that step."""
    try:
        calls, results = yield from run_resumed(rc, st, resume)
    except Suspend as s:  # a child of the step waits again: the step goes on later
        s.step = step
        s.tools = tuple(resumed_tools(rc.agent, resume).values())
        raise
    st.steps += (msgspec.structs.replace(step, tool_calls=calls, tool_results=results),)
    finish = StepFinish(step.step_number, step.finish_reason, step.usage)
    if rc.bare_stream:
        st.pending.append(finish)
    else:
        yield from stream_through(rc, st, [finish])
    if st.tree is not None and st.tree.answer is not None:  # handed over: its answer
        yield from answer_of_handoff(rc, st)
        raise _HandedOver


class _HandedOver(Exception):
    """A resumed step handed the conversation over: no step follows it."""


def _suspension(rc: RunConfig, st: RunState, s: Suspend) -> Suspension:
    """What a suspended run keeps to go on (`pipeline.approval`)."""
    assert s.step is not None
    return Suspension(
        run_id=rc.ctx.run_id, agent_digest=agent_digest(rc.agent), pending=s.pending,
        calls=s.calls, messages=st.ml, step=s.step, steps=st.steps,
        states=tuple(st.states), ids_used=st.ids.used, retry_count=st.retry_count,
        processor_ids=tuple(p.id for p in rc.agent.all_processors()),
        spent=spending(rc, st),
        leaving_calls=tuple(st.leaving.calls.values()) if st.leaving.calls else (),
        thread_id=rc.ctx.thread_id, resource_id=rc.ctx.resource_id,
        tools=offered_tools(s.tools),
        started_at=rc.started_at,
        gate_states=s.gate_states,
    )


def _last_with_id(messages: tuple[Message, ...], message_id: str) -> Message | None:
    """The last message with this id. (A helper, not a generator expression in `_step`:
    that would make `_step` keep a closure cell alive per run across its waits.)"""
    for m in reversed(messages):
        if m.id == message_id:
            return m
    return None
