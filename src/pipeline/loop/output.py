"""The output checks: process_output_step over each response, the output type's decode
of a final reply, and process_output_result over the run's answer.

A check either keeps what the model said, discards it for a retry (the reason goes back
to the model as feedback, after the conversation, and the caller is told the step was
discarded), or blocks it. What a check did not approve is never kept: a blocked, crashed
or cancelled check leaves the run's messages as they were before the response.
"""

from __future__ import annotations

from collections.abc import Generator

import msgspec

from effects import Abort, CommitWrites, Continue, Perform, Replace, Write
from pipeline.loop.hooks import HookFailure, Outcome, Yielded, call_hook, raised, settle
from pipeline.loop.partial import NOTHING, parse_partial
from pipeline.loop.response import response_text
from pipeline.loop.state import (
    Failed,
    RunConfig,
    RunState,
    apply,
    discarded,
    feedback,
    keep_held,
    trip,
)
from pipeline.loop.stream import stream_through
from pipeline.processor import ApprovedArgs, OutputResultArgs, OutputStepArgs, StepSettings
from pipeline.protocol.replies import LoopCommand, RunCancelled
from pipeline.values.chunks import Finish as FinishChunk
from pipeline.values.chunks import ModelFinish, OutputPartial
from pipeline.values.messages import Message, MessageList, ToolCallPart
from pipeline.values.output_type import OutputDecodeError, TypedOutput
from pipeline.values.result import OutputInvalid, OutputResult

_replace = msgspec.structs.replace
"""(Per hook, the args of the hook before with its state: cheaper than making them.)"""

_OUTPUT_TYPE = "output_type"
"""Who discarded a reply that did not decode (in feedback and data-step-discarded)."""


def output_step(
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
    steps = st.steps
    args: OutputStepArgs[object] | None = None
    for b in rc.h_output_step:
        if args is not None:  # the hook before passed: the same args but for its state
            state = st.states[b.slot]
            if state is not args.state:  # (the same state, often None: the same args)
                args = _replace(args, state=state)
        else:
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
        try:  # `invoke`, inline: a call less per hook per step (docs/DESIGN.md, speed)
            raw = b.fn(args)
        except Exception as e:
            raw = raised(b, e)
        if raw.__class__ is Continue and record is None:  # passed: nothing to settle
            continue
        args = None  # what the next hook sees may change: made anew
        eff = apply(rc, st, b, (yield from settle(b, raw)))
        if isinstance(eff, Abort):
            if eff.retry and st.retry_count < rc.agent.max_processor_retries:
                yield from _discard(rc, st, step, b.processor_id, eff.reason, before)
                return False
            st.ml = before  # a blocked response is not kept (as in output_result)
            raise trip(b, eff)
        if isinstance(eff, Replace):
            st.ml = eff.value
    return True


def check_output(
    rc: RunConfig, st: RunState, step: int, typed: TypedOutput, text: str, before: MessageList
) -> Generator[LoopCommand, object, bool]:
    """Decode a final reply into the output type: False when it did not decode and
    goes back to the model as feedback (as a processor's retry does); OutputInvalid
    once the retries are spent (the invalid reply is then not kept)."""
    try:
        st.output = typed.decode(text)
        if typed.partial and (st.partial is NOTHING or st.partial != st.output):
            # the last partial is the output (a processor may have changed the reply)
            st.pending.append(OutputPartial(step, st.output, parse_partial(text) or {}))
            st.partial = st.output
        return True
    except OutputDecodeError as e:
        problem = str(e)
    if st.retry_count >= rc.agent.max_processor_retries:
        st.ml = before
        raise Failed(OutputInvalid(step, problem, text, st.retry_count + 1))
    reason = (
        f"Your reply does not match the {typed.name} JSON schema: {problem}. "
        "Reply again with only a JSON value that matches the schema."
    )
    yield from _discard(rc, st, step, _OUTPUT_TYPE, reason, before)
    return False


def _discard(
    rc: RunConfig, st: RunState, step: int, by: str, reason: str, before: MessageList
) -> Generator[LoopCommand, object, None]:
    """Discard the step's response for a retry: the messages are `before` and the
    feedback (after the conversation, so a prompt cache stays valid); the caller is told."""
    st.retry_count += 1
    st.ml = before.add(feedback(rc, st, reason, by), "context")
    yield from stream_through(rc, st, [discarded(step, by, reason, st.retry_count)])


def output_result(rc: RunConfig, st: RunState) -> Generator[LoopCommand, object, None]:
    """process_output_result over the run's answer; a block, a crash or a cancel drops
    what the run added (fail closed)."""
    if not rc.h_result:
        return
    for b in rc.h_result:
        result = OutputResult(
            text=response_text(st.ml),
            usage=st.usage,
            finish_reason=st.finish_reason,
            steps=st.steps,
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
            _drop_response(st)  # fail closed (a crash, a cancel), as for a block
            raise
        if isinstance(eff, Abort):
            _drop_response(st)  # the blocked response is not kept
            raise trip(b, eff)
        if isinstance(eff, Replace):
            st.ml = eff.value


def approved_input(rc: RunConfig, st: RunState) -> tuple[Message, ...]:
    """The run's input as the input processors approved it (after `process_input`), for
    `process_approved`; nothing when no processor has that hook."""
    if not rc.h_approved:
        return ()
    ml = st.ml
    return tuple(m for m, s in zip(ml.messages, ml.sources, strict=True) if s == "input")


def approved(
    rc: RunConfig, st: RunState, inputs: tuple[Message, ...], before_result: MessageList | None
) -> Generator[LoopCommand, object, None]:
    """process_approved, once every output processor approved the run's answer: the new
    messages as they leave the run (`ApprovedArgs`). The writes the hooks ask for
    (`effects.Write`) are kept and asked for together once every hook returned
    (`CommitWrites`): all of them or none. A crash, a failed commit or a cancel before
    the commit drops the answer from the result and the finish chunk from the stream
    (fail closed, as in `output_result`); once the commit began, a cancel is too late
    (the interpreters let it complete), so the store and the result agree."""
    if st.held:  # kept in the answer before it is saved, as the result will keep them
        keep_held(rc, st)
    leaving = st.leaving.messages(st.ml, before_result)
    new = inputs + tuple(
        m for m, s in zip(leaving.messages, leaving.sources, strict=True) if s == "response"
    )
    # the children's writes first (held for the root: `children.py`), then the run's own
    writes: list[tuple[str, Write]] = list(st.tree.writes) if st.tree is not None else []
    try:
        for b in rc.h_approved:
            args = ApprovedArgs(
                messages=new, message_list=leaving, state=st.states[b.slot], context=rc.ctx,
                started_at=rc.started_at,
            )
            apply(rc, st, b, (yield from _kept_writes(call_hook(b, args), writes)))
        if writes:
            yield from _commit(writes)
    except (HookFailure, RunCancelled):
        _drop_response(st)
        # The finish chunk waits in `pending` (no command here publishes): the
        # caller is told the run failed, not that it finished.
        st.pending = [c for c in st.pending if type(c) is not FinishChunk]
        raise


def _kept_writes(
    hook: Generator[Yielded, object, Outcome], writes: list[tuple[str, Write]]
) -> Generator[Yielded, object, Outcome]:
    """`hook`'s commands, but a write it asks for is kept in `writes` (with who asked)
    and answered None at once."""
    reply: object = None
    failure: Exception | None = None
    try:
        while True:
            try:
                cmd = hook.throw(failure) if failure is not None else hook.send(reply)
            except StopIteration as done:
                outcome: Outcome = done.value
                return outcome
            failure = None
            if type(cmd) is Perform and isinstance(cmd.request, Write):
                writes.append((cmd.processor_id, cmd.request))
                reply = None
                continue
            try:
                reply = yield cmd
            except Exception as e:  # its request failed: the hook decides, as ever
                failure = e
    finally:
        hook.close()


def _commit(writes: list[tuple[str, Write]]) -> Generator[LoopCommand, object, None]:
    """Ask for the kept writes together; a failure fails the run, naming who wrote."""
    who = ", ".join(dict.fromkeys(p for p, _ in writes))
    try:
        yield Perform(who, "process_approved", CommitWrites(tuple(w for _, w in writes)))
    except Exception as e:
        raise HookFailure(who, "process_approved", type(e).__name__, str(e)) from e


def _drop_response(st: RunState) -> None:
    """Remove what this run added to the conversation."""
    ml = st.ml
    st.ml = ml.replace_messages(
        (m for m, s in zip(ml.messages, ml.sources, strict=True) if s != "response"),
        "input",
    )
