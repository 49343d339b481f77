"""The model call of a step and its stream.

`call_model` asks the model (`CallModel`) until it starts streaming: a transient failure
is retried by the agent's RetryPolicy (`Sleep` between attempts), a rejection is offered
to the process_api_error processors (`api_error`), which may change the messages and
retry. `consume` then reads the stream (`Pull`) through the stream processors until the
model's finish, giving each tool call an id unique in the run (`unique_call`: set
lookups, never a scan of the response's calls) and failing the run past
`MAX_TOOL_CALLS_PER_RESPONSE` calls (`too_many_calls`). When the
stream breaks or the run stops in it, what already passed every processor is kept,
marked incomplete (`keep_partial`), and a stream the interpreter still has open is
closed (`CloseStream`).

`consume` is the per-chunk hot path: each Pull's reply is checked inline, by its class.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import TYPE_CHECKING, cast

from effects import Abort, CallModel, CloseStream, Publish, Pull, Retry, Sleep
from pipeline.loop.gate import hold_calls
from pipeline.loop.hooks import HookFailure, call_hook
from pipeline.loop.response import StepContent
from pipeline.loop.state import (
    Failed,
    RunConfig,
    RunState,
    Tripped,
    apply,
    fresh_call_id,
    loop_message,
    trip,
)
from pipeline.loop.step import model_request
from pipeline.loop.stream import deliver, flush, flush_io, process_chunk, process_chunk_io
from pipeline.processor import ApiErrorArgs, StepSettings
from pipeline.protocol.replies import (
    MODEL_REPLY_TYPES,
    LoopCommand,
    ModelReply,
    ProtocolError,
    RunCancelled,
    checked,
)
from pipeline.values.bounds import MAX_TOOL_CALLS_PER_RESPONSE
from pipeline.values.chunks import Chunk, ModelFinish, ToolCall, ToolCallDelta
from pipeline.values.fallback import FailoverPolicy
from pipeline.values.model import ApiError, ModelEnded, ModelFailed, ModelRequest
from pipeline.values.result import ApiFailed, StreamFailed

_CHUNK_EVENTS = MODEL_REPLY_TYPES - {ModelFinish, ModelFailed, ModelEnded}
"""The model events that are chunks for the caller."""
_CALLS = (ToolCall, ToolCallDelta)
_ENDS = (ModelFinish, ModelFailed, ModelEnded)


def ask_model(
    st: RunState, step: int, cfg: StepSettings, attempt: int
) -> tuple[Publish[Chunk] | None, CallModel[ModelRequest, ModelReply]]:
    """A model call's commands: what the run holds to publish first (None: nothing), then
    the call itself, `attempt` the step's attempts before it."""
    request = model_request(st, cfg)
    out: Publish[Chunk] | None = None
    if st.pending:
        out = Publish(tuple(st.pending))
        st.pending = []
    return out, CallModel(request, step, attempt)


def answered(st: RunState, ask: CallModel[ModelRequest, ModelReply], reply: object) -> bool:
    """Whether `reply`, the answer to `ask`, starts the model's stream (the call is then
    counted: a call answered is paid for, whatever becomes of it), not a ModelFailed; a
    reply that is no model event is a ProtocolError. (Checked as `checked` does, inline
    of its lookup: a call less on a path that runs once per step.)"""
    t = type(reply)
    if t not in MODEL_REPLY_TYPES:
        raise ProtocolError(ask, reply)
    if t is ModelFailed:  # (an exact type: the set lookup just made)
        return False
    st.model_calls += 1
    return True


def call_model(
    rc: RunConfig, st: RunState, step: int, cfg: StepSettings,
    failover: FailoverPolicy | None = None, failed: ModelFailed | None = None,
) -> Generator[LoopCommand, object, tuple[StepContent, object]]:
    """Call the model until it starts streaming, retrying what may be retried.

    Returns the stream's first event: a model event other than ModelFailed (checked
    here; `consume` reads it as it reads every event, by its class). With a `failover`
    policy (a fallback model comes next), a failure it names is raised at once, not
    offered to the error processors (`loop.fallback` moves on). `failed`: the reply of
    the step's first call, made by the step itself (`run._step`), which failed."""
    transient = 0
    attempts = 0 if failed is None else 1
    reply: object = failed
    while True:
        if reply is None:
            out, ask = ask_model(st, step, cfg, attempts)
            attempts += 1
            if out is not None:
                # (no local keeps the chunks alive while the model call waits: one object
                # fewer per waiting run for the garbage collector)
                if (got := (yield out)) is not None:
                    raise ProtocolError(out, got)
                del out
            reply = yield ask
            if answered(st, ask, reply):
                return StepContent(), reply
        if TYPE_CHECKING:
            assert isinstance(reply, ModelFailed)
        err = reply.error
        reply = None
        policy = rc.agent.retry_policy
        if err.retryable:
            if transient < policy.max_retries and policy.waits(err.retry_after):
                delay = policy.delay(transient, f"{rc.ctx.run_id}:{step}", err.retry_after)
                transient += 1
                wait = Sleep(delay, f"retrying after {err}")
                checked(wait, (yield wait))
                continue
            raise Failed(ApiFailed(step, err, attempts))
        if failover is not None and failover.fails_over(err):
            raise Failed(ApiFailed(step, err, attempts))
        recovered = yield from api_error(rc, st, step, err)
        if not recovered:
            raise Failed(ApiFailed(step, err, attempts))


def api_error(
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
            steps=st.steps,
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


def consume(
    rc: RunConfig, st: RunState, step: int, content: StepContent, first: object
) -> Generator[LoopCommand, object, None]:
    """Run the model's stream through the stream processors until ModelFinish.

    The per-chunk hot path: each Pull's reply is checked here, inline (a set lookup on
    its class), not through `checked`; an isinstance that misses costs more.
    """
    stream = rc.h_stream
    io = rc.stream_io
    gated = bool(rc.h_tool_call) or rc.tool_rules  # tool-call chunks wait for the gates
    if gated:
        st.held_calls = ()
    got: object = first  # checked by `call_model`
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
                    keep_partial(rc, st, content)
                    err = got.error if isinstance(got, ModelFailed) else None
                    msg = (
                        str(err) if err is not None
                        else "stream ended before the model finished"
                    )
                    raise Failed(StreamFailed(step, msg, err))
                assert pull is not None
                raise ProtocolError(pull, got)
            # A model event other than the three above: a chunk (the check just made).
            # `cast` is a call that costs 5% of this path: only the type checker sees it.
            if TYPE_CHECKING:
                chunk = cast(Chunk, got)
            else:
                chunk = got
            if t is ToolCall or t is ToolCallDelta:
                if TYPE_CHECKING:
                    assert isinstance(chunk, _CALLS)
                if t is ToolCall:
                    content.calls += 1
                    if content.calls > MAX_TOOL_CALLS_PER_RESPONSE:
                        keep_partial(rc, st, content)
                        yield from close_stream()
                        raise Failed(too_many_calls(step))
                # `unique_call`'s usual answer inline (a call less per call): an id this
                # response did not rename, that the run's ids (known for these very
                # messages) and this response's do not hold, stays
                cid = chunk.tool_call_id
                known = st.call_ids
                if (
                    content.renamed or not cid or known.of is not st.ml
                    or cid in known.used or cid in content.call_ids
                ):
                    chunk = unique_call(st, chunk, content)
                if t is ToolCall and (stream or io):
                    if TYPE_CHECKING:
                        assert isinstance(chunk, ToolCall)
                    content.made_call(chunk)
            if io:
                yield from process_chunk_io(rc, st, chunk, content)
            elif stream:
                process_chunk(rc, st, chunk, content)
            elif not st.pending and not gated:  # no stream hooks, nothing else to hand out
                content.add(chunk)
                pull = Pull((chunk,))
                got = yield pull
                continue
            else:
                deliver(st, chunk, content)
            out = tuple(st.pending)
            st.pending = []
            if gated:
                out = hold_calls(st, out)
            pull = Pull(out)
            got = yield pull
    except RunCancelled:
        # What already passed every processor is kept, marked incomplete. The
        # interpreter closes the stream itself when it cancels (no I/O after a cancel).
        keep_partial(rc, st, content)
        raise
    except HookFailure:
        # A stream processor crashed: kept as for a cancel (the crashing chunk and
        # later ones are not); the stream is closed.
        keep_partial(rc, st, content)
        if not ended:
            yield from close_stream()
        raise
    except Tripped:
        if not ended:  # a stream processor aborted mid-stream
            yield from close_stream()
        raise


def too_many_calls(step: int) -> StreamFailed:
    """A response past `MAX_TOOL_CALLS_PER_RESPONSE`: the run fails, no call runs."""
    what = f"the model sent more than {MAX_TOOL_CALLS_PER_RESPONSE} tool calls in one response"
    return StreamFailed(step, what, ApiError(
        status=None, message=what, error_type="limit_exceeded", retryable=False))


def unique_call(
    st: RunState, call: ToolCall | ToolCallDelta, content: StepContent
) -> ToolCall | ToolCallDelta:
    """A call with an empty id, or one this response already used, gets a fresh id,
    its deltas too: results are matched to calls by id (some servers send `call_0`
    for every call)."""
    cid = call.tool_call_id
    renamed = content.renamed
    if renamed is None:
        renamed = content.renamed = {}
    fresh = renamed.get(cid)
    if fresh is None:
        known = st.call_ids
        used = known.used if known.of is st.ml else known.held_by(st.ml)  # (inline: a call less)
        if cid and cid not in used and cid not in content.call_ids:
            return call
        fresh = renamed[cid] = fresh_call_id(st, used, content)
    if isinstance(call, ToolCall):
        del renamed[cid]  # the call is complete: a later reuse is a new call
        return ToolCall(fresh, call.tool_name, call.args)
    return ToolCallDelta(fresh, call.tool_name, call.args_delta)


def keep_partial(rc: RunConfig, st: RunState, content: StepContent) -> None:
    """A broken stream: keep what arrived, marked incomplete, with no tool call.

    Not when process_output_step processors exist: they never approved it (fail closed).
    """
    parts = content.message_parts(complete=False)
    if parts and not rc.h_output_step:
        st.ml = st.ml.add(loop_message(rc, st, "assistant", parts, incomplete=True), "response")


def close_stream() -> Generator[LoopCommand, object, None]:
    """Close the open model stream: the run ends before the stream did. A cancel now
    changes nothing: the run is ending already, for its own reason."""
    cmd = CloseStream()
    with contextlib.suppress(RunCancelled):
        checked(cmd, (yield cmd))
