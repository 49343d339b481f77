"""What the interpreters share in carrying out commands.

Starting a run, resolving its model up front, turning provider failures into the loop's
replies, calling a tool in this thread (`run_tool`; the outcome of a call that cannot run
or raised), the answer to `AskModel`, and the lookup of an I/O handler. Beyond the tool
call itself no I/O here; each interpreter does its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

import msgspec

from interpreters.core.options import TracedScope
from interpreters.observers.observe import Observer, watched_loop
from interpreters.providers.provider import Provider, ProviderError
from pipeline.agent import Agent, AgentTool
from pipeline.agents import ChildRun
from pipeline.approval import resumed_context
from pipeline.loop import agent_loop, rejected, watched_relay
from pipeline.processor import AskModel, ModelAnswer
from pipeline.protocol import Driver, LoopCommand, RunLog, ToolInvocation, ToolOutcome
from pipeline.tools import check_deps
from pipeline.values.chunks import Chunk, ModelEvent, ModelFinish, TextDelta, ToolCall
from pipeline.values.context import RunContext
from pipeline.values.cost import Pricer
from pipeline.values.messages import RunInput, ToolCallPart
from pipeline.values.model import ApiError, ModelFailed
from pipeline.values.result import InvalidInput
from pipeline.values.validate import read_input

H = TypeVar("H")
P = TypeVar("P")

CONFIGURATION = "configuration"
"""`ApiError.error_type` of a provider that cannot be used as configured (no API key...)."""


def resolver(provider: P | None, resolve: Callable[[str], P] | None) -> Callable[[str], P]:
    """One provider for every model, or a function picking one per model id."""
    if resolve is not None:
        return resolve
    if provider is None:
        raise ValueError("give a provider or a resolve function")
    fixed = provider
    return lambda _model: fixed


def start_run(
    agent: Agent,
    messages: RunInput,
    *,
    run_id: str,
    clock: Callable[[], float],
    options: TracedScope,
    observers: Sequence[Observer] = (),
    price: Pricer | None = None,
) -> Driver:
    """The driver of a new run (`pipeline.protocol.driver`): its agent loop, with its context (from
    `options`), its input as a message list, its trace, watched by `observers` (see
    `interpreters.observers.observe`).

    Input that is not a conversation the library can send gives a run that fails at once
    with `InvalidInput`, before any call. Raises TypeError when a tool of the agent asks
    for deps of another type than `deps`, and `OwnerMismatch` when a resumed run is
    given another thread or resource than its own (none given: its own).
    """
    deps = options.get("deps")
    check_deps(agent.tools, deps)
    resume = options.get("resume")
    if resume is not None:
        run_id = resume.suspension.run_id
    ctx = RunContext(
        run_id=run_id,
        thread_id=options.get("thread_id"),
        resource_id=options.get("resource_id"),
        values=options.get("values"),
        deps=deps,
    )
    if resume is not None:  # in the suspended run's thread and resource (or refused)
        ctx = resumed_context(ctx, resume.suspension)
    trace = options.get("trace")
    ml = (
        read_input(messages, id_prefix=run_id, created_at=clock())
        if resume is None else resume.suspension.messages
    )
    if isinstance(ml, InvalidInput):
        return Driver(rejected(ml), log=trace)  # checked at the door: fails before any call
    record = trace.record_effect if trace is not None else None
    if observers:
        loop, watch = watched_loop(
            agent, ml, context=ctx, clock=clock, record=record, observers=observers,
            price=price, resume=resume,
        )
        return Driver(loop, log=trace, watch=watch)
    loop = agent_loop(
        agent, ml, context=ctx, clock=clock, record=record, price=price, resume=resume
    )
    return Driver(loop, log=trace)


def child_driver(
    child: ChildRun,
    *,
    clock: Callable[[], float],
    observers: Sequence[Observer] = (),
    price: Pricer | None = None,
    log: RunLog | None = None,
) -> Driver:
    """The driver of a child run (`docs/agents.md`): its agent's loop from the
    `ChildRun` a tool call carries, watched by `observers` as a child of the parent's
    call, through `relay` (which keeps what it publishes and the writes it would commit
    for its parent). What it publishes (Pull, Publish) is the caller's: hand it out as
    the root's chunks, as they come; `log`: the root's trace, which records them (not
    the child's commands). Raises what starting its loop raises (a resumption its agent
    no longer fits): the caller answers the call with an error."""
    if observers:
        loop, watch = watched_loop(
            child.tool.agent, child.messages, context=child.context, clock=clock,
            record=None, observers=observers, price=price, resume=child.resume,
            child=child,
        )
    else:
        loop = agent_loop(
            child.tool.agent, child.messages, context=child.context, clock=clock,
            price=price, resume=child.resume, child=child,
        )
        watch = None
    relayed, own = watched_relay(child, loop, watch)
    return Driver(relayed, log=chunks_of(log), watch=own)


class _ChunksOf:
    """A root trace as a child run's log: the chunks it hands out, not its commands."""

    __slots__ = ("chunks",)

    def __init__(self, chunks: list[Chunk]) -> None:
        self.chunks = chunks

    def record_command(self, c: LoopCommand) -> None:
        pass


def chunks_of(log: RunLog | None) -> RunLog | None:
    """`log` as a child run's: what it publishes recorded, not its commands."""
    if log is None or type(log) is _ChunksOf:
        return log
    return _ChunksOf(log.chunks)


def runs_children(agent: Agent) -> bool:
    """Whether some tool of `agent` (its own, or one its processors declare) runs an
    agent (`docs/agents.md`)."""
    return any(isinstance(t, AgentTool) for t in agent.tools) or any(
        isinstance(t, AgentTool) for p in agent.all_processors() for t in p.tools)


def has_child_runs(cmd: LoopCommand) -> bool:
    """Whether a RunTools runs child runs (agents called as tools)."""
    calls = cmd.calls  # type: ignore[union-attr]
    if len(calls) == 1:  # (most steps: no generator made)
        return calls[0].child is not None
    return any(inv.child is not None for inv in calls)


def child_failed(inv: ToolInvocation, e: Exception) -> ToolOutcome:
    """A child run that could not start: the call's error result (the parent keeps
    nothing of the child)."""
    return ToolOutcome(inv.call.tool_call_id, f"{type(e).__name__}: {e}", is_error=True)


def check_model(resolve: Callable[[str], object], model_id: str) -> object | None:
    """Resolve a run's model before the run, so a provider that is not configured (no API
    key...) fails at once: re-raises a `ProviderError` of type "configuration" (such as the
    router's `ProviderConfigError`). Other failures are left to the run's first model call,
    which reports them as usual. Returns the provider (None: it could not be had)."""
    try:
        return resolve(model_id)
    except ProviderError as e:
        if e.error.error_type == CONFIGURATION:
            raise
    except Exception:
        pass  # the model call that needs the provider reports it
    return None


def check_models(resolve: Callable[[str], object], agent: Agent) -> None:
    """`check_model` for the agent's model and each of its fallback models, and its
    output mode on each (a provider with `check_output`, as the HTTP ones: a route that
    cannot send the agent's typed output in its mode raises its configuration error)."""
    models = agent.fallback.model_ids if agent.fallback is not None else (agent.model,)
    so = agent.structured_output
    for model_id in models:
        provider = check_model(resolve, model_id)
        check = getattr(provider, "check_output", None) if so is not None else None
        if check is not None:
            check(so)


def provider_error(e: Exception) -> ApiError:
    """Any failure of a provider as a typed ApiError (a provider bug is not retried)."""
    if isinstance(e, ProviderError):
        return e.error
    return ApiError(
        status=None, message=f"{type(e).__name__}: {e}", error_type="provider-error"
    )


def stream_failed(e: Exception, *, started: bool) -> ModelFailed:
    """The reply for a model stream that raised `e` (`started`: events had gone out)."""
    err = provider_error(e)
    if started and err.retryable:
        # Bytes already reached the caller: a retry would duplicate them.
        err = msgspec.structs.replace(err, retryable=False, retry_after=None)
    return ModelFailed(err, started=started)


def unrunnable(inv: ToolInvocation) -> ToolOutcome:
    """The error outcome of a call that cannot run (unknown tool, invalid arguments): one
    with an `error`, or without its tool or arguments (the callers test that inline)."""
    return ToolOutcome(inv.call.tool_call_id, inv.error or "tool not available", is_error=True)


def tool_failed(inv: ToolInvocation, e: Exception) -> ToolOutcome:
    """A tool that raised: an error result the model sees."""
    return ToolOutcome(inv.call.tool_call_id, f"{type(e).__name__}: {e}", is_error=True)


def run_tool(
    inv: ToolInvocation, settle: Callable[[object], object] | None = None
) -> ToolOutcome:
    """Run one tool call in this thread; a tool that raises becomes an error result the
    model sees. `settle` turns what the tool returned into its result (the durable
    interpreter awaits an awaitable there); without it, the value is the result."""
    tool, kwargs = inv.tool, inv.kwargs
    if inv.error is not None or tool is None or kwargs is None:
        return unrunnable(inv)
    try:
        result = tool.fn(**kwargs)
        if settle is not None:
            result = settle(result)
    except Exception as e:
        return tool_failed(inv, e)
    return ToolOutcome(inv.call.tool_call_id, result)


def close_stream(stream: object) -> None:
    """Close a sync model stream that has a `close` (a generator, an HTTP response's)."""
    close = getattr(stream, "close", None)
    if close is not None:
        close()


def answer_of(events: Iterable[ModelEvent]) -> ModelAnswer:
    """Collect a finished model stream into the reply to AskModel; a stream without its
    finish event is a failure (`ProviderError`)."""
    events = tuple(events)
    fin = next((e for e in events if isinstance(e, ModelFinish)), None)
    if fin is None:
        raise ProviderError(ApiError(status=None, message="judge stream broke"))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    calls = tuple(
        ToolCallPart(e.tool_call_id, e.tool_name, e.args) for e in events if isinstance(e, ToolCall)
    )
    return ModelAnswer(text, calls, fin.usage, fin.model_id)


def ask_provider(resolve: Callable[[str], Provider], request: AskModel) -> ModelAnswer:
    """A judge's request answered by the provider of its model, in this thread; its
    stream closed however the answer ends."""
    stream = resolve(request.request.model).stream(request.request)
    try:
        return answer_of(stream)
    finally:
        close_stream(stream)


def perform_here(
    resolve: Callable[[str], Provider], handlers: Mapping[type, Callable[[object], object]],
    request: object,
) -> object:
    """Carry out an I/O request a generator hook yielded, in this thread: `AskModel` on
    the provider of its model, any other by its handler (whose answer may be an
    awaitable: the caller decides what to do with one)."""
    if isinstance(request, AskModel):
        return ask_provider(resolve, request)
    return handler_for(handlers, request)(request)


def handler_for(handlers: Mapping[type, H], request: object) -> H:
    """The handler for an I/O request a generator hook yielded (by its type)."""
    handler = handlers.get(type(request))
    if handler is None:
        raise LookupError(f"no handler for I/O request {type(request).__name__}")
    return handler


class NoCleanupStream:
    """Base of a model stream that holds nothing to release (no connection, no task): its
    `close()` ends it at once, without waiting. The async interpreter closes such a stream
    with that plain call instead of the shielded, time-capped `aclose()` every other
    stream gets (a cancel scope and a timer per model call; docs/DESIGN.md, decisions
    made for speed).
    The simulator's streams are such (`ScriptedModel.astream`); a provider's stream that
    holds an HTTP response is not."""

    __slots__ = ()

    def close(self) -> None:
        raise NotImplementedError
