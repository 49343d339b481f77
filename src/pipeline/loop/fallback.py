"""A step's model call over its fallback chain (`pipeline.values.Fallback`), and the
typed partial output of its reply.

`attempts` tries the step's model, then each fallback model, until one answers: a
failure its `FailoverPolicy` names moves on (a retryable one once the retry policy gave
up on it), any other ends the run as without a fallback. Before the first attempt the
interpreter's circuit breaker is asked which models to skip for now (`CircuitCheck`; the
last model is never skipped), and after the last it is told how each went
(`CircuitReport`): typed requests, so journals and durable runs record the answers and
a replay takes the same path.

An attempt that fails is dropped whole: the messages, the stream processors' states
and what they have seen go back to where they were before it (text a processor held
back was never released, and never will be), its chunks that were released stay
released. So a step fails over only while none of the attempt's chunks reached the
caller, unless the policy says `after_output`: then the caller is sent a `StepReset`
first (drop what this step streamed), and the attempt is recorded as `released`.
Every attempt is counted (`model_calls`, usage, cost: an attempt whose stream broke is
unmetered) and named in the step's result (`StepResult.attempts`).

Nothing here runs for a step without a fallback chain or partial output: the run's
step calls `call_model` and `consume` directly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator

import msgspec

from effects import Perform, Publish, Pull
from pipeline.loop.cost import count_stopped
from pipeline.loop.hooks import HookFailure
from pipeline.loop.model_call import call_model, consume
from pipeline.loop.partial import PartialOutputs
from pipeline.loop.race import feed, race_gate
from pipeline.loop.response import StepContent
from pipeline.loop.state import Failed, RunConfig, RunState, SeenMark, Tripped
from pipeline.processor import StepSettings
from pipeline.protocol.replies import LoopCommand, RunCancelled
from pipeline.values.chunks import (
    Chunk,
    ReasoningEnd,
    ReasoningStart,
    StepReset,
    TextEnd,
    TextStart,
)
from pipeline.values.fallback import (
    CIRCUIT_PROCESSOR,
    CircuitCheck,
    CircuitOutcome,
    CircuitReport,
    CircuitStates,
    FailoverPolicy,
    ModelAttempt,
    failure_kind,
)
from pipeline.values.messages import DataPart, MessageList
from pipeline.values.model import ApiError
from pipeline.values.output_type import TypedOutput
from pipeline.values.result import ApiFailed, StreamFailed

_HOOK = "model_call"
_NO_POLICY = FailoverPolicy()


def plain_step(cfg: StepSettings) -> bool:
    """The step needs none of this module: no fallback chain, no partial output."""
    so = cfg.structured_output
    return cfg.fallback is None and not (isinstance(so, TypedOutput) and so.partial)


def chain_of(cfg: StepSettings) -> tuple[StepSettings, ...]:
    """The settings of each attempt: the step's model first (with its chain entry's
    settings, where it has its own), then each other model of the chain, in order."""
    fb = cfg.fallback
    if fb is None or not fb.models:
        return (cfg,)
    out: list[StepSettings] = []
    models = [cfg.model, *(m.model for m in fb.models if m.model != cfg.model)]
    for model in models:
        entry = fb.entry(model)
        changed: dict[str, object] = {"model": model}
        if entry is not None and entry.model_settings is not None:
            changed["model_settings"] = entry.model_settings
        if entry is not None and entry.provider_options is not None:
            changed["provider_options"] = entry.provider_options
        out.append(msgspec.structs.replace(cfg, **changed))
    return tuple(out)


class _Mark:
    """What an attempt may change of the run, as it was before it (`restore`)."""

    __slots__ = ("held", "ml", "seen", "states")

    def __init__(self, st: RunState) -> None:
        self.ml: MessageList = st.ml
        self.states: list[object] = list(st.states)
        self.held: tuple[DataPart, ...] = st.held
        self.seen: SeenMark = st.seen.mark()

    def restore(self, st: RunState) -> None:
        st.ml = self.ml
        st.states[:] = self.states
        st.held = self.held
        st.seen.rewind(self.seen)


class _Watch:
    """What an attempt has handed the caller: any content (`released`), and the text
    and reasoning parts it opened and has not closed (a start carries no content: an
    attempt that failed after one is closed, not reset)."""

    __slots__ = ("opened", "partial", "released")

    def __init__(self, partial: PartialOutputs | None) -> None:
        self.released = False
        self.opened: dict[str, type] = {}
        self.partial = partial

    def saw(self, chunks: tuple[Chunk, ...]) -> None:
        for c in chunks:
            t = type(c)
            if t is TextStart or t is ReasoningStart:
                assert isinstance(c, TextStart | ReasoningStart)
                self.opened[c.id] = TextEnd if t is TextStart else ReasoningEnd
            elif (t is TextEnd or t is ReasoningEnd) and c.id in self.opened:  # type: ignore[union-attr]
                assert isinstance(c, TextEnd | ReasoningEnd)
                del self.opened[c.id]
            else:
                self.released = True

    def closing(self) -> list[Chunk]:
        """The ends of the parts it opened and left open."""
        return [TextEnd(i) if end is TextEnd else ReasoningEnd(i)
                for i, end in self.opened.items()]


def attempts(
    rc: RunConfig, st: RunState, step: int, cfg: StepSettings
) -> Generator[LoopCommand, object, tuple[StepContent, StepSettings]]:
    """The step's model call and stream over its chain (see the module doc): the content
    of the attempt that answered, and its settings (its model)."""
    chain = chain_of(cfg)
    policy = cfg.fallback.policy if cfg.fallback is not None else _NO_POLICY
    so = cfg.structured_output
    typed = so if isinstance(so, TypedOutput) and so.partial else None
    skip: tuple[str, ...] = ()
    watched: tuple[str, ...] = ()
    if len(chain) > 1:
        states = yield from _ask(CircuitCheck(tuple(c.model for c in chain)))
        if isinstance(states, CircuitStates):
            skip, watched = states.open, states.watched
    tried: list[ModelAttempt] = []
    outcomes: list[CircuitOutcome] = []
    runs = [k for k, c in enumerate(chain) if k == len(chain) - 1 or c.model not in skip]
    for i, at in enumerate(runs):
        acfg = chain[at]
        for c in chain[runs[i - 1] + 1 if i else 0: at]:  # skipped: the circuit is open
            tried.append(ModelAttempt(model=c.model, kind="circuit-open", error=ApiError(
                status=None, error_type="circuit_open",
                message=f"skipped: the circuit breaker of {c.model} is open (it kept failing)",
            )))
        last = i == len(runs) - 1
        mark = _Mark(st)
        watch = _Watch(
            PartialOutputs(typed, step, st.partial) if typed is not None else None)
        content: StepContent | None = None
        try:
            content, first = yield from call_model(
                rc, st, step, acfg, None if last else policy)
            if st.racing:  # input guards still running: hold the model's events (race.py)
                first, held, ended = yield from race_gate(rc, st, first)
                inner = feed(consume(rc, st, step, content, first), held, ended)
            else:
                inner = consume(rc, st, step, content, first)
            yield from _relay(inner, watch, content)
        except Failed as f:
            err = _error_of(f)
            if content is not None:  # the call was made: counted, as without a fallback
                count_stopped(rc, st, acfg.model, content.finish)
            if err is not None:
                outcomes.append(CircuitOutcome(acfg.model, failure_kind(err)))
            if (
                last or err is None or not policy.fails_over(err)
                or (watch.released and not policy.after_output)
            ):
                yield from _report(outcomes)
                raise _with_tried(f, tried) from None
            mark.restore(st)
            tried.append(ModelAttempt(
                model=acfg.model, error=err, kind=failure_kind(err), released=watch.released))
            st.pending.extend(watch.closing())  # what it opened, closed
            if watch.released:  # the caller drops what this step streamed so far
                st.pending.append(StepReset(step, acfg.model, chain[runs[i + 1]].model, str(err)))
            continue
        except (Tripped, HookFailure, RunCancelled):
            if content is not None:
                count_stopped(rc, st, acfg.model, content.finish)
            raise
        if watch.partial is not None:
            last_partial = watch.partial.next(content.text)  # released at the finish
            if last_partial is not None:
                st.pending.append(last_partial)
            st.partial = watch.partial.last
        if acfg.model in watched or outcomes:
            outcomes.append(CircuitOutcome(acfg.model))
        yield from _report(outcomes)
        content.attempts = tuple(tried)
        return content, acfg
    raise AssertionError("the last attempt returns or raises")  # pragma: no cover


def _relay(
    inner: Generator[LoopCommand, object, None], watch: _Watch, content: StepContent
) -> Generator[LoopCommand, object, None]:
    """Pass the stream's commands on (and their replies back), noting what goes to the
    caller; with partial output, each publish gets the output's new partial."""
    partial = watch.partial
    try:
        cmd = next(inner)
        while True:
            t = type(cmd)
            if t is Pull or t is Publish:  # each delivers chunks to the caller
                assert isinstance(cmd, Pull | Publish)
                chunks = cmd.publish if isinstance(cmd, Pull) else cmd.chunks
                made = partial.next(content.text) if partial is not None else None
                if made is not None:
                    chunks = (*chunks, made)
                    cmd = Pull(chunks) if t is Pull else Publish(chunks)
                if chunks:
                    watch.saw(chunks)
            try:
                reply = yield cmd
            except BaseException as e:
                cmd = inner.throw(e)
            else:
                cmd = inner.send(reply)
    except StopIteration:
        return


def _error_of(f: Failed) -> ApiError | None:
    """The provider's failure that ended an attempt (None: not the provider's)."""
    e = f.error
    if isinstance(e, ApiFailed):
        return e.error
    if isinstance(e, StreamFailed):
        if e.error is not None:
            return e.error
        # the stream ended without its finish: as a connection that dropped
        return ApiError(status=None, message=e.message, error_type="incomplete_stream")
    return None


def _with_tried(f: Failed, tried: list[ModelAttempt]) -> Failed:
    e = f.error
    if tried and isinstance(e, ApiFailed | StreamFailed):
        return Failed(msgspec.structs.replace(e, tried=tuple(tried)))
    return f


def _ask(request: CircuitCheck) -> Generator[LoopCommand, object, object]:
    """The breaker's answer; None when the interpreter has none (no skip then)."""
    cmd: Perform[object] = Perform(CIRCUIT_PROCESSOR, _HOOK, request)
    try:
        return (yield cmd)
    except Exception:  # no breaker (a hand-written interpreter): nothing is skipped
        return None


def _report(outcomes: list[CircuitOutcome]) -> Generator[LoopCommand, object, None]:
    if not outcomes:
        return
    cmd: Perform[object] = Perform(CIRCUIT_PROCESSOR, _HOOK, CircuitReport(tuple(outcomes)))
    with contextlib.suppress(Exception):  # no breaker: nothing to tell
        yield cmd


__all__ = ["attempts", "chain_of", "plain_step"]
