"""The synchronous interpreter: carries out the loop's commands in the calling thread."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Unpack

from interpreters.core.breaker import CircuitBreaker
from interpreters.core.deadline import StopCheck, run_stop
from interpreters.core.handlers import Handler as Handler
from interpreters.core.options import Deps, RunOptions
from interpreters.observers.observe import Observer
from interpreters.providers.provider import Provider, ProviderResolver
from interpreters.run.base import AsyncNotSupportedError, InterpreterBase, RunOutcome, refuse_async
from interpreters.run.common import (
    child_driver,
    child_failed,
    close_stream,
    has_child_runs,
    perform_here,
    provider_error,
    stream_failed,
)
from interpreters.run.common import run_tool as run_tool
from interpreters.run.started import SyncStarted, SyncStartedFactory, Threaded
from pipeline.agent import Agent
from pipeline.protocol import (
    LAST,
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
    RunLog,
    RunTools,
    Sleep,
    ToolInvocation,
    ToolOutcome,
    discard,
)
from pipeline.values.chunks import Chunk, ModelEvent, ModelFinish
from pipeline.values.cost import Pricer
from pipeline.values.messages import RunInput
from pipeline.values.model import ModelEnded, ModelFailed
from pipeline.values.result import Output, RunResult


class SyncInterpreter(InterpreterBase[Provider]):
    """Runs agents synchronously against a provider.

    `provider` serves every model, or `resolve` picks one per model id (a step may switch
    models). `handlers` carry out I/O requests of generator hooks, by request type;
    `AskModel` is built in. `observers` watch each run (`interpreters.observers.observe`: tracing,
    recording); by default the run is logged to the `pipeline` logger. `price` prices
    each model call (`interpreters.providers.prices.genai_prices()`): the result carries its cost.
    `started` makes a run's started jobs (`effects.started`; worker threads by default).
    `breaker` skips fallback models that keep failing (`interpreters.core.breaker`; by
    default the process's).
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
        observers: Sequence[Observer] | None = None,
        price: Pricer | None = None,
        started: SyncStartedFactory = Threaded,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        super().__init__(
            provider, resolve, handlers, sync=True, clock=clock, run_ids=run_ids,
            observers=observers, price=price, breaker=breaker,
        )
        self._started = started
        self._sleep = sleep

    # --- public API ------------------------------------------------------------------------
    def run(
        self,
        agent: Agent[Deps, Output],
        messages: RunInput,
        **options: Unpack[RunOptions[Deps]],
    ) -> RunResult[Output]:
        """Run to the end and return the result (check `status`, or call `unwrap()`).

        A run cancelled by `signal` (from any thread) or past `timeout` seconds returns with
        status "cancelled", as under the async interpreter (see `stream`)."""
        stream = self.stream(agent, messages, **options)
        for _ in stream:
            pass
        return stream.result

    def stream(
        self,
        agent: Agent[Deps, Output],
        messages: RunInput,
        **options: Unpack[RunOptions[Deps]],
    ) -> RunStream[Output]:
        """Iterate the run's chunks; `.result` is there once the iteration ended.

        The agent's model is resolved at once: a provider that is not configured (no API
        key...) raises its configuration error here, before any request.

        `timeout` (seconds, counted from the first iteration) and `signal` end the run
        with status "cancelled", as under the async interpreter. This thread is never
        interrupted: they are checked before every command and model event, and an HTTP
        provider's waits are cut to the run's deadline (a judge call cut so cancels the
        run there: its hook never sees that failure); a tool or hook that blocks is
        waited for, and no further call of its step starts after it.
        """
        driver = self._start(agent, messages, options)
        stop = StopCheck(options.get("signal"), options.get("timeout"))
        box: list[RunResult] = []
        return RunStream(self._drive(driver, stop, box), box)

    def _check_agent(self, agent: Agent) -> None:
        refuse_async(agent)

    # --- carrying out commands ---------------------------------------------------------
    def _drive(
        self, d: Driver, stop: StopCheck, box: list[RunResult] | None = None
    ) -> Generator[Chunk, None, RunResult]:
        """The run's I/O over its driver (`pipeline.protocol.driver`), handing out its chunks;
        the result is also put in `box` (the stream's: no generator wraps this one to keep
        it, a resume less per chunk)."""
        model: Iterator[ModelEvent] | None = None
        jobs = self._started(self._perform, stop)  # started requests (effects.started)
        guarded = stop.active
        if guarded:
            stop.start()
        try:
            cmd = d.start()
            while True:
                t = type(cmd)  # (once per command: the branches below test `t`)
                if t is Done:
                    if TYPE_CHECKING:
                        assert isinstance(cmd, Done)
                    if box is not None:
                        box.append(cmd.result)
                    return cmd.result
                if guarded and stop.reason() is not None:
                    if model is not None:
                        close_stream(model)
                        model = None
                    yield from d.cancel(stop.reason() or "")
                    assert d.result is not None
                    if box is not None:
                        box.append(d.result)
                    return d.result
                if t is Pull:
                    if TYPE_CHECKING:
                        assert isinstance(cmd, Pull)
                    assert model is not None
                    if not guarded:
                        # The per-chunk path when there is no deadline to check: pull after
                        # pull without going round (the loop's own send when unwatched).
                        m, read = model, model.__next__
                        raw = d.send_pull
                        send = raw if raw is not None else d.send
                        while True:
                            for chunk in cmd.publish:  # (cheaper than `yield from`)
                                yield chunk
                            try:
                                event: object = read()
                            except StopIteration:
                                event = ModelEnded()
                                model = None  # it ended: nothing to close
                            except Exception as e:
                                event = stream_failed(e, started=True)
                                close_stream(m)
                                model = None
                            else:
                                if type(event) is ModelFinish:  # its last event: close it
                                    close_stream(m)
                                    model = None
                            cmd = send(event)
                            if type(cmd) is not Pull:
                                break
                            d.cmd = cmd
                        if raw is not None:
                            cmd = d.took(cmd, event)
                        continue
                    yield from cmd.publish
                    event = _next_event(model, started=True)
                    if type(event) in LAST:
                        close_stream(model)
                        model = None
                    if guarded and stop.reason():
                        continue  # stopped while it waited: the event is not taken; cancel
                    cmd = d.send(event)
                elif t is Publish:
                    if TYPE_CHECKING:
                        assert isinstance(cmd, Publish)
                    for chunk in cmd.chunks:  # (cheaper than `yield from`)
                        yield chunk
                    cmd = d.send(None)
                elif t is CloseStream:  # (only with a stream open: see the driver)
                    if model is not None:
                        close_stream(model)
                        model = None
                    cmd = d.send(None)
                elif t is CallModel:
                    if TYPE_CHECKING:
                        assert isinstance(cmd, CallModel)
                    token = run_stop.set(stop) if guarded else None
                    try:
                        try:
                            model = iter(self._resolve(cmd.request.model).stream(cmd.request))
                        except Exception as e:
                            if guarded and stop.reason():
                                continue  # cut short by the stop: not a failure; cancel
                            cmd = d.send(ModelFailed(provider_error(e)))
                            continue
                        try:  # (`_next_event`, inline: a call less a model call)
                            first: object = next(model)
                        except StopIteration:
                            first = ModelEnded()
                        except Exception as e:
                            first = stream_failed(e, started=False)
                        if type(first) in LAST:
                            close_stream(model)
                            model = None
                    finally:
                        if token is not None:
                            run_stop.reset(token)
                    if guarded and stop.reason():
                        continue  # stopped while it waited: the event is not taken; cancel
                    cmd = d.send(first)
                elif t is Sleep and guarded:
                    if TYPE_CHECKING:
                        assert isinstance(cmd, Sleep)
                    self._sleep(min(cmd.seconds, stop.left()))
                    if stop.reason() is None:
                        cmd = d.send(None)
                elif t is Perform and _commits(cmd):
                    if TYPE_CHECKING:
                        assert isinstance(cmd, Perform)
                    # The run's writes, its last I/O: once begun, a cancel is too late
                    # (the store keeps the turn), so the run finishes with its answer.
                    guarded = False
                    try:
                        reply = perform_here(self._resolve, self._handlers, cmd.request)
                    except Exception as e:
                        cmd = d.fail(e)
                    else:
                        cmd = d.send(reply)
                elif t is RunTools:
                    if TYPE_CHECKING:
                        assert isinstance(cmd, RunTools)
                    calls = cmd.calls
                    if not stop.active and len(calls) == 1 and calls[0].child is None:
                        # One plain call, no stop to check between calls (the usual tool
                        # step): run here, without `_other`'s dispatch (two calls less).
                        try:
                            outcomes = (run_tool(calls[0]),)
                        except Exception as e:
                            cmd = d.fail(e)
                        else:
                            cmd = d.send(outcomes)
                    elif has_child_runs(cmd):
                        cmd = yield from self._step_with_children(d, cmd, stop)
                    else:
                        cmd = self._other(d, cmd, stop, jobs)
                else:
                    cmd = self._other(d, cmd, stop, jobs)
        finally:
            if model is not None:
                close_stream(model)
            jobs.close()
            d.close()

    def _perform(self, request: object) -> object:
        return perform_here(self._resolve, self._handlers, request)

    def _other(
        self, d: Driver, cmd: LoopCommand, stop: StopCheck, jobs: SyncStarted
    ) -> LoopCommand:
        """Commands outside the streaming path; failures are thrown into the loop."""
        try:
            if isinstance(cmd, RunTools):
                if stop.active:
                    return self._run_tools(d, cmd, stop)
                reply: object = tuple(map(run_tool, cmd.calls))
            elif isinstance(cmd, Sleep):
                self._sleep(cmd.seconds)
                reply = None
            elif isinstance(cmd, Perform):
                token = run_stop.set(stop) if stop.active else None
                try:
                    if type(cmd.request) in STARTED_REQUESTS:
                        reply = jobs.answer(cmd.request)
                    else:
                        reply = perform_here(self._resolve, self._handlers, cmd.request)
                finally:
                    if token is not None:
                        run_stop.reset(token)
                if stop.active and stop.reason() is not None:
                    # Stopped while the hook's I/O ran (a judge still deciding): its late
                    # answer is not taken; the run is cancelled at this command.
                    return cmd
            elif isinstance(cmd, AwaitHook):
                discard(cmd.awaitable)
                raise AsyncNotSupportedError(
                    f"processor {cmd.processor_id!r} {cmd.hook} returned an awaitable; "
                    "use the async interpreter (interpreters.aio) for async hooks"
                )
            else:
                raise TypeError(f"unknown command {cmd!r}")
        except Exception as e:
            if type(cmd) is Perform and stop.active and stop.reason() is not None:
                return cmd  # its wait was cut short by the stop: the run is cancelled here
            return d.fail(e)
        return d.send(reply)


    def _step_with_children(
        self, d: Driver, cmd: RunTools[ToolInvocation, ToolOutcome], stop: StopCheck
    ) -> Generator[Chunk, None, LoopCommand]:
        """A tool step that runs child runs (`docs/agents.md`): the calls one after the
        other, each child driven here to its end under the run's stop (its signal and
        deadline reach it), what it publishes handed out as it comes. A cancel that came
        while a call ran starts no further call (the run is cancelled at this command)."""
        outcomes: list[ToolOutcome] = []
        try:
            for inv in cmd.calls:
                if stop.active and stop.reason() is not None:
                    return cmd
                if inv.child is None:
                    outcome = run_tool(inv)
                else:
                    outcome = yield from self._child(inv, stop, d.log)
                d.tool_finished(outcome)
                outcomes.append(outcome)
        except Exception as e:
            return d.fail(e)
        return d.send(tuple(outcomes))

    def _child(
        self, inv: ToolInvocation, stop: StopCheck, log: RunLog | None
    ) -> Generator[Chunk, None, ToolOutcome]:
        """A child run, driven to its end; its result answers the call."""
        assert inv.child is not None
        try:
            d = child_driver(inv.child, clock=self._clock, observers=self._observers,
                             price=self._price)
        except Exception as e:
            return child_failed(inv, e)
        drive = self._drive(d, stop)
        if log is None:
            return ToolOutcome(inv.call.tool_call_id, (yield from drive))
        # what it hands out is recorded as the run's (a few chunks: its live ones)
        chunks = log.chunks
        while True:
            try:
                chunk = next(drive)
            except StopIteration as done:
                return ToolOutcome(inv.call.tool_call_id, done.value)
            chunks.append(chunk)
            yield chunk

    def _run_tools(
        self, d: Driver, cmd: RunTools[ToolInvocation, ToolOutcome], stop: StopCheck
    ) -> LoopCommand:
        """The calls one after the other, as long as the run is not stopped: a cancel
        that came while a call ran starts no further call, and those that finished keep
        their real results (`Driver.tool_finished`), as under the async interpreter."""
        outcomes: list[ToolOutcome] = []
        for inv in cmd.calls:
            if stop.reason() is not None:
                return cmd  # the run is cancelled at this command
            outcome = run_tool(inv)
            d.tool_finished(outcome)
            outcomes.append(outcome)
        return d.send(tuple(outcomes))


class RunStream(RunOutcome[Output]):
    """The chunks of a run as an iterator; `result` once it is exhausted.

        with interp.stream(agent, "hi") as stream:
            for chunk in stream:
                ...
        stream.result

    Closing it early (leaving the `with` block, `close()`, or breaking out of a for loop
    and dropping it) closes the model stream and the loop; the run then has no result.
    """

    def __init__(self, gen: Generator[Chunk, None, RunResult], box: list[RunResult]) -> None:
        # Iterating hands out the run's generator itself: no Python-level __next__ per
        # chunk. It puts the result in `box`, not on self, so no cycle delays closing on drop.
        self._gen = gen
        self._box = box

    def __iter__(self) -> Iterator[Chunk]:
        return self._gen

    def __next__(self) -> Chunk:
        return next(self._gen)

    def __enter__(self) -> RunStream[Output]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop here: the model stream and the loop are closed (a no-op once it ended)."""
        self._gen.close()

    def _outcome(self) -> RunResult[Output] | None:
        return self._box[0] if self._box else None


def _commits(cmd: LoopCommand) -> bool:
    """Whether `cmd` asks for the run's writes (`effects.CommitWrites`)."""
    return isinstance(cmd, Perform) and type(cmd.request) is CommitWrites


def _next_event(model: Iterator[ModelEvent], *, started: bool) -> object:
    try:
        return next(model)
    except StopIteration:
        return ModelEnded()
    except Exception as e:
        return stream_failed(e, started=started)
