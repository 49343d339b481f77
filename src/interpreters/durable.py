"""Durable runs on DBOS Transact: a run survives a crash of its process and resumes.

    runs = DurableRuns({"support": agent}, provider)       # SQLite file by default
    runs.launch()                                           # resumes runs a crash left
    runs.start("support", "hi", run_id="ticket-42")         # idempotent by run id
    for chunk in runs.chunks("ticket-42"): ...              # as they come
    runs.result("ticket-42")                                # RunResult, once it ended

Each run is a DBOS workflow that drives the pure agent loop (`interpreters.durable_loop`);
each model call, tool call and processor I/O request (an `AskModel` judge...) is a DBOS
step whose outcome is checkpointed msgspec-encoded, and retry backoff is a durable
`DBOS.sleep`. After a crash, `launch()` in a new process (same executor id) runs the loop
again: completed steps return their recorded outcomes, so no completed model call or
tool runs twice, and the run ends as an uninterrupted one would have.

The run's time is part of what is recorded: the clock the loop reads is the run's start
time (an input of the workflow) moved on by each step's recorded end time.

Needs the `durable` extra (`pip install pipeline-agents[durable]`). DBOS holds one
instance per process: one `DurableRuns` per process. A run's result decodes `output`
(typed output) as plain JSON: decode it with the agent's output type where needed.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Unpack

import msgspec
from dbos import DBOS, DBOSClient, DBOSConfig, EnqueueOptions, SetWorkflowID
from dbos._dbos import _get_dbos_instance
from dbos._sys_db import SystemDatabase

from interpreters.common import (
    answer_of,
    handler_for,
    provider_error,
    resolver,
    start_run,
    stream_failed,
)
from interpreters.durable_loop import (
    AsyncNotDurableError,
    ModelOutcome,
    ToolDone,
    drive,
    tool_context,
)
from interpreters.durable_store import (
    Checkpoints,
    Keeper,
    Once,
    StoreRetry,
    Takeover,
    recover,
)
from interpreters.logs import LogObserver
from interpreters.observe import Observer
from interpreters.options import DurableScope, check_options, keys_of
from interpreters.providers.provider import Provider, ProviderError, ProviderResolver
from interpreters.sync import Handler, run_tool
from pipeline.agent import Agent
from pipeline.chunks import Chunk, ModelEvent
from pipeline.cost import Pricer
from pipeline.messages import JsonObject, Message, MessageList
from pipeline.model import ApiError, ModelFailed, ModelRequest
from pipeline.processor import AskModel, ModelAnswer
from pipeline.protocol import ToolInvocation, ToolOutcome
from pipeline.result import RunResult

WORKFLOW = "pipeline_agents.run"
"""The DBOS workflow name of a run (its id is the run id)."""

CHUNKS = "chunks"
"""The DBOS stream key a run writes its chunks to."""

MAX_MODEL_EVENTS = 200_000
"""Events one model call may deliver before it counts as failed (its outcome is stored)."""

DurableInput = str | Sequence[Message] | MessageList


class DurableRunError(RuntimeError):
    """A durable run could not be started or read (unknown agent, no such run...)."""


class StepFailed(RuntimeError):
    """A recorded I/O request failed; raised into the loop again on recovery."""


class _Start(msgspec.Struct, frozen=True):
    """A run's inputs, as the workflow stores them."""

    messages: str | tuple[Message, ...]
    started_at: float
    thread_id: str | None = None
    resource_id: str | None = None
    values: JsonObject | None = None
    timeout: float | None = None


def _start_payload(messages: DurableInput, now: float, options: DurableScope) -> bytes:
    """A run's stored inputs; TypeError for an unknown option, ValueError for a bad
    timeout (as on every interpreter)."""
    check_options(options, DURABLE_OPTIONS)
    return _enc.encode(
        _Start(_stored(messages), now, options.get("thread_id"), options.get("resource_id"),
               options.get("values"), options.get("timeout"))
    )


DURABLE_OPTIONS = keys_of(DurableScope)


class _Answer(msgspec.Struct, frozen=True):
    answer: ModelAnswer | None = None
    error: ApiError | None = None
    failure: str | None = None


_RESULT = msgspec.json.Decoder(RunResult)
_START = msgspec.json.Decoder(_Start)
_MODEL = msgspec.json.Decoder(ModelOutcome)
_TOOL = msgspec.json.Decoder(ToolDone)
_ANSWER = msgspec.json.Decoder(_Answer)
_CHUNKS = msgspec.json.Decoder(tuple[Chunk, ...])
_enc = msgspec.json.Encoder()

DEFAULT_STORE_RETRY = StoreRetry()
DEFAULT_TAKEOVER = Takeover()

_runtime: DurableRuns | None = None
_RUNNING = frozenset({"PENDING", "ENQUEUED", "DELAYED"})


class DurableRuns:
    """Starts, resumes and reads durable runs of named agents; one per process.

    `agents` are the agents this process can run, by name (every worker of a queue must
    know the same names). `provider` serves every model, or `resolve` picks one per model
    id; `handlers` carry out generator hooks' I/O requests, by type (`AskModel` is built
    in). `database_url`: the DBOS system database, by default the SQLite file
    `pipeline_runs.sqlite` in the working directory; a `postgresql://` URL lets several
    workers share it. `queue`: the name of the DBOS queue `enqueue` puts runs on and
    this process takes runs from (at most `worker_concurrency` at once). `executor_id`
    names this worker: a restarted worker with the same id resumes the runs it left.
    `app_version`: runs resume and are dequeued only by workers of the same version; bump
    it when an agent changes in a way a half-done run must not see (by default DBOS
    derives it from the workflow's code, which does not include your agents).
    `store_retry`: how long a checkpoint write the store refuses (full, locked,
    unreachable) is retried before the run is stopped unrecorded, to resume at the
    next `launch` (`StoreUnavailable`). `takeover`: a worker silent that long is dead
    and the live workers take its pending runs (None: only `recover` hands them over).
    """

    def __init__(
        self,
        agents: Mapping[str, Agent],
        provider: Provider | None = None,
        *,
        resolve: ProviderResolver | None = None,
        handlers: Mapping[type, Handler] | None = None,
        database_url: str | None = None,
        app_name: str = "pipeline-agents",
        queue: str = "pipeline-agents",
        worker_concurrency: int | None = None,
        executor_id: str | None = None,
        app_version: str | None = None,
        observers: Sequence[Observer] | None = None,
        price: Pricer | None = None,
        clock: Callable[[], float] = time.time,
        polling_interval: float = 0.05,
        store_retry: StoreRetry = DEFAULT_STORE_RETRY,
        takeover: Takeover | None = DEFAULT_TAKEOVER,
    ) -> None:
        if not isinstance(store_retry, StoreRetry):
            raise TypeError(f"store_retry must be a StoreRetry, not {store_retry!r}")
        if takeover is not None and not isinstance(takeover, Takeover):
            raise TypeError(f"takeover must be a Takeover or None, not {takeover!r}")
        for name, agent in agents.items():
            parts = agent.async_parts()
            if parts:
                raise AsyncNotDurableError(
                    f"agent {name!r}: durable runs take sync code only: " + "; ".join(parts)
                )
        self.agents = dict(agents)
        self._resolve = resolver(provider, resolve)
        self._handlers = dict(handlers or {})
        self.database_url = database_url or "sqlite:///pipeline_runs.sqlite"
        self._app_name = app_name
        self.queue = queue
        self._worker_concurrency = worker_concurrency
        self._executor_id = executor_id
        self._app_version = app_version
        self._observers = tuple(observers) if observers is not None else (LogObserver(),)
        self._price = price
        self._clock = clock
        self._poll = polling_interval
        self._launched = False
        self._checkpoints = Checkpoints(store_retry, stopped=self._resume_later)
        self._store_retry = store_retry
        self._takeover = takeover
        self._keeper: Keeper | None = None

    # --- lifecycle ---------------------------------------------------------------------
    def launch(self) -> None:
        """Open the database (creating its tables) and resume the runs this executor left
        unfinished; from now on this process also takes runs from the queue."""
        global _runtime
        if _runtime is not None and _runtime is not self:
            raise DurableRunError("DBOS allows one DurableRuns per process: shut the other down")
        _runtime = self
        config: DBOSConfig = {
            "name": self._app_name,
            "system_database_url": self.database_url,
            "notification_listener_polling_interval_sec": self._poll,
            "log_level": "WARNING",
        }
        if self._executor_id is not None:
            config["executor_id"] = self._executor_id
        if self._app_version is not None:
            config["application_version"] = self._app_version
        DBOS(config=config)
        DBOS.launch()
        DBOS.register_queue(
            self.queue, worker_concurrency=self._worker_concurrency,
            polling_interval_sec=self._poll,
        )
        self._launched = True
        self._keeper = Keeper(
            _sys_db(), DBOS.executor_id, self._takeover, self._store_retry.max_wait
        )
        self._keeper.start()

    def _resume_later(self, run_id: str) -> None:
        if self._keeper is not None:
            self._keeper.resume_later(run_id)

    def shutdown(self) -> None:
        """Stop this process's DBOS (unfinished runs resume at the next `launch`)."""
        global _runtime
        if self._keeper is not None:
            self._keeper.stop()
            self._keeper = None
        if self._launched:
            DBOS.destroy(destroy_registry=False)
            self._launched = False
        if _runtime is self:
            _runtime = None

    def __enter__(self) -> DurableRuns:
        self.launch()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    # --- starting runs -------------------------------------------------------------------
    def start(
        self,
        agent: str,
        messages: DurableInput,
        *,
        run_id: str,
        **options: Unpack[DurableScope],
    ) -> str:
        """Start a run in this process; returns its id. Starting an id that exists
        (running or finished) starts nothing: that run is the answer.

        `timeout`: seconds the run may take from its start, on its recorded clock,
        checked before each step (a step under way is not interrupted: providers bound
        their own calls). Past it the run ends with status "cancelled", keeping what
        the processors approved and the results of tools that ran, as under the other
        interpreters; a recovery stops at the same place."""
        payload = self._payload(agent, messages, options)
        with SetWorkflowID(run_id):
            DBOS.start_workflow(_run_workflow, agent, payload)
        return run_id

    def run(
        self,
        agent: str,
        messages: DurableInput,
        *,
        run_id: str,
        wait: float = 300.0,
        **options: Unpack[DurableScope],
    ) -> RunResult:
        """Start a run in this process (idempotent, as `start`) and wait for its result:
        TimeoutError after `wait` seconds (the run goes on)."""
        payload = self._payload(agent, messages, options)
        with SetWorkflowID(run_id):
            handle = DBOS.start_workflow(_run_workflow, agent, payload)
        # Started here: wait on its thread, no polling. Else (it existed): poll its status.
        future = getattr(handle, "future", None)
        if isinstance(future, concurrent.futures.Future):
            try:
                return _decode_result(run_id, future.result(wait))
            except concurrent.futures.TimeoutError as e:
                raise TimeoutError(f"run {run_id!r} still running after {wait:g} s") from e
        return self.result(run_id, timeout=wait)

    def enqueue(
        self,
        agent: str,
        messages: DurableInput,
        *,
        run_id: str,
        **options: Unpack[DurableScope],
    ) -> str:
        """Put a run on the queue: any worker listening to it takes it. Idempotent by
        run id, as `start`."""
        payload = self._payload(agent, messages, options)
        with SetWorkflowID(run_id):
            DBOS.enqueue_workflow(self.queue, _run_workflow, agent, payload)
        return run_id

    def _payload(self, agent: str, messages: DurableInput, options: DurableScope) -> bytes:
        if not self._launched:
            raise DurableRunError("launch() this DurableRuns (or use it in a with block) first")
        if agent not in self.agents:
            known = sorted(self.agents)
            raise DurableRunError(f"unknown agent {agent!r}; this process knows {known}")
        return _start_payload(messages, self._clock(), options)

    def recover(self, executor_ids: Sequence[str]) -> list[str]:
        """Hand the pending runs of workers that are gone for good (`executor_ids`) to
        the live workers (each is dequeued by exactly one); returns their run ids."""
        if not self._launched:
            raise DurableRunError("launch() this DurableRuns (or use it in a with block) first")
        return recover(_sys_db(), executor_ids)

    # --- reading runs --------------------------------------------------------------------
    def status(self, run_id: str) -> str | None:
        """DBOS's status of the run (PENDING, ENQUEUED, SUCCESS, ERROR...), None if none."""
        st = DBOS.get_workflow_status(run_id)
        return None if st is None else st.status

    def result(self, run_id: str, *, timeout: float = 300.0) -> RunResult:
        """The run's result, waiting for it to end: TimeoutError after `timeout` seconds
        (the run goes on)."""
        _wait(self.status, run_id, timeout, self._poll)
        data: object = DBOS.retrieve_workflow(run_id).get_result(polling_interval_sec=self._poll)
        return _decode_result(run_id, data)

    def chunks(self, run_id: str, *, timeout: float = 300.0) -> Iterator[Chunk]:
        """The run's chunks from its start, as they come, until it ends (`timeout`:
        seconds to wait for each batch, past which DBOS raises its stream timeout)."""
        for batch in DBOS.read_stream(
            run_id, CHUNKS, polling_interval_sec=self._poll, timeout_seconds=timeout
        ):
            if isinstance(batch, bytes):
                yield from _CHUNKS.decode(batch)

    # --- inside the workflow -------------------------------------------------------------
    def _run(self, agent_name: str, payload: bytes) -> bytes:
        agent = self.agents.get(agent_name)
        if agent is None:
            raise DurableRunError(f"this worker does not know agent {agent_name!r}")
        start = _START.decode(payload)
        run_id = DBOS.workflow_id
        assert run_id is not None
        steps = _DbosSteps(self, start.started_at, start.timeout)
        loop = start_run(
            agent, start.messages if isinstance(start.messages, str) else list(start.messages),
            run_id=run_id, clock=steps.now,
            options={"thread_id": start.thread_id, "resource_id": start.resource_id,
                     "values": start.values},
            observers=self._observers, price=self._price,
        )
        result = drive(loop, steps)
        steps.flush()
        self._checkpoints.call("stream", lambda: DBOS.close_stream(CHUNKS))
        return _enc.encode(result)

    def _call_model(self, request: ModelRequest) -> ModelOutcome:
        events: list[ModelEvent] = []
        try:
            stream = iter(self._resolve(request.model).stream(request))
        except Exception as e:
            return ModelOutcome((), ModelFailed(provider_error(e)))
        try:
            for event in stream:
                events.append(event)
                if len(events) > MAX_MODEL_EVENTS:
                    err = ApiError(status=None, message=f"more than {MAX_MODEL_EVENTS} events")
                    return ModelOutcome(tuple(events[:-1]), ModelFailed(err, started=True))
        except Exception as e:
            return ModelOutcome(tuple(events), stream_failed(e, started=bool(events)))
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        return ModelOutcome(tuple(events))

    def _perform(self, request: object) -> object:
        if isinstance(request, AskModel):
            return answer_of(self._resolve(request.request.model).stream(request.request))
        return handler_for(self._handlers, request)(request)


class DurableClient:
    """Puts runs on a queue and reads them, from a process that runs none itself (a web
    app in front of workers, say): it talks to the system database only.

    `database_url` must be the workers' (PostgreSQL when they are several processes);
    the workers must have launched once, creating the tables.
    """

    def __init__(
        self,
        database_url: str,
        *,
        queue: str = "pipeline-agents",
        app_version: str | None = None,
        clock: Callable[[], float] = time.time,
        polling_interval: float = 0.05,
    ) -> None:
        self._client = DBOSClient(system_database_url=database_url)
        self.queue = queue
        self._app_version = app_version
        self._clock = clock
        self._poll = polling_interval

    def enqueue(
        self,
        agent: str,
        messages: DurableInput,
        *,
        run_id: str,
        **options: Unpack[DurableScope],
    ) -> str:
        """Put a run on the queue for any worker that knows `agent`; idempotent by id."""
        payload = _start_payload(messages, self._clock(), options)
        queued = EnqueueOptions(
            workflow_name=WORKFLOW, queue_name=self.queue, workflow_id=run_id
        )
        if self._app_version is not None:
            queued["app_version"] = self._app_version  # else: the latest version takes it
        self._client.enqueue(queued, agent, payload)
        return run_id

    def status(self, run_id: str) -> str | None:
        """DBOS's status of the run (PENDING, ENQUEUED, SUCCESS, ERROR...), None if none."""
        found = self._client.list_workflows(workflow_ids=[run_id])
        return found[0].status if found else None

    def result(self, run_id: str, *, timeout: float = 300.0) -> RunResult:
        """The run's result, waiting for it to end: TimeoutError after `timeout` seconds."""
        _wait(self.status, run_id, timeout, self._poll)
        data: object = self._client.retrieve_workflow(run_id).get_result(
            polling_interval_sec=self._poll
        )
        return _decode_result(run_id, data)

    def chunks(self, run_id: str, *, timeout: float = 300.0) -> Iterator[Chunk]:
        """The run's chunks from its start, as they come, until it ends (`timeout` as
        for `DurableRuns.chunks`)."""
        for batch in self._client.read_stream(
            run_id, CHUNKS, polling_interval_sec=self._poll, timeout_seconds=timeout
        ):
            if isinstance(batch, bytes):
                yield from _CHUNKS.decode(batch)

    def recover(self, executor_ids: Sequence[str]) -> list[str]:
        """Hand the pending runs of workers that are gone for good (`executor_ids`) to
        the live workers (as `DurableRuns.recover`); returns their run ids."""
        return recover(self._client._sys_db, executor_ids)

    def close(self) -> None:
        self._client.destroy()


def _sys_db() -> SystemDatabase:
    return _get_dbos_instance()._sys_db


def _stored(messages: DurableInput) -> str | tuple[Message, ...]:
    if isinstance(messages, MessageList):
        return tuple(messages.messages)
    if isinstance(messages, str):
        return messages
    return tuple(messages)


def _wait(status: Callable[[str], str | None], run_id: str, timeout: float, poll: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        st = status(run_id)
        if st is None:
            raise DurableRunError(f"no run {run_id!r}")
        if st not in _RUNNING:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"run {run_id!r} still {st} after {timeout:g} s")
        time.sleep(poll)


def _decode_result(run_id: str, data: object) -> RunResult:
    if not isinstance(data, bytes):
        raise DurableRunError(f"run {run_id!r} is not a pipeline-agents run")
    return _RESULT.decode(data)


class _DbosSteps:
    """`durable_loop.Steps` on DBOS: each side effect a checkpointed step."""

    def __init__(self, runs: DurableRuns, started_at: float, timeout: float | None) -> None:
        self._runs = runs
        self._now = started_at
        self._deadline = None if timeout is None else started_at + timeout
        self._timeout = timeout
        self._pending: list[Chunk] = []

    def expired(self) -> str | None:
        if self._deadline is not None and self._now >= self._deadline:
            return f"timed out after {self._timeout:g} s"
        return None

    def now(self) -> float:
        return self._now

    def publish(self, chunks: tuple[Chunk, ...]) -> None:
        self._pending.extend(chunks)

    def flush(self) -> None:
        """Write the buffered chunks to the run's stream (a checkpointed write)."""
        if self._pending:
            data = _enc.encode(tuple(self._pending))
            self._runs._checkpoints.call("stream", lambda: DBOS.write_stream(CHUNKS, data))
            self._pending = []

    def _step(self, name: str, fn: Callable[[], bytes]) -> bytes:
        self.flush()
        clock = self._runs._clock

        def run() -> tuple[float, bytes]:
            out = fn()
            return clock(), out

        body = Once(run)  # a retried write stores this outcome: the body runs once
        at, data = self._runs._checkpoints.call(
            name, lambda: DBOS.run_step({"name": name}, body)
        )
        self._now = at
        return data

    def model(self, request: ModelRequest) -> ModelOutcome:
        runs = self._runs
        return _MODEL.decode(self._step("model", lambda: _enc.encode(runs._call_model(request))))

    def tool(self, inv: ToolInvocation) -> ToolDone:
        def body() -> bytes:
            outcome = run_tool(inv)
            ctx = tool_context(inv)
            written = ctx.writer.written if ctx is not None else ()
            try:
                return _enc.encode(ToolDone(outcome, written))
            except (TypeError, msgspec.EncodeError) as e:
                bad = ToolOutcome(
                    inv.call.tool_call_id, f"tool result not storable: {e}", is_error=True
                )
                return _enc.encode(ToolDone(bad, written))

        return _TOOL.decode(self._step(f"tool:{inv.call.tool_name}", body))

    def perform(self, request: object) -> object:
        runs = self._runs
        if isinstance(request, AskModel):
            def ask() -> bytes:
                try:
                    answer = runs._perform(request)
                except ProviderError as e:
                    return _enc.encode(_Answer(error=e.error))
                except Exception as e:
                    return _enc.encode(_Answer(failure=f"{type(e).__name__}: {e}"))
                assert isinstance(answer, ModelAnswer)
                return _enc.encode(_Answer(answer=answer))

            got = _ANSWER.decode(self._step("ask-model", ask))
            if got.error is not None:
                raise ProviderError(got.error)
            if got.failure is not None:
                raise StepFailed(got.failure)
            return got.answer
        # Other requests' answers are stored by DBOS's own serializer.
        self.flush()
        name = f"perform:{type(request).__name__}"
        body = Once(lambda: (runs._perform(request), runs._clock()))
        value, at = runs._checkpoints.call(
            name, lambda: DBOS.run_step({"name": name}, body)
        )
        self._now = at
        return value

    def sleep(self, seconds: float) -> None:
        self.flush()
        if self._deadline is not None:  # no backoff past the run's deadline
            seconds = max(0.0, min(seconds, self._deadline - self._now))
        self._runs._checkpoints.call("sleep", lambda: DBOS.sleep(seconds))
        self._now += seconds


@DBOS.workflow(name=WORKFLOW)
def _run_workflow(agent: str, payload: bytes) -> bytes:
    if _runtime is None:
        raise DurableRunError("no DurableRuns launched in this process")
    return _runtime._run(agent, payload)
