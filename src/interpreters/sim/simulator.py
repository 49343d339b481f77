"""The deterministic simulator: a scripted model, virtual time, and a full trace.

Use it in your own tests the way pydantic-ai users use TestModel / FunctionModel:

    model = ScriptedModel([Say("Let me look.", calls=[call("weather", city="Paris")]),
                           Say("Sunny.")])
    run = Simulator(model).run(agent, "Weather in Paris?")
    assert run.result.text == "Let me look.Sunny."
    assert run.trace.chunk_types()[-1] == "finish"

Everything is reproducible: message ids, tool-call ids and the clock come from the
simulator, and latency and retry backoff advance a virtual clock instead of sleeping. Run
ids are unique across simulators (`run1-<8 hex digits>`, the digits drawn once per
simulator), as on every interpreter, so a second simulator over the same store (a
restart) never reuses a message id; `run_ids=numbered_run_ids()` gives `run1`, `run2`...
where a test wants them fixed.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, Unpack

import msgspec

from interpreters.core.breaker import CircuitBreaker
from interpreters.core.options import CancellableScope, Deps, RunOptions, check_options, keys_of
from interpreters.core.trace import Trace
from interpreters.observers.observe import Observer
from interpreters.providers.provider import ProviderError
from interpreters.record.replay import replay_sync
from interpreters.run.common import NoCleanupStream
from interpreters.sim.clock import Deadlines, Virtual, VirtualClock, VirtualDeadline
from interpreters.sync import Handler, RunStream, SyncInterpreter
from pipeline import Agent, Chunk, DataChunk, ModelRequest, Pricer, RunResult, TextDelta
from pipeline.protocol import ModelEvent, ModelFinish
from pipeline.values import (
    ApiError,
    FinishReason,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunInput,
    ServerToolCall,
    ServerToolResult,
    SourceChunk,
    TextEnd,
    TextStart,
    ToolCall,
    ToolCallDelta,
    Tripwire,
    Usage,
)
from pipeline.values.cost import Cost
from pipeline.values.messages import JsonObject, MessageList
from pipeline.values.model import is_retryable_status
from pipeline.values.result import (
    AgentNode,
    JudgeCall,
    Output,
    Review,
    RunError,
    RunFailedError,
    Status,
    StepResult,
    Suspension,
)

if TYPE_CHECKING:
    from returns.result import Result

CANCELLABLE = keys_of(CancellableScope)

T = TypeVar("T")

_JSON = json.JSONEncoder()
"""`json.dumps` with its defaults, without its per-call argument handling."""


class ScriptedCall(msgspec.Struct, frozen=True, gc=False):
    """A tool call the scripted model makes."""

    tool_name: str
    args: JsonObject
    tool_call_id: str | None = None


def call(tool_name: str, /, tool_call_id: str | None = None, **args: object) -> ScriptedCall:
    """A scripted tool call: `call("weather", city="Paris")`."""
    return ScriptedCall(tool_name, args, tool_call_id)


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class Fail(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """The model call fails before streaming (an HTTP error, or a connection failure)."""

    status: int | None = 500
    message: str = "simulated failure"
    error_type: str | None = None
    body: str | None = None
    retry_after: float | None = None
    retryable: bool | None = None
    """None: decided by the status (429, 5xx... and connection failures are retryable)."""
    latency: float = 0.0

    def error(self) -> ApiError:
        retryable = self.retryable
        if retryable is None:
            retryable = self.status is None or is_retryable_status(self.status)
        return ApiError(
            status=self.status, message=self.message, error_type=self.error_type,
            body=self.body, retry_after=self.retry_after, retryable=retryable,
        )


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)
class Say(msgspec.Struct, frozen=True, gc=False):
    """One scripted model response.

    `text` is one string or the chunks to stream; `calls` are tool calls after the text.
    `latency` passes before the first event, `chunk_latency` between events (virtual
    time). `break_after=n` breaks the stream after n events (raising `break_with`'s error,
    a connection reset by default); `unfinished=True` ends it
    without its finish event (both are broken streams).
    """

    text: str | Sequence[str] = ()
    calls: Sequence[ScriptedCall] = ()
    reasoning: str | Sequence[str] = ()
    reasoning_signature: str | None = None
    data: Sequence[DataChunk] = ()
    sources: Sequence[SourceChunk] = ()
    server_tools: Sequence[ServerToolCall | ServerToolResult] = ()
    """Tools the provider ran on its side, streamed (in this order) before the text."""
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    latency: float = 0.0
    chunk_latency: float = 0.0
    break_after: int | None = None
    unfinished: bool = False
    break_with: Fail | None = None
    """The error a `break_after` break raises (default: a connection reset)."""

    def events(self, call_index: int) -> list[ModelEvent]:
        """The model events of this response (deterministic ids from the call index)."""
        # (each part tested before it is made: most responses are text or calls alone)
        ev: list[ModelEvent] = []
        if self.reasoning or self.reasoning_signature:
            rid = f"reasoning-{call_index}"
            ev.append(ReasoningStart(rid))
            ev.extend(ReasoningDelta(rid, r) for r in _pieces(self.reasoning))
            ev.append(ReasoningEnd(rid, self.reasoning_signature))
        if self.server_tools:
            ev.extend(self.server_tools)
        text = _pieces(self.text) if self.text else ()
        if text:
            tid = f"text-{call_index}"
            ev.append(TextStart(tid))
            ev.extend(TextDelta(tid, t) for t in text)
            ev.append(TextEnd(tid))
        if self.data:
            ev.extend(self.data)
        if self.sources:
            ev.extend(self.sources)
        for i, c in enumerate(self.calls):
            cid = c.tool_call_id or f"call_{call_index}_{i}"
            args = c.args if type(c.args) is dict else dict(c.args)
            ev.append(ToolCallDelta(cid, c.tool_name, _JSON.encode(args)))
            ev.append(ToolCall(cid, c.tool_name, c.args))
        reason: FinishReason = self.finish_reason or ("tool-calls" if self.calls else "stop")
        usage = self.usage or Usage(
            10, (sum(len(t.split()) for t in text) if text else 0) + len(self.calls))
        ev.append(ModelFinish(reason, usage, f"resp-{call_index}", None))
        return ev


Scripted = Say | Fail
ScriptFn = Callable[[ModelRequest], Scripted]


class ScriptedModel:
    """A fake model: a list of responses, one per call, or a function of the request.

    It serves both interpreters (`stream` and `astream`) and records every request it got
    in `requests`, and how many calls it answered in `calls`. `keep_requests=False` keeps
    the count only: for many runs on one model (a load test), where each request kept
    holds its whole conversation.
    """

    def __init__(
        self,
        script: Sequence[Scripted] | ScriptFn,
        *,
        clock: VirtualClock | None = None,
        async_sleep: Callable[[float], Awaitable[object]] | None = None,
        keep_requests: bool = True,
    ) -> None:
        if type(keep_requests) is not bool:
            raise TypeError(f"keep_requests must be a bool, not {keep_requests!r}")
        self._script = script
        self.clock = clock or VirtualClock()
        self._async_sleep = async_sleep
        self._keep = keep_requests
        self.requests: list[ModelRequest] = []
        """Every request the model got, in order (none kept with `keep_requests=False`)."""
        self.calls = 0
        """How many calls the model got."""

    def _next(self, request: ModelRequest) -> tuple[int, Scripted]:
        n = self.calls
        self.calls = n + 1
        if self._keep:
            self.requests.append(request)
        if callable(self._script):
            return n, self._script(request)
        if n >= len(self._script):
            raise ProviderError(
                ApiError(
                    status=None,
                    message=f"scripted model has no response for call #{n + 1} "
                    f"(the script has {len(self._script)})",
                    error_type="script-exhausted",
                )
            )
        return n, self._script[n]

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        n, step = self._next(request)
        if isinstance(step, Fail):
            self.clock.sleep(step.latency)
            raise ProviderError(step.error())
        return self._events(n, step)

    def _events(self, n: int, step: Say) -> Iterator[ModelEvent]:
        events = step.events(n)
        cut = _cut(step, events)
        self.clock.sleep(step.latency)
        for i, e in enumerate(events[:cut]):
            if i:
                self.clock.sleep(step.chunk_latency)
            yield e
        if step.break_after is not None:
            raise ProviderError(_break_error(step))

    def astream(self, request: ModelRequest) -> ScriptedStream:
        """The response to `request` as an async iterator: the call (recording the request,
        picking the response) is made when its first event is asked for."""
        return ScriptedStream(self, request)

    def _wait(self, seconds: float) -> Awaitable[object] | None:
        """What a pause of `seconds` awaits (a real sleep, or a wait on the virtual clock,
        which jumps when every task waits: `VirtualClock.wait`), or None: no pause."""
        if not seconds > 0:
            return None
        if self._async_sleep is not None:
            return self._async_sleep(seconds)
        return self.clock.wait(seconds)


class ScriptedStream(NoCleanupStream):
    """One scripted response as an async iterator (`ScriptedModel.astream`).

    It gives what an async generator over the response would: the call is made at the
    first `__anext__`, `latency` passes before the first event and `chunk_latency` between
    events, a `Fail` or a break raises its `ProviderError`, and once it raised or was
    closed it only stops. It holds nothing to release, so the async interpreter closes it
    with `close()`, without a shielded `aclose()` (docs/DESIGN.md, decisions made for speed).
    """

    __slots__ = ("_cut", "_done", "_events", "_i", "_model", "_ready", "_request", "_step")

    def __init__(self, model: ScriptedModel, request: ModelRequest) -> None:
        self._model = model
        self._request: ModelRequest | None = request
        self._step: Say | None = None
        self._events: Sequence[ModelEvent] = ()
        self._cut = 0
        self._ready = 0
        """Events up to this index follow without a pause (no `chunk_latency`)."""
        self._i = 0
        self._done = False

    def __aiter__(self) -> ScriptedStream:
        return self

    async def __anext__(self) -> ModelEvent:
        i = self._i
        if i < self._ready:  # an event with no pause before it: the per-event path
            self._i = i + 1
            return self._events[i]
        if self._done:
            raise StopAsyncIteration
        try:
            step = self._step
            model = self._model
            if step is None:  # the call: record the request, wait the latency
                request = self._request
                assert request is not None
                self._request = None
                n, scripted = model._next(request)
                if isinstance(scripted, Fail):
                    wait = model._wait(scripted.latency)
                    if wait is not None:
                        await wait
                    raise ProviderError(scripted.error())
                step = self._step = scripted
                wait = model._wait(step.latency)
                if wait is not None:
                    await wait
                # Made after the wait: nothing more per run for the collector to walk
                # while it waits.
                self._events = events = step.events(n)
                self._cut = _cut(step, events)
                if not step.chunk_latency:
                    self._ready = self._cut
            elif self._i < self._cut and step.chunk_latency:
                wait = model._wait(step.chunk_latency)
                if wait is not None:
                    await wait
            i = self._i
            if i < self._cut:
                self._i = i + 1
                return self._events[i]
        except BaseException:
            self.close()
            raise
        self.close()
        if step.break_after is not None:
            raise ProviderError(_break_error(step))
        raise StopAsyncIteration

    def close(self) -> None:
        """Stop here: the stream gives no more events (nothing to release)."""
        self._done = True
        self._events = []
        self._ready = 0

    async def aclose(self) -> None:
        self.close()


def _break_error(step: Say) -> ApiError:
    if step.break_with is not None:
        return step.break_with.error()
    return ApiError(status=None, message="simulated connection reset mid-stream")


def _cut(step: Say, events: list[ModelEvent]) -> int:
    if step.break_after is not None:
        return min(step.break_after, len(events) - 1)
    return len(events) - 1 if step.unfinished else len(events)


def _pieces(x: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(x, str):
        return (x,) if x else ()
    return tuple(x)


class SimRun(msgspec.Struct, Generic[Output], frozen=True):
    """A finished simulated run: its result, every chunk, and the full trace.

    It reads as the `RunResult` an interpreter's `run` returns (`run.text`,
    `run.status`, `run.output`, `run.unwrap()`...: each is its `result`'s), so code
    written against one works on the other; `result` is the `RunResult` itself.
    """

    result: RunResult[Output]
    trace: Trace
    clock: float
    """Virtual time when the run ended."""

    @property
    def chunks(self) -> list[Chunk]:
        return list(self.trace.chunks)

    # --- the result's face ---------------------------------------------------------------
    @property
    def status(self) -> Status:
        return self.result.status

    @property
    def text(self) -> str:
        return self.result.text

    @property
    def messages(self) -> MessageList:
        return self.result.messages

    @property
    def steps(self) -> tuple[StepResult, ...]:
        return self.result.steps

    @property
    def usage(self) -> Usage:
        return self.result.usage

    @property
    def finish_reason(self) -> FinishReason:
        return self.result.finish_reason

    @property
    def tripwire(self) -> Tripwire | None:
        return self.result.tripwire

    @property
    def error(self) -> RunError | None:
        return self.result.error

    @property
    def retry_count(self) -> int:
        return self.result.retry_count

    @property
    def api_error_retry_count(self) -> int:
        return self.result.api_error_retry_count

    @property
    def output(self) -> Output | None:
        return self.result.output

    @property
    def cost(self) -> Cost | None:
        return self.result.cost

    @property
    def judges(self) -> tuple[JudgeCall, ...]:
        return self.result.judges

    @property
    def suspension(self) -> Suspension | None:
        return self.result.suspension

    @property
    def unmetered_calls(self) -> int:
        return self.result.unmetered_calls

    @property
    def children(self) -> tuple[AgentNode, ...]:
        return self.result.children

    @property
    def answered_by(self) -> str | None:
        return self.result.answered_by

    @property
    def reviews(self) -> tuple[Review, ...]:
        return self.result.reviews

    def usage_by_agent(self) -> dict[str, Usage]:
        return self.result.usage_by_agent()

    @property
    def judge_usage(self) -> Usage:
        return self.result.judge_usage

    @property
    def total_usage(self) -> Usage:
        return self.result.total_usage

    def unwrap(self) -> RunResult[Output]:
        """The result if the run finished, else `RunFailedError` (`RunResult.unwrap`)."""
        return self.result.unwrap()

    def output_as(self, kind: type[T]) -> T:
        return self.result.output_as(kind)

    def to_result(self) -> Result[RunResult[Output], RunFailedError]:
        return self.result.to_result()


class ScriptedRoutes:
    """Which scripted model answers a model id, for both simulators.

    Without `models`, `model` answers every id. With `models`, `model` answers the model
    id of each agent the simulator runs (`note`), `models` the ids they name, and any other
    id is a configuration error naming it (a typo in `StepChange(model=...)` must not be
    answered silently by another script), unless `default` is given: it answers the rest.
    """

    def __init__(
        self,
        model: ScriptedModel,
        models: Mapping[str, ScriptedModel],
        default: ScriptedModel | None,
    ) -> None:
        self.model = model
        self.models = models
        self.default = default
        self._own: set[str] = set()

    def note(self, agent_model: str) -> None:
        """The agent about to run: `model` answers its model id."""
        self._own.add(agent_model)

    def __call__(self, model_id: str) -> ScriptedModel:
        found = self.models.get(model_id)
        if found is not None:
            return found
        if model_id in self._own or (not self.models and self.default is None):
            return self.model
        if self.default is not None:
            return self.default
        known = sorted({*self._own, *self.models})
        raise ProviderError(
            ApiError(
                status=None,
                message=f"the simulator has no model for {model_id!r} (it knows {known}); "
                "add it to models=, or pass default= to answer any id",
                error_type="configuration",
                retryable=False,
            )
        )


class _Stream(Protocol):
    @property
    def done(self) -> bool: ...


S = TypeVar("S", bound=_Stream)


def numbered_run_ids(prefix: str = "run") -> Callable[[], str]:
    """Run ids `run1`, `run2`... (for `run_ids=`): fixed from test to test, unique only
    among the runs of the interpreter given them (not across interpreters that share a
    store: a second one would reuse the first one's message ids)."""
    numbers = itertools.count(1)
    return lambda: f"{prefix}{next(numbers)}"


def unique_run_ids() -> Callable[[], str]:
    """The simulators' run ids: `run1-<token>`, `run2-<token>`..., the token (8 hex digits)
    drawn once, so they are unique across simulators too."""
    token = uuid.uuid4().hex[:8]
    numbers = itertools.count(1)
    return lambda: f"run{next(numbers)}-{token}"


class SimulatorBase:
    """What both simulators share: the virtual clock, the scripted models and the routes
    to them, the run ids (`unique_run_ids`, unless given `run_ids`) and runs' timeouts
    in virtual seconds."""

    def __init__(
        self,
        model: ScriptedModel,
        models: Mapping[str, ScriptedModel] | None,
        default: ScriptedModel | None,
        start: float,
        *,
        virtual_timeouts: bool = True,
        run_ids: Callable[[], str] | None = None,
    ) -> None:
        self.clock: VirtualClock = model.clock
        self.clock.now = max(self.clock.now, start)
        self.model = model
        self.models = dict(models or {})
        for m in (*self.models.values(), *((default,) if default is not None else ())):
            m.clock = self.clock
        if run_ids is not None and not callable(run_ids):
            raise TypeError(f"run_ids must be a function giving run ids, not {run_ids!r}")
        self._run_ids = run_ids if run_ids is not None else unique_run_ids()
        self._virtual_timeouts = virtual_timeouts
        """False: a `timeout` is the interpreter's own (real seconds)."""
        self._deadlines = Deadlines(self.clock)
        self.routes = ScriptedRoutes(model, self.models, default)
        self.breaker = CircuitBreaker(clock=self.clock)
        """The circuit breaker of fallback models: the simulator's own, on virtual time."""

    def _next_run_id(self) -> str:
        return self._run_ids()

    def _begin(
        self, agent: Agent, options: RunOptions
    ) -> tuple[RunOptions, VirtualDeadline | None]:
        """The options for the interpreter and the run's virtual deadline: its `timeout`
        as an alarm on the clock that cancels the run's signal (linked to the caller's)."""
        for model in agent.fallback.model_ids if agent.fallback is not None else (agent.model,):
            self.routes.note(model)
        run: RunOptions = {**options}
        if not self._virtual_timeouts:
            return run, None
        run.pop("timeout", None)
        deadline = self._deadlines.start(options.get("signal"), options.get("timeout"))
        if deadline is not None:
            run["signal"] = deadline.signal
        return run, deadline

    @contextmanager
    def _running(
        self, agent: Agent, options: CancellableScope
    ) -> Iterator[tuple[RunOptions, Trace, VirtualDeadline | None]]:
        """Around `run`: its options, trace and deadline, disarmed at the end."""
        check_options(options, CANCELLABLE)
        trace = Trace()
        run, deadline = self._begin(agent, {**options, "trace": trace})
        try:
            yield run, trace, deadline
        finally:
            if deadline is not None:
                deadline.disarm()

    def _handed_out(self, stream: S, deadline: VirtualDeadline | None) -> S:
        """A stream handed out: its deadline is disarmed once its run is over."""
        if deadline is not None:
            self._deadlines.streaming(deadline, lambda: stream.done)
        return stream


class Simulator(SimulatorBase):
    """The sync interpreter wired to scripted models, a virtual clock and fixed ids.

    `model` answers the agent's model id (every id when no `models` are given); `models`
    answer the ids they name; another id fails the call, naming it, unless a `default`
    model is given (see `ScriptedRoutes`). `run_ids` makes the run ids (by default
    unique across simulators: `unique_run_ids`; `numbered_run_ids()` for `run1`...).
    """

    def __init__(
        self,
        model: ScriptedModel,
        *,
        models: Mapping[str, ScriptedModel] | None = None,
        default: ScriptedModel | None = None,
        handlers: Mapping[type, Handler] | None = None,
        start: float = 1_700_000_000.0,
        observers: Sequence[Observer] = (),
        price: Pricer | None = None,
        run_ids: Callable[[], str] | None = None,
    ) -> None:
        super().__init__(model, models, default, start, run_ids=run_ids)
        self._interp = SyncInterpreter(
            resolve=self.routes,
            handlers=handlers,
            clock=self.clock,
            sleep=self.clock.sleep,
            run_ids=self._next_run_id,
            observers=observers,
            price=price,
            started=lambda perform, _stop: Virtual(perform, self.clock),
            breaker=self.breaker,
        )

    def run(
        self,
        agent: Agent[Deps, Output],
        messages: RunInput,
        **options: Unpack[CancellableScope[Deps]],
    ) -> SimRun[Output]:
        """Run to the end; the result, the full trace and the virtual time at the end.

        `timeout` is in virtual seconds (see `stream`); `signal` cancels the run."""
        with self._running(agent, options) as (run, trace, _):
            result = self._interp.run(agent, messages, **run)
        return SimRun(result, trace, self.clock.now)

    replay = staticmethod(replay_sync)
    """Replay a recorded run (`interpreters.record.journal`) offline: the same result and trace
    from the recorded model output, tool results, answers and clock readings. With a
    changed agent, its processors run on the recorded model output and `divergence` says
    where the run first went another way (which field, both values)."""

    def stream(
        self,
        agent: Agent[Deps, Output],
        messages: RunInput,
        **options: Unpack[RunOptions[Deps]],
    ) -> RunStream[Output]:
        """The run's chunks as they come (`with sim.stream(...) as s:`); `s.result` after.

        `timeout` counts virtual time from now, as on the `AsyncSimulator`: when latency or
        retry backoff brings the virtual clock to the deadline, the clock stops there and
        the run ends cancelled ("timed out after N s"). `signal` cancels the run."""
        check_options(options)
        run, deadline = self._begin(agent, options)
        return self._handed_out(self._interp.stream(agent, messages, **run), deadline)
