"""The synchronous interpreter: carries out the loop's commands in the calling thread."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping

from effects import AwaitHook, CallModel, Finish, Perform, Publish, Pull, RunTools, Sleep
from interpreters.provider import Provider, ProviderError, ProviderResolver
from interpreters.trace import Trace
from pipeline.agent import Agent
from pipeline.chunks import Chunk, ModelEvent, ModelFinish, TextDelta, ToolCall
from pipeline.loop import (
    AgentLoop,
    LoopCommand,
    ToolInvocation,
    ToolOutcome,
    agent_loop,
)
from pipeline.messages import JsonObject, RunInput, ToolCallPart, to_message_list
from pipeline.model import ApiError, ModelEnded, ModelFailed
from pipeline.processor import AskModel, ModelAnswer, RunContext
from pipeline.result import RunResult

Handler = Callable[[object], object]
"""Carries out one kind of I/O request a generator hook yields."""


class AsyncNotSupportedError(TypeError):
    """The sync interpreter was given an async hook or tool."""


def provider_error(e: Exception) -> ApiError:
    """Any failure of a provider as a typed ApiError (a provider bug is not retried)."""
    if isinstance(e, ProviderError):
        return e.error
    return ApiError(
        status=None, message=f"{type(e).__name__}: {e}", error_type="provider-error"
    )


def run_tool(inv: ToolInvocation) -> ToolOutcome:
    """Run one tool call; a tool that raises becomes an error result the model sees."""
    cid = inv.call.tool_call_id
    if inv.error is not None or inv.tool is None or inv.kwargs is None:
        return ToolOutcome(cid, inv.error or "tool not available", is_error=True)
    try:
        return ToolOutcome(cid, inv.tool.fn(**inv.kwargs))
    except Exception as e:
        return ToolOutcome(cid, f"{type(e).__name__}: {e}", is_error=True)


def answer_of(events: list[ModelEvent]) -> ModelAnswer:
    """Collect a finished model stream into the reply to AskModel."""
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    calls = tuple(
        ToolCallPart(e.tool_call_id, e.tool_name, e.args) for e in events if isinstance(e, ToolCall)
    )
    return ModelAnswer(text, calls)


class SyncInterpreter:
    """Runs agents synchronously against a provider.

    `provider` serves every model, or `resolve` picks one per model id (a step may switch
    models). `handlers` carry out I/O requests of generator hooks, by request type;
    `AskModel` is built in.
    """

    def __init__(
        self,
        provider: Provider | None = None,
        *,
        resolve: ProviderResolver | None = None,
        handlers: Mapping[type, Handler] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        run_ids: Callable[[], str] = lambda: uuid.uuid4().hex[:12],
    ) -> None:
        if resolve is None:
            if provider is None:
                raise ValueError("give a provider or a resolve function")
            fixed = provider
            resolve = lambda _model: fixed  # noqa: E731
        self._resolve = resolve
        self._handlers = dict(handlers or {})
        self._clock = clock
        self._sleep = sleep
        self._run_ids = run_ids

    # --- public API ------------------------------------------------------------------------
    def run(
        self,
        agent: Agent,
        messages: RunInput,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        values: JsonObject | None = None,
        trace: Trace | None = None,
    ) -> RunResult:
        """Run to the end and return the result (check `status`, or call `unwrap()`)."""
        stream = self.stream(
            agent, messages, thread_id=thread_id, resource_id=resource_id,
            values=values, trace=trace,
        )
        for _ in stream:
            pass
        return stream.result

    def stream(
        self,
        agent: Agent,
        messages: RunInput,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        values: JsonObject | None = None,
        trace: Trace | None = None,
    ) -> RunStream:
        """Iterate the run's chunks; `.result` is there once the iteration ended."""
        refuse_async(agent)
        run_id = self._run_ids()
        ctx = RunContext(
            run_id=run_id, thread_id=thread_id, resource_id=resource_id, values=values
        )
        ml = to_message_list(messages, id_prefix=run_id, created_at=self._clock())
        loop = agent_loop(
            agent, ml, context=ctx, clock=self._clock,
            record=trace.record_effect if trace is not None else None,
        )
        return RunStream(self._drive(loop, trace))

    # --- carrying out commands ---------------------------------------------------------
    def _drive(self, loop: AgentLoop, trace: Trace | None) -> Generator[Chunk, None, RunResult]:
        model: Iterator[ModelEvent] | None = None
        try:
            cmd = next(loop)
            while True:
                if trace is not None:
                    trace.record_command(cmd)
                t = type(cmd)
                if t is Pull:
                    assert isinstance(cmd, Pull)
                    for c in cmd.publish:
                        if trace is not None:
                            trace.chunks.append(c)
                        yield c
                    assert model is not None
                    try:  # the per-chunk path: `_next_event` inlined
                        event: object = next(model)
                    except StopIteration:
                        event = ModelEnded()
                    except Exception as e:
                        event = _failed(e, started=True)
                    cmd = loop.send(event)
                    continue
                # Any other command closes the open stream, except a stream hook's own I/O
                # (Perform, AwaitHook) while it processes a chunk: the stream goes on after.
                if model is not None and t is not Perform and t is not AwaitHook:
                    _close(model)
                    model = None
                if t is Finish:
                    assert isinstance(cmd, Finish)
                    return cmd.result
                if t is Publish:
                    assert isinstance(cmd, Publish)
                    for c in cmd.chunks:
                        if trace is not None:
                            trace.chunks.append(c)
                        yield c
                    cmd = loop.send(None)
                elif t is CallModel:
                    assert isinstance(cmd, CallModel)
                    try:
                        model = iter(self._resolve(cmd.request.model).stream(cmd.request))
                    except Exception as e:
                        cmd = loop.send(ModelFailed(provider_error(e)))
                        continue
                    cmd = loop.send(_next_event(model, started=False))
                else:
                    cmd = self._other(loop, cmd)
        finally:
            if model is not None:
                _close(model)
            loop.close()

    def _other(self, loop: AgentLoop, cmd: LoopCommand) -> LoopCommand:
        """Commands outside the streaming path; failures are thrown into the loop."""
        try:
            if isinstance(cmd, RunTools):
                reply: object = tuple(run_tool(inv) for inv in cmd.calls)
            elif isinstance(cmd, Sleep):
                self._sleep(cmd.seconds)
                reply = None
            elif isinstance(cmd, Perform):
                reply = self._perform(cmd.request)
            elif isinstance(cmd, AwaitHook):
                _discard(cmd.awaitable)
                raise AsyncNotSupportedError(
                    f"processor {cmd.processor_id!r} {cmd.hook} returned an awaitable; "
                    "use the async interpreter (interpreters.aio) for async hooks"
                )
            else:
                raise TypeError(f"unknown command {cmd!r}")
        except Exception as e:
            return loop.throw(e)
        return loop.send(reply)

    def _perform(self, request: object) -> object:
        if isinstance(request, AskModel):
            events = list(self._resolve(request.request.model).stream(request.request))
            if not any(isinstance(e, ModelFinish) for e in events):
                raise ProviderError(ApiError(status=None, message="judge stream broke"))
            return answer_of(events)
        handler = self._handlers.get(type(request))
        if handler is None:
            raise LookupError(f"no handler for I/O request {type(request).__name__}")
        return handler(request)


class RunStream:
    """The chunks of a run as an iterator; `result` once it is exhausted.

    Closing it early (or breaking out of a for loop and dropping it) closes the model
    stream and the loop.
    """

    def __init__(self, gen: Generator[Chunk, None, RunResult]) -> None:
        self._gen = gen
        self._box: list[RunResult] = []
        # Iterating hands out this generator itself: no Python-level __next__ per chunk.
        # It keeps the result in a box, not on self, so no cycle delays closing on drop.
        self._chunks = _capture(gen, self._box)

    def __iter__(self) -> Iterator[Chunk]:
        return self._chunks

    def __next__(self) -> Chunk:
        return next(self._chunks)

    def close(self) -> None:
        self._chunks.close()
        self._gen.close()

    @property
    def result(self) -> RunResult:
        if not self._box:
            raise RuntimeError("the run has not finished: iterate the stream to its end")
        return self._box[0]


def _capture(
    gen: Generator[Chunk, None, RunResult], box: list[RunResult]
) -> Generator[Chunk, None, RunResult]:
    result = yield from gen
    box.append(result)
    return result


def refuse_async(agent: Agent) -> None:
    parts = agent.async_parts()
    if parts:
        raise AsyncNotSupportedError(
            "the sync interpreter cannot run async code: "
            + "; ".join(parts)
            + ". Use interpreters.aio.AsyncInterpreter."
        )


def _next_event(model: Iterator[ModelEvent], *, started: bool) -> object:
    try:
        return next(model)
    except StopIteration:
        return ModelEnded()
    except Exception as e:
        return _failed(e, started=started)


def _failed(e: Exception, *, started: bool) -> ModelFailed:
    """The reply for a model stream that raised `e`."""
    err = provider_error(e)
    if started and err.retryable:
        # Bytes already reached the caller: a retry would duplicate them.
        err = ApiError(
            status=err.status, message=err.message, error_type=err.error_type,
            code=err.code, request_id=err.request_id, retryable=False, body=err.body,
        )
    return ModelFailed(err, started=started)


def _close(model: Iterator[ModelEvent]) -> None:
    close = getattr(model, "close", None)
    if close is not None:
        close()


def _discard(awaitable: object) -> None:
    close = getattr(awaitable, "close", None)  # avoid "coroutine was never awaited"
    if close is not None:
        close()
