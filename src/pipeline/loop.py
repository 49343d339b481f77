"""The agent loop: a pure state machine that yields commands and is sent their replies.

`agent_loop(...)` returns a generator. An interpreter drives it:

    cmd = next(gen)
    while not isinstance(cmd, Done):
        cmd = gen.send(reply_to(cmd))      # or gen.throw(exc) when carrying it out failed

To cancel a run, an interpreter throws `RunCancelled(reason)` in at the pending command
(`cmd = gen.throw(RunCancelled("timeout"))`): the loop then yields only `Publish` and
`Done`, so it finishes with no further I/O (see `RunCancelled`).

Nothing here does I/O or reads a clock: ids come from `Ids`, time from the `clock`
the interpreter hands in. So one agent, input and model script always give one run.

Order of a run: process_input once; then per step: process_input_step (+ prepare_step
last), the model call (transient failures retried by the RetryPolicy, rejections offered
to process_api_error), every streamed chunk through process_output_stream,
process_output_step (which may discard the response and retry), tools; finally
process_output_result. See docs/DESIGN.md for the contract.

Each phase is a function over the run's configuration and state, `(rc, st, ...)`, in
the module of its phase:
- protocol.py: the commands, replies and records an interpreter deals in;
- step_config.py: process_input_step (+ prepare_step) and the model request;
- stream_stage.py: process_output_stream, the per-chunk path (stream_view.py: stream_parts);
- response.py: what one model response delivered, and the run's response text;
- run_state.py: the run's configuration (`RunConfig`, fixed when it starts) and state
  (`RunState`, what changes), and how a hook outcome is kept;
- call_ids.py: tool-call ids unique across the run;
- here: the run itself, process_input, the model call and process_api_error,
  process_output_step, tools, process_output_result, and cancellation.
This module re-exports the names interpreters import from it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator
from operator import attrgetter
from typing import TYPE_CHECKING, Literal, NamedTuple, cast

import msgspec

from effects import (
    Abort,
    CallModel,
    CloseStream,
    Continue,
    Done,
    Publish,
    Pull,
    Replace,
    Retry,
    RunTools,
    Sleep,
)
from pipeline.agent import Agent
from pipeline.call_ids import call_ids, fresh_call_id, note_call_ids, unforged
from pipeline.chunks import (
    Chunk,
    DataChunk,
    ErrorChunk,
    ModelFinish,
    StepFinish,
    StepStart,
    ToolCall,
    ToolCallDelta,
    ToolError,
    ToolResult,
    Tripwire,
)
from pipeline.chunks import Finish as FinishChunk
from pipeline.cost import Cost, PriceQuery, Pricer
from pipeline.hooks import Bound, HookFailure, bind, call_hook, raised, settle
from pipeline.judge_ledger import JudgeLedger
from pipeline.messages import (
    DataPart,
    Message,
    MessageList,
    Part,
    SourcePart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from pipeline.model import ApiError, ModelEnded, ModelFailed, ModelRequest
from pipeline.output_type import OutputDecodeError, TypedOutput
from pipeline.processor import (
    ApiErrorArgs,
    BaseProcessor,
    InputArgs,
    OutputResultArgs,
    OutputStepArgs,
    RunContext,
    StepSettings,
)
from pipeline.protocol import (
    MODEL_REPLY_TYPES,
    AgentLoop,
    EffectRecord,
    EffectRecorder,
    LoopCommand,
    ModelReply,
    ProtocolError,
    RunCancelled,
    ToolInvocation,
    ToolOutcome,
    checked,
)
from pipeline.response import StepContent, response_text
from pipeline.result import (
    ApiFailed,
    Cancelled,
    JudgeCall,
    OutputInvalid,
    OutputResult,
    ProcessorFailed,
    RunError,
    RunResult,
    Status,
    StepResult,
    StreamFailed,
)
from pipeline.run_state import (
    Failed,
    Ids,
    RunConfig,
    RunState,
    Tripped,
    apply,
    keep_held,
    steps_tuple,
    trip,
)
from pipeline.step_config import base_settings, input_step, model_request, step_tools
from pipeline.stream_stage import (
    deliver,
    flush,
    flush_io,
    fresh_seen,
    plan_stream,
    process_chunk,
    process_chunk_io,
    stream_through,
)
from pipeline.tool_context import ToolContext, ToolWriter, deps_mismatch
from pipeline.tools import Tool, tool_result, unencodable
from pipeline.validate import check_messages, rejected

StepOutcome = Literal["next", "stop", "rerun"]
"""After a step: "next" (tools ran: the model sees their results), "stop" (a final
answer), "rerun" (a processor or the output type discarded the response: run the step
again, with the feedback)."""

_OUTPUT_TYPE = "output_type"
"""Who discarded a reply that did not decode (in feedback and data-step-discarded)."""

__all__ = [
    "AgentLoop",
    "EffectRecord",
    "Ids",
    "LoopCommand",
    "ModelReply",
    "ProtocolError",
    "EffectRecorder",
    "RunCancelled",
    "ToolInvocation",
    "ToolOutcome",
    "agent_loop",
]


def agent_loop(
    agent: Agent,
    messages: MessageList,
    *,
    context: RunContext,
    clock: Callable[[], float] = lambda: 0.0,
    record: EffectRecorder | None = None,
    price: Pricer | None = None,
) -> AgentLoop:
    """The run of `agent` on `messages`, as a command generator. See the module doc.

    `price` prices each model call (`pipeline.cost`): the result then carries its cost.
    Messages that are not a conversation the library can send (wrong types, an unknown
    role...) fail the run at once with `InvalidInput`, before any call.
    """
    used: set[str] = set()
    invalid = check_messages(messages, used)
    if invalid is not None:
        return rejected(invalid)
    rc, st = _start(agent, messages, context, clock, record, price, used)
    return _run(rc, st)


def _start(
    agent: Agent,
    messages: MessageList,
    context: RunContext,
    clock: Callable[[], float],
    record: EffectRecorder | None,
    price: Pricer | None,
    used: set[str],
) -> tuple[RunConfig, RunState]:
    """The run's configuration and its state at the start (`used`: the input's tool-call
    ids, known from checking it)."""
    procs = agent.all_processors()
    judges: JudgeLedger | None = None
    if procs or agent.prepare_step is not None:
        judges = JudgeLedger()
        states, hooks = _bind_hooks(agent, procs, judges)
    else:  # no hook at all: nothing to bind (W4 of bench/: on the path of every run)
        states, hooks = [], _NO_HOOKS
    plan = plan_stream(agent, hooks.stream, hooks.flush)
    rc = RunConfig(
        agent=agent,
        ctx=context,
        clock=clock,
        record=record,
        price=price,
        h_input=hooks.input,
        h_input_step=hooks.input_step,
        h_error=hooks.error,
        h_stream=hooks.stream,
        h_output_step=hooks.output_step,
        h_result=hooks.result,
        h_flush=plan.h_flush,
        stream_io=plan.stream_io,
        stream_plan=plan.stream_plan,
        data_all=plan.data_all,
        data_any=plan.data_any,
        bare_stream=not hooks.stream and not plan.stream_io,
    )
    return rc, _start_state(rc, messages, states, used, judges)


class _Hooks(NamedTuple):
    """An agent's hooks, bound to their processors' state slots, per hook point."""

    input: tuple[Bound, ...] = ()
    input_step: tuple[Bound, ...] = ()
    error: tuple[Bound, ...] = ()
    stream: tuple[Bound, ...] = ()
    flush: tuple[Bound, ...] = ()
    output_step: tuple[Bound, ...] = ()
    result: tuple[Bound, ...] = ()


_NO_HOOKS = _Hooks()


def _bind_hooks(
    agent: Agent, procs: tuple[BaseProcessor, ...], judges: JudgeLedger
) -> tuple[list[object], _Hooks]:
    """The processors' initial states (by slot) and their bound hooks; `prepare_step`
    runs last among the input-step hooks, with a slot of its own. The model calls the
    hooks ask for are counted in `judges`."""
    slots = {id(p): i for i, p in enumerate(procs)}
    states = [p.initial_state() for p in procs]
    fns = {id(p): p.hook_functions() for p in procs}  # once per processor, not per hook
    inp, out = agent.input_processors, agent.output_processors
    input_step = bind(inp, "process_input_step", slots, fns, judges)
    if agent.prepare_step is not None:
        prep = BaseProcessor()
        prep.id = "prepare_step"
        states.append(None)
        input_step += (
            Bound(prep, "prepare_step", "process_input_step", agent.prepare_step,
                  len(states) - 1, False, judges),
        )
    return states, _Hooks(
        input=bind(inp, "process_input", slots, fns, judges),
        input_step=input_step,
        error=bind(agent.error_processors, "process_api_error", slots, fns, judges),
        stream=bind(out, "process_output_stream", slots, fns, judges),
        flush=bind(out, "flush_output_stream", slots, fns, judges),
        output_step=bind(out, "process_output_step", slots, fns, judges),
        result=bind(out, "process_output_result", slots, fns, judges),
    )


def _start_state(
    rc: RunConfig, messages: MessageList, states: list[object], used: set[str],
    judges: JudgeLedger | None,
) -> RunState:
    """The run's state at the start (`_start`)."""
    agent, price = rc.agent, rc.price
    # The agent's instructions first, then the caller's system messages; a previous
    # run's (tagged) instructions in the input are replaced, not repeated.
    ml = messages.with_instructions(agent.instructions)
    if "response" in ml.sources:
        # A previous run's answer is this run's memory: `response` (the result's text,
        # what process_output_result sees and may drop) is only what this run adds.
        ml = MessageList(
            ml.messages,
            tuple("memory" if s == "response" else s for s in ml.sources),
            ml.system,
        )
    seen, shared = fresh_seen(rc)
    st = RunState(
        Ids(rc.ctx.run_id), ml, states,
        cost_known=price is not None, seen=seen, shared=shared, ids_used=used,
        judges=judges,
    )
    if not used:  # the check read every part and found no tool call or result
        st.pairing.known_paired(ml)
    return st


# --- the run: each phase a function over the run's configuration and state ----------------


def _run(rc: RunConfig, st: RunState) -> AgentLoop:
    """The whole run; the phases that ask the interpreter are its sub-generators."""
    status_error: RunError | None = None
    tripwire: Tripwire | None = None
    before_result: MessageList | None = None  # the messages the result processors got
    try:
        yield from _process_input(rc, st)
        base = base_settings(rc, st.ml.system)
        step = 0
        while step < rc.agent.max_steps:
            outcome = yield from _step(rc, st, step, base)
            if outcome == "rerun":  # discarded by a processor retry: run it again
                continue
            step += 1
            if outcome == "stop":
                break
        before_result = st.ml
        yield from _process_output_result(rc, st)
        # Inside the try: a stream processor may abort (or fail) on the finish chunk too.
        yield from stream_through(rc, st, [FinishChunk(st.finish_reason, st.usage)])
    except Tripped as t:
        tripwire = t.tripwire
    except Failed as f:
        status_error = f.error
    except HookFailure as h:
        status_error = ProcessorFailed(h.processor_id, h.hook, h.error_type, h.message)
    except RunCancelled as c:
        status_error = Cancelled(c.reason)
        _answer_dangling_calls(rc, st, c.reason)

    status: Status
    if tripwire is not None:
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
    judges, cost = _run_cost(rc, st)
    result = RunResult(
        status=status,
        text=response_text(st.ml),
        messages=_leaving_messages(st, before_result) if st.leaving else st.ml,
        steps=steps_tuple(st),
        usage=st.usage,
        finish_reason=st.finish_reason,
        tripwire=tripwire,
        error=status_error,
        retry_count=st.retry_count,
        api_error_retry_count=st.api_retry_count,
        output=st.output if status == "finished" else None,
        cost=cost,
        judges=judges,
        unmetered_calls=st.unmetered,
    )
    if st.pending:
        out: Publish[Chunk] = Publish(tuple(st.pending))
        try:  # (not contextlib.suppress: a context manager object every run)  # noqa: SIM105
            checked(out, (yield out))
        except RunCancelled:
            pass  # the run is over already: a cancel now changes nothing in its result
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
    content, first_reply = yield from _call_model(rc, st, step, cfg)
    try:
        yield from _consume(rc, st, step, content, first_reply)
    except (Tripped, Failed, HookFailure, RunCancelled):
        _count_stopped(rc, st, cfg.model, content.finish)
        raise
    fin = content.finish
    assert fin is not None
    # Every response the model sent was billed, also one a processor discards.
    st.usage = st.usage + fin.usage
    response_id = st.ids.next("msg")
    parts = content.message_parts(complete=True)
    if st.held:  # data hooks emitted for this step before the response came
        parts = (*st.held, *parts)
        st.held = []
    ctx = rc.ctx
    response = Message(
        id=response_id,
        role="assistant",
        parts=parts,
        created_at=rc.clock(),
        thread_id=ctx.thread_id,
        resource_id=ctx.resource_id,
    )
    call_cost = (
        _price(rc, st, cfg.model, fin, response.created_at) if rc.price is not None else None
    )
    before = st.ml
    st.ml = added = before._add_one(response, "response") if parts else before
    tool_calls = tuple(content.tool_calls)
    if not tool_calls and st.ids_of is before:
        st.ids_of = added  # no new tool-call id (with calls: `_run_tools` notes the turn)
    text = content.text
    try:
        keep = (
            (yield from _output_step(rc, st, step, cfg, tool_calls, text, fin, before))
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
        results = yield from _run_tools(
            rc, st, calls, step_tools(cfg), (before, added) if own else None
        )
    elif isinstance(cfg.structured_output, TypedOutput):
        # (the kept reply is checked; the step's `text` stays the model's, as without one)
        reply = kept.text if kept is not None else ""
        if not (yield from _check_output(rc, st, step, cfg.structured_output, reply, before)):
            return "rerun"
    st.steps.append(
        StepResult(
            step_number=step,
            model=cfg.model,
            text=text,
            reasoning=content.reasoning_text,
            tool_calls=calls,
            tool_results=results,
            sources=(
                tuple(p for p in response.parts if isinstance(p, SourcePart))
                if content.sources else ()
            ),
            finish_reason=fin.finish_reason,
            usage=fin.usage,
            cost=call_cost,
        )
    )
    if rc.bare_stream:
        st.pending.append(StepFinish(step, fin.finish_reason, fin.usage))
    else:
        yield from stream_through(rc, st, [StepFinish(step, fin.finish_reason, fin.usage)])
    return "next" if calls else "stop"


def _count_stopped(rc: RunConfig, st: RunState, model: str, fin: ModelFinish | None) -> None:
    """A model call the run stopped during (a processor's abort or crash, a cancel, a
    broken stream) was made all the same: its usage counts if the provider reported it
    (the response had ended), else the call is unmetered and the run's cost unknown."""
    if fin is not None:
        st.usage = st.usage + fin.usage
        if rc.price is not None:  # (no clock read: see `judge_ledger`)
            _price(rc, st, model, fin, _last_time(st))
    else:
        st.unmetered += 1
        st.cost_known = False


def _last_time(st: RunState) -> float:
    """The run's latest clock value without reading the clock: its last message's."""
    messages = st.ml.messages
    return messages[-1].created_at if messages else 0.0


def _run_cost(rc: RunConfig, st: RunState) -> tuple[tuple[JudgeCall, ...], Cost | None]:
    """The run's judge calls, priced, and its cost: the agent's calls and the judges',
    or None if one of them is unknown."""
    if st.judges is None or not st.judges.asked:
        return (), st.cost if st.cost_known else None
    judges, known = st.judges.calls(rc.price, _last_time(st))
    if not (st.cost_known and known):
        return judges, None
    cost = st.cost
    for j in judges:
        if j.cost is not None:
            cost = j.cost if cost is None else cost + j.cost
    return judges, cost


def _price(rc: RunConfig, st: RunState, model: str, fin: ModelFinish, at: float) -> Cost | None:
    """This call's cost; an unknown model makes the run's cost unknown for good."""
    if rc.price is None:
        return None
    try:
        c = rc.price(PriceQuery(model, fin.model_id, fin.usage, at))
    except Exception:
        c = None  # a pricer that fails knows no price: no cost, never a wrong one
    if c is None:
        st.cost_known = False
    elif st.cost_known:
        st.cost = c if st.cost is None else st.cost + c
    return c


def _output_step(
    rc: RunConfig,
    st: RunState,
    step: int,
    cfg: StepSettings,
    tool_calls: tuple[ToolCallPart, ...],
    text: str,
    fin: ModelFinish,
    before: MessageList,
) -> Generator[LoopCommand, object, bool]:
    """process_output_step over the response just added (its calls and text): False when
    a processor discarded it for a retry (the feedback is then added after `before`)."""
    record = rc.record
    steps = steps_tuple(st)
    for b in rc.h_output_step:
        args = OutputStepArgs(
            message_list=st.ml,
            step_number=step,
            steps=steps,
            finish_reason=fin.finish_reason,
            tool_calls=tool_calls,
            text=text,
            system_messages=cfg.system_messages,
            state=st.states[b.slot],
            retry_count=st.retry_count,
            context=rc.ctx,
        )
        try:  # `invoke`, inline: a call less per hook
            raw = b.fn(args)
        except Exception as e:
            raw = raised(b, e)
        if raw.__class__ is Continue and record is None:
            continue  # a pass-through: nothing to check, keep or record
        eff = apply(rc, st, b, (yield from settle(b, raw)))
        if isinstance(eff, Abort):
            if eff.retry and st.retry_count < rc.agent.max_processor_retries:
                st.retry_count += 1
                feedback = Message(
                    id=st.ids.next("feedback"),
                    role="user",
                    parts=(TextPart(eff.reason),),
                    created_at=rc.clock(),
                    thread_id=rc.ctx.thread_id,
                    resource_id=rc.ctx.resource_id,
                    metadata={"feedback_from": b.processor_id, "retry": st.retry_count},
                )
                # Feedback goes after the conversation so a prompt cache stays valid.
                st.ml = before.add(feedback, "context")
                yield from stream_through(rc, st,
                    [DataChunk("data-step-discarded", {
                        "step_number": step,
                        "processor_id": b.processor_id,
                        "reason": eff.reason,
                        "retry_count": st.retry_count,
                    }, transient=True)]
                )
                return False
            st.ml = before  # a blocked response is not kept (as in output_result)
            raise trip(b, eff)
        if isinstance(eff, Replace):
            st.ml = eff.value
    return True


def _check_output(
    rc: RunConfig, st: RunState, step: int, typed: TypedOutput, text: str, before: MessageList
) -> Generator[LoopCommand, object, bool]:
    """Decode a final reply into the output type: False when it did not decode and
    goes back to the model as feedback (as a processor's retry does); OutputInvalid
    once the retries are spent (the invalid reply is then not kept)."""
    try:
        st.output = typed.decode(text)
        return True
    except OutputDecodeError as e:
        problem = str(e)
    if st.retry_count >= rc.agent.max_processor_retries:
        st.ml = before
        raise Failed(OutputInvalid(step, problem, text, st.retry_count + 1))
    st.retry_count += 1
    reason = (
        f"Your reply does not match the {typed.name} JSON schema: {problem}. "
        "Reply again with only a JSON value that matches the schema."
    )
    feedback = Message(
        id=st.ids.next("feedback"),
        role="user",
        parts=(TextPart(reason),),
        created_at=rc.clock(),
        thread_id=rc.ctx.thread_id,
        resource_id=rc.ctx.resource_id,
        metadata={"feedback_from": _OUTPUT_TYPE, "retry": st.retry_count},
    )
    st.ml = before.add(feedback, "context")
    yield from stream_through(rc, st,
        [DataChunk("data-step-discarded", {
            "step_number": step,
            "processor_id": _OUTPUT_TYPE,
            "reason": reason,
            "retry_count": st.retry_count,
        }, transient=True)]
    )
    return False


def _last_with_id(messages: tuple[Message, ...], message_id: str) -> Message | None:
    """The last message with this id. (A helper, not a generator expression in `_step`:
    that would make `_step` keep a closure cell alive per run across its waits.)"""
    for m in reversed(messages):
        if m.id == message_id:
            return m
    return None


def _call_model(
    rc: RunConfig, st: RunState, step: int, cfg: StepSettings
) -> Generator[LoopCommand, object, tuple[StepContent, object]]:
    """Call the model until it starts streaming, retrying what may be retried.

    Returns the stream's first event: a model event other than ModelFailed (checked
    here; `_consume` reads it as it reads every event, by its class)."""
    transient = 0
    attempts = 0
    while True:
        request = model_request(st, cfg)
        attempts += 1
        if st.pending:
            # (no local keeps the chunks alive while the model call waits: one object
            # fewer per run for the garbage collector, W4 of bench/WORKLOADS.md)
            out: Publish[Chunk] = Publish(tuple(st.pending))
            st.pending = []
            if (got := (yield out)) is not None:
                raise ProtocolError(out, got, "None")
            del out
        # The replies of the commands every step asks are checked inline, as `checked`
        # does: a call less per command on a path that runs once per step.
        ask: CallModel[ModelRequest, ModelReply] = CallModel(request, step, attempts - 1)
        reply = yield ask
        if type(reply) not in MODEL_REPLY_TYPES:
            raise ProtocolError(ask, reply, "a model event (ModelReply)")
        if not isinstance(reply, ModelFailed):
            return StepContent(), reply
        err = reply.error
        policy = rc.agent.retry_policy
        if err.retryable:
            if transient < policy.max_retries and policy.waits(err.retry_after):
                delay = policy.delay(transient, f"{rc.ctx.run_id}:{step}", err.retry_after)
                transient += 1
                wait = Sleep(delay, f"retrying after {err}")
                checked(wait, (yield wait))
                continue
            raise Failed(ApiFailed(step, err, attempts))
        recovered = yield from _api_error(rc, st, step, err)
        if not recovered:
            raise Failed(ApiFailed(step, err, attempts))


def _api_error(
    rc: RunConfig, st: RunState, step: int, err: ApiError
) -> Generator[LoopCommand, object, bool]:
    """Offer a rejection to the error processors; the first Retry wins."""
    if st.api_retry_count >= rc.agent.max_api_error_retries:
        return False
    for b in rc.h_error:
        args = ApiErrorArgs(
            error=err,
            message_list=st.ml,
            step_number=step,
            steps=steps_tuple(st),
            state=st.states[b.slot],
            retry_count=st.api_retry_count,
            context=rc.ctx,
        )
        eff = apply(rc, st, b, (yield from call_hook(b, args)))
        if isinstance(eff, Abort):
            raise trip(b, eff)
        if isinstance(eff, Retry):
            if eff.value is not None:
                st.ml = eff.value
            st.api_retry_count += 1
            return True
    return False


def _consume(
    rc: RunConfig, st: RunState, step: int, content: StepContent, first: object
) -> Generator[LoopCommand, object, None]:
    """Run the model's stream through the stream processors until ModelFinish.

    The per-chunk hot path: each Pull's reply is checked here, inline (a set lookup on
    its class), not through `checked`; an isinstance that misses costs more.
    """
    stream = rc.h_stream
    io = rc.stream_io
    got: object = first  # checked by `_call_model`
    pull: Pull[Chunk, ModelReply] | None = None
    ended = False  # the stream handed over its last event: the interpreter closed it
    try:
        while True:
            t = type(got)
            if t not in _CHUNK_EVENTS:
                ended = isinstance(got, _ENDS)
                if isinstance(got, ModelFinish):
                    # (set first: a flush hook that stops the run leaves the call counted)
                    content.finish = got
                    if rc.h_flush:  # release what processors hold, before the message
                        if io:
                            yield from flush_io(rc, st, content)
                        else:
                            flush(rc, st, content)
                    return
                if isinstance(got, ModelFailed | ModelEnded):
                    _keep_partial(rc, st, content)
                    err = got.error if isinstance(got, ModelFailed) else None
                    msg = (
                        str(err) if err is not None
                        else "stream ended before the model finished"
                    )
                    raise Failed(StreamFailed(step, msg, err))
                assert pull is not None
                raise ProtocolError(pull, got, "a model event (ModelReply)")
            # A model event other than the three above: a chunk (the check just made).
            # `cast` is a call that costs 5% of this path: only the type checker sees it.
            if TYPE_CHECKING:
                chunk = cast(Chunk, got)
            else:
                chunk = got
            if t is ToolCall or t is ToolCallDelta:
                assert isinstance(chunk, _CALLS)
                chunk = _unique_call(rc, st, chunk, content)
            if io:
                yield from process_chunk_io(rc, st, chunk, content)
            elif stream:
                process_chunk(rc, st, chunk, content)
            elif not st.pending:  # no stream hooks, nothing else to hand out first
                content.add(chunk)
                pull = Pull((chunk,))
                got = yield pull
                continue
            else:
                deliver(st, chunk, content)
            out = tuple(st.pending)
            st.pending = []
            pull = Pull(out)
            got = yield pull
    except RunCancelled:
        # What already passed every processor is kept, marked incomplete. The
        # interpreter closes the stream itself when it cancels (no I/O after a cancel).
        _keep_partial(rc, st, content)
        raise
    except HookFailure:
        # A stream processor crashed: kept as for a cancel (the crashing chunk and
        # later ones are not); the stream is closed.
        _keep_partial(rc, st, content)
        if not ended:
            yield from _close_stream()
        raise
    except Tripped:
        if not ended:  # a stream processor aborted mid-stream
            yield from _close_stream()
        raise


def _unique_call(
    rc: RunConfig, st: RunState, call: ToolCall | ToolCallDelta, content: StepContent
) -> ToolCall | ToolCallDelta:
    """A call with an empty id, or one this response already used, gets a fresh id,
    its deltas too: results are matched to calls by id (some servers send `call_0`
    for every call)."""
    cid = call.tool_call_id
    fresh = content.renamed.get(cid) if content.renamed else None
    if fresh is None:
        used = st.ids_used if st.ids_of is st.ml else call_ids(st)  # `call_ids`, inline
        if cid and cid not in used and (
            not content.tool_calls or all(c.tool_call_id != cid for c in content.tool_calls)
        ):
            return call
        fresh = content.renamed[cid] = fresh_call_id(st, used, content)
    if isinstance(call, ToolCall):
        del content.renamed[cid]  # the call is complete: a later reuse is a new call
        return ToolCall(fresh, call.tool_name, call.args)
    return ToolCallDelta(fresh, call.tool_name, call.args_delta)


def _answer_dangling_calls(rc: RunConfig, st: RunState, reason: str) -> None:
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
        st.ml = st.ml.add(
            Message(
                id=st.ids.next("msg"),
                role="tool",
                parts=parts,
                created_at=rc.clock(),
                thread_id=rc.ctx.thread_id,
                resource_id=rc.ctx.resource_id,
            ),
            "response",
        )
        st.pending.extend(
            ToolError(p.tool_call_id, p.tool_name, str(p.result)) for p in parts
        )


def _keep_partial(rc: RunConfig, st: RunState, content: StepContent) -> None:
    """A broken stream: keep what arrived, marked incomplete, with no tool call.

    Not when process_output_step processors exist: they never approved it (fail closed).
    """
    parts = content.message_parts(complete=False)
    if parts and not rc.h_output_step:
        st.ml = st.ml.add(
            Message(
                id=st.ids.next("msg"),
                role="assistant",
                parts=parts,
                created_at=rc.clock(),
                thread_id=rc.ctx.thread_id,
                resource_id=rc.ctx.resource_id,
                incomplete=True,
            ),
            "response",
        )


def _run_tools(
    rc: RunConfig,
    st: RunState,
    calls: tuple[ToolCallPart, ...],
    tools: tuple[Tool, ...],
    turn: tuple[MessageList, MessageList] | None,
) -> Generator[LoopCommand, object, tuple[ToolResultPart, ...]]:
    """Run the calls; their results go into one tool message. `turn`: the messages before
    the loop's own response and with it, when `calls` are that response's calls and
    nothing replaced it (the pairing check and the call ids then trust the turn)."""
    if tools is not st.by_name_of:
        st.by_name_of, st.by_name = tools, {t.name: t for t in tools}
    by_name = st.by_name
    ctx = rc.ctx
    invocations: list[ToolInvocation] = []
    writers: list[ToolWriter] | None = None  # made at the first tool that may write
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
            w = ToolWriter()
            if writers is None:
                writers = [w]
            else:
                writers.append(w)
            kwargs[t.context_param] = ToolContext(
                deps=ctx.deps, run=ctx, tool_call_id=c.tool_call_id,
                tool_name=c.tool_name, writer=w,
            )
        invocations.append(ToolInvocation(c, t, kwargs))
    publish = tuple(st.pending)
    st.pending = []
    if publish:
        out: Publish[Chunk] = Publish(publish)
        if (got := (yield out)) is not None:
            raise ProtocolError(out, got, "None")
    run: RunTools[ToolInvocation, ToolOutcome] = RunTools(tuple(invocations))
    try:
        got = yield run
    except RunCancelled as c:
        _keep_finished_tools(rc, st, calls, c)
        raise
    finally:
        written = tuple(w.close() for w in writers) if writers is not None else ()
    # One ToolOutcome per call, in order (as `checked` does, inline); the invocations are
    # the loop's own.
    if type(got) is not tuple or len(got) != len(calls):
        raise ProtocolError(run, got, "one ToolOutcome per call, in order")
    outcome_t = ToolOutcome
    parts_l: list[ToolResultPart] = []
    for call, o in zip(calls, got, strict=True):  # lengths checked above
        if not (
            (type(o) is outcome_t or isinstance(o, outcome_t))
            and o.tool_call_id == call.tool_call_id
        ):
            raise ProtocolError(run, got, "one ToolOutcome per call, in order")
        r = o.result
        cap = _result_cap(rc, by_name.get(call.tool_name))
        if (
            (type(r) is str and r.isascii() and len(r) <= (cap - 2) // 6)
            or r is None or type(r) is bool
        ):
            # JSON as it is (an ASCII str has no lone surrogate), and short enough that
            # even all escapes (6 bytes a character) keep it under the cap
            parts_l.append(ToolResultPart(call.tool_call_id, call.tool_name, r, o.is_error))
        else:
            parts_l.append(_result_part(call, r, o.is_error, cap))
    parts = tuple(parts_l)
    # What the tools wrote, per call in call order, through the stream processors;
    # non-transient chunks that pass are kept with the results.
    data: tuple[DataPart, ...] = ()
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
        _tool_message(rc, st, (*parts, *data) if data else parts), "response"
    )
    if turn is not None and before is turn[1]:
        # The loop's own turn: its response (these calls, no result, parts of the
        # library's own kinds), then this message answering each call once, in order.
        ids = (calls[0].tool_call_id,) if len(calls) == 1 else tuple(map(_call_id, calls))
        if st.ids_of is turn[0]:
            st.ids_used.update(ids)
            st.ids_of = after
        st.pairing.turn(turn[0], after, ids)
    else:
        note_call_ids(st, before, parts)
    results = [_result_chunk(p) for p in parts]
    if rc.bare_stream:
        st.pending.extend(results)
        return parts
    sent = len(st.pending)
    try:
        yield from stream_through(rc, st, results)
    except (Tripped, HookFailure, RunCancelled) as stop:
        _approved(st, parts, results, sent, f"tool result withheld: {_why_stopped(stop)}")
        raise
    return _approved(st, parts, results, sent)


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


def _approved(
    st: RunState,
    parts: tuple[ToolResultPart, ...],
    results: list[Chunk],
    sent: int,
    stopped: str | None = None,
) -> tuple[ToolResultPart, ...]:
    """The tool results as they leave the run: what the stream processors made of each
    result's chunk (`st.pending[sent:]`, what they passed on). The step keeps these; the
    run's messages get them at its end (`_leaving_messages`), while the model reads the
    results as the tools returned them (unless an input processor changes its history).
    A result whose chunk was dropped, not replaced, keeps its value: dropping hides it
    from the stream only. When the run `stopped` while they went through (a processor
    blocked, failed, a cancel), each result not passed on leaves as an error saying so
    (fail closed: no processor approved it; the history stays paired)."""
    passed = st.pending[sent:]
    if stopped is None and len(passed) >= len(results) and all(
        c is r for c, r in zip(passed, results, strict=False)
    ):
        return parts  # every chunk passed as it was (the common case): nothing changed
    out_of: dict[str, ToolResult | ToolError] = {}
    for c in passed:
        if isinstance(c, ToolResult | ToolError) and c.tool_call_id not in out_of:
            out_of[c.tool_call_id] = c
    approved: list[ToolResultPart] = []
    for p, r in zip(parts, results, strict=True):
        got = out_of.get(p.tool_call_id)
        if got is r or (got is None and stopped is None):
            approved.append(p)
            continue
        if got is None:
            assert stopped is not None
            new = ToolResultPart(p.tool_call_id, p.tool_name, stopped, True)
        elif isinstance(got, ToolError):
            new = ToolResultPart(p.tool_call_id, p.tool_name, got.error, True)
        else:
            new = ToolResultPart(p.tool_call_id, p.tool_name, got.result, False)
        if st.leaving is None:
            st.leaving = {}
        st.leaving[p.tool_call_id] = new
        approved.append(new)
    return tuple(approved)


def _leaving_messages(st: RunState, before_result: MessageList | None) -> MessageList:
    """The run's messages as they leave it: each tool result a stream processor changed
    (`_approved`) as it changed it, in the messages this run added, by call id (an input
    processor may have rebuilt the history the model reads from the tool's own value).
    A result an output result processor changed (`before_result`: the messages it got)
    is kept as it made it."""
    leaving = st.leaving
    if not leaving:
        return st.ml
    ours: set[int] | None = None
    if before_result is not None and before_result is not st.ml:
        ours = {id(p) for m in before_result.messages if m.role == "tool" for p in m.parts}

    def part(p: Part) -> Part:
        if type(p) is not ToolResultPart or (ours is not None and id(p) not in ours):
            return p
        assert isinstance(p, ToolResultPart)
        return leaving.get(p.tool_call_id, p)

    def swap(m: Message) -> Message:
        if m.role != "tool":
            return m
        parts = tuple(part(p) for p in m.parts)
        return m.with_parts(parts) if any(
            a is not b for a, b in zip(parts, m.parts, strict=True)) else m

    ml = st.ml
    return MessageList(
        tuple(swap(m) if s == "response" else m
              for m, s in zip(ml.messages, ml.sources, strict=True)),
        ml.sources, ml.system,
    )


def _tool_message(
    rc: RunConfig, st: RunState, parts: tuple[ToolResultPart | DataPart, ...]
) -> Message:
    """The message of a step's tool results (and what the tools wrote)."""
    return Message(
        id=st.ids.next("msg"),
        role="tool",
        parts=parts,
        created_at=rc.clock(),
        thread_id=rc.ctx.thread_id,
        resource_id=rc.ctx.resource_id,
    )


def _result_chunk(p: ToolResultPart) -> Chunk:
    """What the caller is streamed of a tool result."""
    if p.is_error:
        return ToolError(p.tool_call_id, p.tool_name, str(p.result))
    return ToolResult(p.tool_call_id, p.tool_name, p.result)


def _keep_finished_tools(
    rc: RunConfig, st: RunState, calls: tuple[ToolCallPart, ...], c: RunCancelled
) -> None:
    """A cancel while tools ran: the real results of the calls that finished (their
    side effects happened), an error result for the others, in call order.

    A real result leaves the run only through the stream processors, which run no more
    after a cancel: with stream processors, a finished call's result (or its own error)
    is withheld, the stream and the messages saying so (fail closed); without, it is
    kept and streamed as it is."""
    done = {o.tool_call_id: o for o in c.tool_outcomes if isinstance(o, ToolOutcome)}
    if not done:
        return  # `_answer_dangling_calls` answers every call
    unchecked = f"tool result withheld: the run was cancelled ({c.reason}) before it was checked"
    parts = tuple(
        (
            _result_part(
                call, done[call.tool_call_id].result, done[call.tool_call_id].is_error,
                _result_cap(rc, st.by_name.get(call.tool_name)),
            )
            if not rc.h_stream
            else ToolResultPart(call.tool_call_id, call.tool_name, unchecked, True)
        )
        if call.tool_call_id in done
        else ToolResultPart(
            call.tool_call_id, call.tool_name, f"tool call cancelled: {c.reason}", True
        )
        for call in calls
    )
    before = st.ml
    st.ml = before.add(_tool_message(rc, st, parts), "response")
    note_call_ids(st, before, parts)
    st.pending.extend(_result_chunk(p) for p in parts)


def _process_output_result(rc: RunConfig, st: RunState) -> Generator[LoopCommand, object, None]:
    if not rc.h_result:
        return
    for b in rc.h_result:
        result = OutputResult(
            text=response_text(st.ml),
            usage=st.usage,
            finish_reason=st.finish_reason,
            steps=steps_tuple(st),
        )
        args = OutputResultArgs(
            messages=st.ml.response,
            message_list=st.ml,
            result=result,
            state=st.states[b.slot],
            context=rc.ctx,
        )
        try:
            eff = apply(rc, st, b, (yield from call_hook(b, args)))
        except (HookFailure, RunCancelled):
            _drop_response(rc, st)  # fail closed (a crash, a cancel), as for a block
            raise
        if isinstance(eff, Abort):
            _drop_response(rc, st)  # the blocked response is not kept
            raise trip(b, eff)
        if isinstance(eff, Replace):
            st.ml = eff.value


def _drop_response(rc: RunConfig, st: RunState) -> None:
    """Remove what this run added to the conversation."""
    ml = st.ml
    st.ml = ml.replace_messages(
        (m for m, s in zip(ml.messages, ml.sources, strict=True) if s != "response"),
        "input",
    )


def _result_part(
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


def _close_stream() -> Generator[LoopCommand, object, None]:
    """Close the open model stream: the run ends before the stream did. A cancel now
    changes nothing: the run is ending already, for its own reason."""
    cmd = CloseStream()
    with contextlib.suppress(RunCancelled):
        checked(cmd, (yield cmd))



_CHUNK_EVENTS = MODEL_REPLY_TYPES - {ModelFinish, ModelFailed, ModelEnded}
"""The model events that are chunks for the caller."""
_CALLS = (ToolCall, ToolCallDelta)
_call_id = attrgetter("tool_call_id")
_ENDS = (ModelFinish, ModelFailed, ModelEnded)
