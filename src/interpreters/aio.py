"""The async interpreter: carries out the loop's commands on anyio (asyncio or trio).

    interp = AsyncInterpreter(provider)              # anything with `astream(request)`
    result = await interp.run(agent, "hi")           # -> RunResult

    async with interp.stream(agent, "hi") as stream:  # -> AsyncRunStream
        async for chunk in stream:
            ...
    stream.result

Design:
- **Pull-based.** The stream is driven by its consumer, in the consumer's task: each
  `__anext__` carries out commands until it has a chunk to hand out. No background task,
  no queue: a slow consumer holds the model stream at the chunk it is at (backpressure),
  at most one model event's chunks are buffered (and, from a provider with
  `astream_batches`, the rest of one batch of events: one read's), and nothing runs once
  `run` returned or the stream is closed.
- **Async hooks and tools.** A hook that returns an awaitable (`AwaitHook`) is awaited;
  an `async def` tool is awaited. The tool calls of one step run concurrently in a task
  group; their results go back in the order of the calls (a single call runs without
  one, and a sync one without a coroutine).
- **Cancellation.** An `CancelSignal`, a per-run `timeout`, an enclosing anyio cancel
  scope, or closing the stream early (in the task that iterates it; from another task,
  cancel a signal) end the run at once: the interpreter throws
  `RunCancelled` into the loop, which finishes with status "cancelled" and a
  `Cancelled` error, keeps only what the output processors approved (see
  docs/interpreters.md), the real results of tools that finished, and gives each tool call
  still without a result an error result. The model stream is
  closed, always shielded from cancellation (for CLOSE_GRACE seconds), so a provider's
  cleanup (closing its HTTP response) is never cut short; a stream that holds nothing to
  release (`NoCleanupStream`, such as the simulator's) is closed at once by `close()`.
  With a signal or a timeout `run` returns that result; an enclosing cancel scope's
  cancellation is re-raised (as anyio requires) and the result stays readable on the
  stream's `.result`.
"""

from __future__ import annotations

import functools
import inspect
import math
import time
import uuid
from collections import deque
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    Mapping,
    Sequence,
)
from types import AsyncGeneratorType, CoroutineType
from typing import TYPE_CHECKING, Unpack

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from interpreters.core.awaits import Rest
from interpreters.core.breaker import CircuitBreaker
from interpreters.core.cancel import CancelSignal
from interpreters.core.deadline import StopCheck
from interpreters.core.handlers import Handler
from interpreters.core.options import Deps, RunOptions
from interpreters.observers.observe import Observer
from interpreters.providers.provider import AsyncProvider, AsyncProviderResolver
from interpreters.run.base import InterpreterBase, RunOutcome
from interpreters.run.common import (
    NoCleanupStream,
    answer_of,
    child_driver,
    child_failed,
    handler_for,
    has_child_runs,
    provider_error,
    runs_children,
    stream_failed,
    tool_failed,
    unrunnable,
)
from interpreters.run.started import AsyncStarted, starts_requests
from pipeline.agent import Agent
from pipeline.processor import AskModel
from pipeline.protocol import (
    STARTED_REQUESTS,
    AwaitHook,
    CallModel,
    CloseStream,
    CommitWrites,
    Done,
    Driver,
    LoopCommand,
    Perform,
    Publish,
    Pull,
    RunTools,
    Sleep,
    ToolInvocation,
    ToolOutcome,
)
from pipeline.tools import Tool
from pipeline.values.chunks import Chunk, ModelEvent, ModelFinish
from pipeline.values.cost import Pricer
from pipeline.values.messages import RunInput
from pipeline.values.model import ModelEnded, ModelFailed, ModelRequest
from pipeline.values.result import Output, RunResult

AsyncHandler = Handler
"""Carries out one kind of I/O request a generator hook yields; may return an awaitable."""

_NO_BUFFER: deque[Chunk] = deque(maxlen=0)
"""The buffer of a stream nobody reads (`run`): always empty, whatever is put in it."""

CLOSE_GRACE = 5.0
"""Seconds a model stream gets to close (shielded from cancellation) before it is left."""

CANCELLED_BY_CALLER = "cancelled by the caller"
STREAM_CLOSED = "the stream was closed before the run ended"


class AsyncInterpreter(InterpreterBase[AsyncProvider]):
    """Runs agents on anyio against an async provider.

    `provider` serves every model, or `resolve` picks one per model id. `handlers` carry
    out I/O requests of generator hooks, by request type (a handler may be sync or
    async); `AskModel` is built in. `sleep` waits before retrying a transient failure.
    Sync tools run in the event loop's thread unless `tools_in_threads` (then in worker
    threads; a cancelled run waits for such a tool to return). `observers` watch each
    run (`interpreters.observers.observe`); by default the run is logged to the `pipeline` logger.
    `price` prices each model call (`pipeline.values.cost`): the result carries its cost.
    `breaker` skips fallback models that keep failing (`interpreters.core.breaker`; by
    default the process's).
    """

    def __init__(
        self,
        provider: AsyncProvider | None = None,
        *,
        resolve: AsyncProviderResolver | None = None,
        handlers: Mapping[type, AsyncHandler] | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        run_ids: Callable[[], str] = lambda: uuid.uuid4().hex[:12],
        observers: Sequence[Observer] | None = None,
        price: Pricer | None = None,
        tools_in_threads: bool = False,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        super().__init__(
            provider, resolve, handlers, sync=False, clock=clock, run_ids=run_ids,
            observers=observers, price=price, breaker=breaker,
        )
        self._sleep = sleep
        self._tools_in_threads = tools_in_threads

    # --- public API ------------------------------------------------------------------------
    async def run(
        self,
        agent: Agent[Deps, Output],
        messages: RunInput,
        **options: Unpack[RunOptions[Deps]],
    ) -> RunResult[Output]:
        """Run to the end and return the result (check `status`, or call `unwrap()`).

        A run cancelled by `signal` or past `timeout` seconds returns with status
        "cancelled". A cancelled enclosing scope re-raises its cancellation.
        """
        stream = self._stream(agent, messages, options, hand_out=False)
        starts = starts_requests(agent)
        if starts or stream._stop is not None:
            return await self._run_to_end(stream, starts)
        # `_run_to_end`, `_drive` and `_advance_guarded` (no scope to enter) inline: fewer
        # coroutines alive per run across its waits, for the collector to walk
        # (docs/DESIGN.md, decisions made for speed).
        stream._busy = True
        try:
            await stream._advance()  # (under `run`, returns only when the run is over)
        except BaseException as e:
            await stream._failed(e)
            raise
        finally:
            stream._busy = False
        result = stream._d.result  # (`done` and `result` inline: four calls fewer per run)
        while result is None:
            await stream._advance_guarded()
            result = stream._d.result
        return result

    async def _run_to_end(self, stream: AsyncRunStream[Output], starts: bool) -> RunResult[Output]:
        """`run`'s stream (or a child run's) driven to its end."""
        if starts:  # its started jobs run in a task group of the run's
            try:
                async with anyio.create_task_group() as group:
                    stream._started().group = group
                    try:
                        return await self._drive(stream)
                    finally:
                        stream._close_started()
            except BaseExceptionGroup as g:  # the run's own error, as itself (jobs never raise)
                if len(g.exceptions) == 1:
                    raise g.exceptions[0] from None
                raise
        return await self._drive(stream)

    async def _drive(self, stream: AsyncRunStream[Output]) -> RunResult[Output]:
        """A stream `run` does not drive itself (a child run's, one with a signal, a
        timeout or started jobs), driven to its end."""
        while not stream.done:
            await stream._advance_guarded()
        return stream.result

    def stream(
        self,
        agent: Agent[Deps, Output],
        messages: RunInput,
        **options: Unpack[RunOptions[Deps]],
    ) -> AsyncRunStream[Output]:
        """The run's chunks as an async iterator; nothing happens until it is iterated.

        Only the agent's model is resolved at once: a provider that is not configured (no
        API key...) raises its configuration error here, before any request.
        """
        return self._stream(agent, messages, options, hand_out=True)

    def _stream(
        self, agent: Agent, messages: RunInput, options: RunOptions, *, hand_out: bool
    ) -> AsyncRunStream:
        """The run's stream; `hand_out=False` when `run` drives it (nobody reads the chunks:
        it runs straight through, its chunks go to the trace only)."""
        driver = self._start(agent, messages, options)
        return AsyncRunStream(
            self, driver, options.get("signal"), options.get("timeout"), hand_out=hand_out,
            starts=hand_out and (starts_requests(agent) or runs_children(agent)),
        )

    # --- commands other than the model stream -----------------------------------------------
    async def _carry_out(
        self, cmd: LoopCommand, each_done: Callable[[ToolOutcome], None]
    ) -> object:
        if isinstance(cmd, RunTools):
            return await self._run_tools(cmd.calls, each_done)
        if isinstance(cmd, AwaitHook):
            return await cmd.awaitable
        if isinstance(cmd, Sleep):
            await self._sleep(cmd.seconds)
            return None
        if isinstance(cmd, Perform):
            return await self._perform(cmd.request)
        raise TypeError(f"unknown command {cmd!r}")

    async def _run_tools(
        self,
        calls: tuple[ToolInvocation, ...],
        each_done: Callable[[ToolOutcome], None],
        sink: Sink | None = None,
    ) -> tuple[ToolOutcome, ...]:
        """Run the calls concurrently; the outcomes in the order of the calls. Each outcome
        is also told to `each_done` as its call finishes (kept when the run is cancelled).
        `sink`: where what child runs publish goes, as it comes (None: nowhere)."""
        if len(calls) == 1:
            only = await self._run_tool(calls[0], sink)
            each_done(only)
            return (only,)
        outcomes: list[ToolOutcome | None] = [None] * len(calls)

        async def one(i: int, inv: ToolInvocation) -> None:
            outcomes[i] = o = await self._run_tool(inv, sink)
            each_done(o)

        try:
            async with anyio.create_task_group() as tg:
                for i, inv in enumerate(calls):
                    tg.start_soon(one, i, inv)
        except BaseExceptionGroup as group:
            stop = _stop_of(group)
            if stop is None:
                raise
            raise stop from None
        return tuple(o for o in outcomes if o is not None)

    async def _run_tool(self, inv: ToolInvocation, sink: Sink | None = None) -> ToolOutcome:
        """One tool call; a tool that raises becomes an error result the model sees."""
        now = self._call_tool(inv, sink)
        return now if isinstance(now, ToolOutcome) else await now

    def _call_tool(
        self, inv: ToolInvocation, sink: Sink | None = None
    ) -> ToolOutcome | Awaitable[ToolOutcome]:
        """Start one tool call: its outcome when it is there at once (a sync tool in the
        loop's thread, a call that cannot run), else an awaitable of it. Saves a sync
        tool the coroutines of an async call (docs/DESIGN.md, decisions made for speed)."""
        tool, kwargs = inv.tool, inv.kwargs
        if inv.error is not None or tool is None or kwargs is None:
            return unrunnable(inv) if inv.child is None else self._run_child(inv, sink)
        if tool.is_async or self._tools_in_threads:
            return self._await_tool(inv, tool, kwargs)
        try:
            result = tool.fn(**kwargs)
        except Exception as e:
            return tool_failed(inv, e)
        if hasattr(result, "__await__"):  # a sync tool that returns an awaitable
            return _tool_result(inv, result)
        return ToolOutcome(inv.call.tool_call_id, result)

    async def _run_child(self, inv: ToolInvocation, sink: Sink | None) -> ToolOutcome:
        """A child run (`docs/agents.md`), driven to its end in this task (or the step's
        task group): the parent's cancel scope, deadline and signal reach it, and it
        never outlives the parent's step. What it publishes goes to `sink` as it comes
        (None: nowhere); its result answers the call."""
        child = inv.child
        assert child is not None
        try:
            d = child_driver(child, clock=self._clock, observers=self._observers,
                             price=self._price)
        except Exception as e:
            return child_failed(inv, e)
        agent = child.tool.agent
        if sink is None:
            quiet: AsyncRunStream[object] = AsyncRunStream(self, d, None, None, hand_out=False)
            result = await self._run_to_end(quiet, starts_requests(agent))
            return ToolOutcome(inv.call.tool_call_id, result)
        stream: AsyncRunStream[object] = AsyncRunStream(
            self, d, None, None, starts=starts_requests(agent) or runs_children(agent))
        async with stream:
            async for chunk in stream:
                await sink(chunk)
        return ToolOutcome(inv.call.tool_call_id, stream.result)

    async def _await_tool(
        self, inv: ToolInvocation, tool: Tool, kwargs: dict[str, object]
    ) -> ToolOutcome:
        try:
            if not tool.is_async and self._tools_in_threads:
                result = await anyio.to_thread.run_sync(functools.partial(tool.fn, **kwargs))
            else:
                result = tool.fn(**kwargs)
            if hasattr(result, "__await__"):  # an async tool, or a sync one returning one
                result = await result
        except Exception as e:
            return tool_failed(inv, e)
        return ToolOutcome(inv.call.tool_call_id, result)

    async def _perform(self, request: object) -> object:
        if isinstance(request, AskModel):
            events: list[ModelEvent] = []
            stream = self._resolve(request.request.model).astream(request.request)
            if _to_open(stream):
                stream = await _open(stream)
            try:
                async for e in stream:
                    events.append(e)
            finally:
                await _close_shielded(stream)
            return answer_of(events)
        answer = handler_for(self._handlers, request)(request)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer


class AsyncRunStream(RunOutcome[Output]):
    """The chunks of one run, pulled by the consumer; `result` once the run is over.

    Use `async with` (or call `aclose()`) so that a consumer that stops early closes the
    model stream at once: the run then ends "cancelled" with what it had so far.

    A stream belongs to the task that iterates it: `aclose()` is for that task, and a
    second task that calls `__anext__` or `aclose()` while the first waits in `__anext__`
    gets a RuntimeError. To stop a stream from another task (a watcher), give it a
    `signal=CancelSignal()` and call `signal.cancel(reason)`: the iterating task then ends
    the run as cancelled, and its `async for` receives the final chunks and stops.
    """

    __slots__ = (
        "_batches", "_buf", "_busy", "_closed", "_d", "_delivered", "_events", "_group",
        "_hand_out", "_interp", "_jobs", "_model", "_ready", "_send_event", "_starts",
        "_stop", "_tools",
    )

    def __init__(
        self,
        interp: AsyncInterpreter,
        driver: Driver,
        signal: CancelSignal | None,
        timeout: float | None,
        *,
        hand_out: bool = True,
        starts: bool = False,
    ) -> None:
        self._interp = interp
        self._d = driver
        """The run's protocol state (`pipeline.protocol.driver`): this class does its I/O."""
        raw = driver.send_pull
        self._send_event = raw if raw is not None else driver.send
        """How a Pull is answered with a model event (the loop's own send when unwatched:
        then each Pull is set as the driver's `cmd`, the first other command `took`)."""
        self._stop = (
            StopCheck(signal, timeout, anyio.current_time)
            if signal is not None or timeout is not None else None
        )
        """The run's signal and timeout (None: neither), on the event loop's clock."""
        self._delivered = False
        """The pending Pull's chunks went out; its reply (the next event) is still due."""
        self._model: AsyncIterator[object] | None = None
        # The open model stream again, by its kind, read with the builtin `anext` (no bound
        # `__anext__` kept: one object fewer per waiting run for the collector to walk).
        self._events: AsyncIterator[ModelEvent] | None = None
        """The open model stream of events (a provider's `astream`)."""
        self._batches: AsyncIterator[Sequence[ModelEvent]] | None = None
        """The open model stream of batches (a provider's `astream_batches`)."""
        self._ready: Iterator[ModelEvent] = _NO_EVENTS
        """The events of the last batch not sent to the loop yet."""
        # (`run`'s stream buffers nothing: one object fewer per run for the GC to walk)
        self._buf: deque[Chunk] = deque() if hand_out else _NO_BUFFER
        self._closed = False
        self._busy = False
        """A task is inside `_advance_guarded` (waiting on the model, a tool, a hook...)."""
        self._hand_out = hand_out
        """False when `run` drives the stream: chunks go to the trace only, none wait."""
        self._jobs: AsyncStarted | None = None
        self._starts = starts
        """Its agent has a processor that starts requests (`starts_requests`)."""
        self._group: anyio.abc.TaskGroup | None = None
        self._tools: _ToolsAside | None = None
        """A tool step with child runs, running in the block's task group while their
        chunks are handed out (`_step_with_children`)."""

    # --- the async iterator ------------------------------------------------------------
    def __aiter__(self) -> AsyncRunStream[Output]:
        return self

    async def __anext__(self) -> Chunk:
        buf = self._buf
        while not buf:
            if self._d.result is not None or self._closed:
                raise StopAsyncIteration
            if self._stop is not None or self._busy:
                await self._advance_guarded()
                continue
            # `_advance_guarded` without a stop, inline: a coroutine fewer per chunk
            # (docs/DESIGN.md, decisions made for speed)
            self._busy = True
            try:
                await self._advance()
            except BaseException as e:
                await self._failed(e)
                raise
            finally:
                self._busy = False
        return buf.popleft()

    async def __aenter__(self) -> AsyncRunStream[Output]:
        if self._starts:  # its started jobs run in a task group around the block
            self._group = anyio.create_task_group()
            self._started().group = await self._group.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.aclose()
        finally:
            group, self._group = self._group, None
            if group is not None:
                self._close_started()
                # The jobs never raise (each keeps its failure for its Collect): the
                # block's own exception, if any, goes on as itself.
                await group.__aexit__(None, None, None)

    def _started(self) -> AsyncStarted:
        """The run's started jobs (`effects.started`), made at the first one."""
        jobs = self._jobs
        if jobs is None:
            jobs = self._jobs = AsyncStarted(self._interp._perform)
        return jobs

    def _close_started(self) -> None:
        if self._jobs is not None:
            self._jobs.close()

    async def aclose(self) -> None:
        """Stop here: a run not over yet ends "cancelled"; the model stream is closed.

        Raises RuntimeError while another task waits in `__anext__` (see the class doc).
        """
        if self._busy:
            raise RuntimeError(
                "aclose() called while another task waits in this stream's __anext__; "
                "to stop a stream from another task, give it a signal "
                "(stream(..., signal=CancelSignal())) and call signal.cancel()"
            )
        if self._d.result is None and not self._closed:
            await self._cancel(STREAM_CLOSED)
        self._buf.clear()
        self._closed = True

    def _outcome(self) -> RunResult[Output] | None:
        return self._d.result

    # --- driving the loop ----------------------------------------------------------------
    async def _advance_guarded(self) -> None:
        """`_advance`, under the run's timeout and signal; a cancellation ends the run."""
        if self._busy:
            raise RuntimeError("another task is iterating this stream (one task at a time)")
        self._busy = True
        try:
            stop = self._stop
            if stop is None:
                await self._advance()
                return
            stop.start()
            reason = stop.reason()
            if reason is None:
                signal = stop.signal
                with anyio.CancelScope(
                    deadline=math.inf if stop.deadline is None else stop.deadline
                ) as scope:
                    if signal is not None:
                        signal.watch(scope)
                    stopped_first = False
                    try:
                        await self._advance()
                    except _StoppedFirst:
                        stopped_first = True
                    finally:
                        if signal is not None:
                            signal.unwatch(scope)
                if not (scope.cancelled_caught or stopped_first):
                    return
                reason = stop.reason() or CANCELLED_BY_CALLER
            await self._cancel(reason)
        except BaseException as e:
            await self._failed(e)
            raise
        finally:
            self._busy = False

    async def _failed(self, e: BaseException) -> None:
        """After `_advance` raised (the caller re-raises): an enclosing scope's cancellation
        finishes the run as cancelled; anything else closes the model stream and the loop."""
        if isinstance(e, anyio.get_cancelled_exc_class()):
            with anyio.CancelScope(shield=True):
                await self._cancel(CANCELLED_BY_CALLER)
            return
        self._closed = True
        await self._close_model()
        self._d.close()

    async def _advance(self) -> None:
        """Carry out commands until there are chunks to hand out or the run is over."""
        d = self._d
        cmd = d.cmd
        if cmd is None:
            cmd = d.start()
        hand_out = self._hand_out
        send_event = self._send_event
        while True:
            t = type(cmd)  # (once per command: the branches below test `t`)
            if t is Pull:
                if TYPE_CHECKING:
                    assert isinstance(cmd, Pull)
                publish = cmd.publish
                if publish and not self._delivered and hand_out:
                    self._buf.extend(publish)
                    self._delivered = True  # the next event is read on the next pull
                    return
                self._delivered = False
                events = self._events
                if events is not None:
                    try:  # the per-chunk path: the next event; closed after its last
                        reply: object = await anext(events)
                    except Exception as e:
                        reply = await self._stream_ended(e, started=True)
                    else:
                        if type(reply) is ModelFinish:
                            await self._close_model()
                    cmd = send_event(reply)
                    if type(cmd) is Pull:
                        d.cmd = cmd
                    elif d.fast:
                        cmd = d.took(cmd, reply)
                    continue
                # The per-chunk path of a stream of batches: an event of the batch at hand
                # goes to the loop without an await.
                event: ModelEvent | None = next(self._ready, None)
                if event is not None and type(event) is not ModelFinish:
                    cmd = send_event(event)
                    if type(cmd) is Pull:
                        d.cmd = cmd
                    elif d.fast:
                        cmd = d.took(cmd, event)
                else:
                    cmd = await self._from_batches(event, started=True)
                continue
            # Past a pull, the locals of the commands before let go of what they held (the
            # last model stream, read by event or in batches, reply, published chunks and
            # tool calls): a run waiting on its next model call or tool keeps none alive.
            events = model = batches = reply = now = None
            publish = ()
            calls: tuple[ToolInvocation, ...] = ()
            if t is CloseStream:  # (only with a stream open: see the driver)
                await self._close_model()
                cmd = d.send(None)
            elif t is Publish:
                if TYPE_CHECKING:
                    assert isinstance(cmd, Publish)
                if hand_out:
                    self._buf.extend(cmd.chunks)
                cmd = d.send(None)
                if self._buf:  # (never when `run` drives)
                    return
            elif t is Done:
                return
            elif t is RunTools and (  # (one call, the usual step: no scan, no call)
                cmd.calls[0].child is not None  # type: ignore[union-attr]
                if len(cmd.calls) == 1 else has_child_runs(cmd)  # type: ignore[union-attr]
            ):
                nxt = await self._step_with_children(cmd)  # type: ignore[arg-type]
                if nxt is None:
                    return  # a child's chunks to hand out; the step goes on
                cmd = nxt
            elif t is CallModel:
                if TYPE_CHECKING:
                    assert isinstance(cmd, CallModel)
                try:
                    provider = self._interp._resolve(cmd.request.model)
                    batches = _batches(provider, cmd.request)
                    if batches is not None:
                        if not hasattr(type(batches), "__anext__"):  # (fails the call here)
                            raise TypeError(
                                f"astream_batches gave a {type(batches).__name__}: no __anext__")
                        self._batches = batches
                        model = None
                    else:
                        model = provider.astream(cmd.request)
                        if _to_open(model):
                            model = await _open(model)
                except Exception as e:
                    self._stopped_first()
                    cmd = d.send(ModelFailed(provider_error(e)))
                    continue
                if model is None:
                    self._model = batches
                    cmd = await self._from_batches(None, started=False)
                    continue
                self._model = model
                self._events = model
                try:  # its first event, as in the Pull branch (started=False)
                    reply = await anext(model)
                except Exception as e:
                    reply = await self._stream_ended(e, started=False)
                else:
                    if type(reply) is ModelFinish:
                        await self._close_model()
                cmd = d.send(reply)
            else:
                calls = cmd.calls if type(cmd) is RunTools else ()
                if len(calls) == 1:
                    # No task group, no coroutine for a sync tool (and no list of finished
                    # calls: a cancel can land only while the one call runs)
                    now = self._interp._call_tool(calls[0])
                    if not isinstance(now, ToolOutcome):
                        now = await now
                    cmd = d.send((now,))
                    continue
                try:
                    if isinstance(cmd, Perform) and type(cmd.request) in STARTED_REQUESTS:
                        reply = await self._started().answer(cmd.request)
                    elif isinstance(cmd, Perform) and type(cmd.request) is CommitWrites:
                        # The run's writes, its last I/O: a cancel before it begins
                        # saves nothing; once begun, a cancel is too late (the store
                        # keeps the turn; each store call is bounded by the store's own
                        # timeout), so the run finishes with its answer.
                        await anyio.lowlevel.checkpoint_if_cancelled()
                        with anyio.CancelScope(shield=True):
                            reply = await self._interp._perform(cmd.request)
                    else:
                        reply = await self._interp._carry_out(cmd, d.tool_finished)
                except Exception as e:
                    cmd = d.fail(e)
                else:
                    cmd = d.send(reply)

    async def _from_batches(self, event: ModelEvent | None, *, started: bool) -> LoopCommand:
        """Answer the pending pull (or model call: `started` False) from the stream of
        batches: with `event` when given (taken from the batch at hand), else with the
        first event of the next batch, the rest of it kept for the next pulls; the
        loop's next command. Under `run` without a trace (no chunk waits to be handed
        out), the pulls after it too, as long as the loop asks for nothing else, each
        event of a batch without an await (docs/DESIGN.md, decisions made for speed).
        The stream is closed after its last event."""
        d = self._d
        quiet = not self._hand_out and d.fast
        raw = d.send_pull
        send = raw if quiet and raw is not None else d.send
        ready = self._ready
        batches = self._batches
        assert batches is not None
        while True:
            if event is None:
                try:
                    batch = await anext(batches)
                    while not batch:
                        batch = await anext(batches)
                except Exception as e:
                    return d.send(await self._stream_ended(e, started=started))
                if len(batch) == 1:
                    event = batch[0]
                else:
                    self._ready = ready = iter(batch)
                    event = next(ready)
            if type(event) is ModelFinish:
                await self._close_model()
                return d.send(event)
            if not started:  # the model call's first event: the stream opens (`send`)
                cmd = d.send(event)
            else:
                cmd = send(event)
                if type(cmd) is not Pull:
                    return d.took(cmd, event) if send is raw else cmd
                d.cmd = cmd
            if not quiet or type(cmd) is not Pull:
                return cmd
            started = True
            event = next(ready, None)

    async def _stream_ended(self, e: Exception, *, started: bool) -> object:
        """The reply for a model stream that ended (`e`: StopAsyncIteration) or failed."""
        await self._close_model()
        if isinstance(e, StopAsyncIteration):
            return ModelEnded()
        self._stopped_first()
        return stream_failed(e, started=started)

    def _stopped_first(self) -> None:
        """Before a model call's failure is the run's: if the run's timeout or signal was
        due first (the failure reached us before the scope's cancellation did, in a
        process held past it), the run is cancelled instead, as under the sync one."""
        stop = self._stop
        if stop is not None and stop.reason() is not None:
            raise _StoppedFirst

    async def _close_model(self) -> None:
        """Close the open model stream, shielded from cancellation (for CLOSE_GRACE)."""
        model = self._model
        if model is not None:
            self._model = self._events = self._batches = None
            self._ready = _NO_EVENTS
            rest = _close_now(model)
            if rest is not None:
                await rest

    async def _step_with_children(
        self, cmd: RunTools[ToolInvocation, ToolOutcome]
    ) -> LoopCommand | None:
        """A tool step that runs child runs (`docs/agents.md`); the next command, or None
        when there are chunks to hand out first (the step goes on at the next call).

        Inside the stream's `async with` block (its task group), with a consumer, the
        calls run in a task of that group and what the children publish is handed out
        as it comes: the consumer reads it while they run, each chunk waiting for the
        consumer (`CHILD_CHUNKS` at most in between). Otherwise the calls run in this
        task and what the children publish goes to the buffer as it comes, handed out
        after the step."""
        d = self._d
        if self._hand_out and self._group is not None:
            aside = self._tools
            if aside is None:
                aside = self._tools = _ToolsAside()
                self._group.start_soon(aside.run, self._interp, cmd.calls, d.tool_finished)
            try:
                chunk = await aside.chunks.receive()
            except anyio.EndOfStream:
                self._tools = None
                outcome = aside.outcome
                if isinstance(outcome, tuple):
                    return d.send(outcome)
                if isinstance(outcome, Exception):
                    return d.fail(outcome)
                raise RuntimeError("the tool step ended without outcomes") from None
            self._handed(chunk)
            return None
        try:
            outcomes = await self._interp._run_tools(
                cmd.calls, d.tool_finished,
                self._kept if self._hand_out or d.log is not None else None)
        except Exception as e:
            return d.fail(e)
        return d.send(outcomes)

    def _handed(self, chunk: Chunk) -> None:
        """A child's chunk for the caller: buffered, recorded in the run's trace."""
        self._buf.append(chunk)
        log = self._d.log
        if log is not None:
            log.chunks.append(chunk)

    async def _kept(self, chunk: Chunk) -> None:
        self._handed(chunk)

    async def _stop_aside(self) -> None:
        """Stop a tool step running aside (a cancel): its children end cancelled; what
        they published meanwhile is not handed out."""
        aside, self._tools = self._tools, None
        if aside is None:
            return
        with anyio.CancelScope(shield=True):
            aside.scope.cancel()
            async for _ in aside.chunks:
                pass

    async def _cancel(self, reason: str) -> None:
        """End the run as cancelled: the loop finishes without I/O; close the model."""
        await self._stop_aside()
        if not self._closed:
            chunks = self._d.cancel(reason)
            if self._hand_out:
                self._buf.extend(chunks)
        await self._close_model()


_NO_EVENTS: Iterator[ModelEvent] = iter(())

Sink = Callable[[Chunk], Awaitable[None]]
"""Where what a child run publishes goes, chunk by chunk."""

CHILD_CHUNKS = 16
"""How many chunks of child runs wait for the consumer at most before they wait too."""


class _StoppedFirst(Exception):
    """A model call failed after the run's own stop was due (`_stream_ended`)."""


class _ToolsAside:
    """A tool step with child runs, in a task of the stream's task group: the chunks the
    children publish, and the step's outcomes (or its failure) once it ended (its chunk
    stream then ends)."""

    __slots__ = ("chunks", "outcome", "scope", "send")

    def __init__(self) -> None:
        send, self.chunks = anyio.create_memory_object_stream[Chunk](CHILD_CHUNKS)
        self.send = send
        self.scope = anyio.CancelScope()
        self.outcome: tuple[ToolOutcome, ...] | Exception | None = None

    async def run(
        self,
        interp: AsyncInterpreter,
        calls: tuple[ToolInvocation, ...],
        each_done: Callable[[ToolOutcome], None],
    ) -> None:
        async with self.send:
            with self.scope:
                try:
                    self.outcome = await interp._run_tools(calls, each_done, self.send.send)
                except Exception as e:
                    self.outcome = e


def _batches(
    provider: AsyncProvider, request: ModelRequest
) -> AsyncIterator[Sequence[ModelEvent]] | None:
    """The provider's stream of batches of events when it has one (`astream_batches`:
    an `AsyncBatchProvider`, as `AsyncHttpProvider`), else None (its `astream` is read
    event by event). Only when a class wrote `astream_batches` at or below the one that
    wrote `astream`: not from a subclass that overrides `astream` alone, nor from a proxy
    that hands out another provider's `astream_batches` (`__getattr__`), whose batches
    would bypass the events its own `astream` changes."""
    batches: Callable[[ModelRequest], AsyncIterator[Sequence[ModelEvent]]] | None = getattr(
        provider, "astream_batches", None
    )
    if batches is None:
        return None
    mro = type(provider).__mro__
    of_batches = next((c for c in mro if "astream_batches" in c.__dict__), None)
    of_events = next((c for c in mro if "astream" in c.__dict__), None)
    if of_batches is None or (of_events is not None and not issubclass(of_batches, of_events)):
        return None  # (a few dict lookups per model call)
    return batches(request)


def _to_open(stream: object) -> bool:
    """Whether what `astream` returned is an awaitable of the stream (an `async def
    astream` that returns the iterator), not the stream itself."""
    return not isinstance(stream, _STREAMS) and inspect.isawaitable(stream)


_STREAMS = (AsyncGeneratorType, NoCleanupStream)
"""Streams as `astream` gives them (a tuple made once: no union per model call)."""


async def _open(stream: object) -> AsyncIterator[ModelEvent]:
    """The model stream an `async def astream` returns (see `_to_open`)."""
    assert inspect.isawaitable(stream)
    opened: AsyncIterator[ModelEvent] = await stream
    return opened


def _stop_of(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The (first) KeyboardInterrupt or SystemExit a task group of tools raised, to
    propagate as itself (an exception group is no KeyboardInterrupt to the caller)."""
    todo: list[BaseException] = [group]
    while todo:
        e = todo.pop(0)
        if isinstance(e, BaseExceptionGroup):
            todo[:0] = e.exceptions
        elif isinstance(e, KeyboardInterrupt | SystemExit):
            return e
    return None


async def _tool_result(inv: ToolInvocation, result: Awaitable[object]) -> ToolOutcome:
    """The outcome of a sync tool that returned an awaitable."""
    try:
        value = await result
    except Exception as e:
        return tool_failed(inv, e)
    return ToolOutcome(inv.call.tool_call_id, value)


async def _close_shielded(stream: AsyncIterator[ModelEvent]) -> None:
    """Close a model stream; a cancellation does not cut the provider's cleanup (closing
    the HTTP response) short, though the cleanup gets CLOSE_GRACE seconds at most."""
    rest = _close_now(stream)
    if rest is not None:
        await rest


def _close_now(stream: AsyncIterator[object]) -> Awaitable[None] | None:
    """What closes a model stream, shielded from cancellation for CLOSE_GRACE seconds
    (a provider's cleanup, closing its HTTP response, is never cut short); None when
    there is nothing to close (a generator that already ended, no `aclose`), or when the
    stream closed at once, holding nothing to release (`NoCleanupStream`)."""
    if isinstance(stream, NoCleanupStream):
        stream.close()
        return None
    if type(stream) is AsyncGeneratorType and stream.ag_frame is None:
        return None
    close = getattr(stream, "aclose", None)
    if close is None:
        return None
    closing = close()
    if type(stream) is AsyncGeneratorType or type(closing) is CoroutineType:
        return _shielded_steps(closing)
    return _shielded(closing)


async def _shielded(close: Awaitable[object]) -> None:
    with anyio.move_on_after(CLOSE_GRACE, shield=True):
        await close


async def _shielded_steps(close: Awaitable[object]) -> None:
    """`_shielded` for a coroutine or a generator's close (they step by `send`): its
    first step taken in the shield with no deadline, which it needs only if it waits. A
    cleanup with nothing to wait for (a generator's `finally` without an `await`, the
    usual case) so costs no timer (docs/DESIGN.md, decisions made for speed)."""
    with anyio.CancelScope(shield=True) as scope:
        steps = close.__await__()
        try:
            first = steps.send(None)
        except StopIteration:
            return
        scope.deadline = anyio.current_time() + CLOSE_GRACE  # it waits: from now
        await Rest(steps, first)  # (the close goes on as `await close` would)


__all__ = ["CancelSignal", "AsyncHandler", "AsyncInterpreter", "AsyncRunStream"]
