"""Durable runs on DBOS Transact: a run survives a crash of its process and resumes.

    runs = DurableRuns({"support": agent}, provider)       # SQLite file by default
    runs.launch()                                           # resumes runs a crash left
    runs.start("support", "hi", run_id="ticket-42")         # idempotent by run id
    for chunk in runs.chunks("ticket-42"): ...              # as they come
    runs.result("ticket-42")                                # RunResult, once it ended

Each run is a DBOS workflow that drives the pure agent loop (`interpreters.durable.loop`);
each model call, tool call and processor I/O request (an `AskModel` judge...) is a DBOS
step whose outcome is checkpointed msgspec-encoded, and retry backoff is a durable
`DBOS.sleep`. After a crash, `launch()` in a new process (same executor id) runs the loop
again: completed steps return their recorded outcomes, so no completed model call or
tool runs twice, and the run ends as an uninterrupted one would have.

A run records its agent's definition (`interpreters.durable.fingerprint`; with its inputs
when started here, else as its first step): a resume
on a changed agent is refused instead of replaying steps that agent never took (the run
stays pending and `result` raises `AgentChangedError`; a worker whose `migrations`
accept it, or one with the agent it started on, finishes it;
`interpreters.durable.dbos.replay` checks recorded runs in CI). A run id started again
with another input is a `RunConflictError`; a run past DBOS's recovery-attempt limit a
`RunKeptCrashingError`.

The run's time is part of what is recorded: the clock the loop reads is the run's start
time (an input of the workflow) moved on by each step's recorded end time.

Async tools, hooks and handlers are awaited on an event loop of their own. Needs the
`durable` extra (`pip install pipeline-agents[durable]`). DBOS holds one
instance per process: one `DurableRuns` per process. A run's result decodes `output`
(typed output) as plain JSON: decode it with the agent's output type where needed.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from typing import Literal, TypeVar, Unpack

import msgspec
import sqlalchemy as sa
from dbos import DBOS, DBOSClient, DBOSConfig, EnqueueOptions, SetWorkflowID, StepInfo
from dbos import error as dbos_error

from interpreters.approvals.store import DEFAULT_LISTED
from interpreters.core.breaker import PROCESS_BREAKER, CircuitBreaker
from interpreters.core.handlers import Handler, Handlers
from interpreters.core.options import DurableScope, check_options, keys_of
from interpreters.durable import fingerprint as fp
from interpreters.durable.dbos import approval as da
from interpreters.durable.dbos import listing, refusals
from interpreters.durable.dbos.internals import Folds, SystemStore, execution_token
from interpreters.durable.dbos.store import (
    Checkpoints,
    Keeper,
    Once,
    StoreRetry,
    Takeover,
    recover,
)
from interpreters.durable.loop import (
    ModelOutcome,
    RecordedClock,
    ToolDone,
    drive_resumed,
    tool_context,
    wait_for,
)
from interpreters.durable.payload import (
    REF_MIN,
    compact,
    compact_chunks,
    expand,
    expand_chunks,
    recorder,
)
from interpreters.observers.observe import Observer
from interpreters.providers.provider import Provider, ProviderError, ProviderResolver
from interpreters.run.base import observers_or_default
from interpreters.run.common import (
    close_stream,
    perform_here,
    provider_error,
    resolver,
    run_tool,
    start_run,
    stream_failed,
)
from pipeline.agent import Agent
from pipeline.approval import Decision, Resumption
from pipeline.definition import AgentDefinition
from pipeline.processor import AskModel, ModelAnswer
from pipeline.protocol import Driver, ToolInvocation, ToolOutcome
from pipeline.tools import check_deps
from pipeline.values.chunks import Chunk, ModelEvent
from pipeline.values.cost import Pricer
from pipeline.values.messages import JsonObject, Message, MessageList
from pipeline.values.model import ApiError, ModelFailed, ModelRequest
from pipeline.values.result import PendingApproval, RunResult, SuspendedRun, Suspension

WORKFLOW = "pipeline_agents.run"
"""The DBOS workflow name of a run (its id is the run id)."""

CHUNKS = "chunks"
"""The DBOS stream key a run writes its chunks to."""

MAX_MODEL_EVENTS = 200_000
"""Events one model call may deliver before it counts as failed (its outcome is stored)."""

DurableInput = str | Sequence[Message] | MessageList

StreamMode = Literal["live", "with_steps"]
STREAM_MODES: frozenset[str] = frozenset({"live", "with_steps"})
"""How a run writes the chunks it publishes between two steps (`DurableRuns(stream=)`).
"live" (the default): as the next step starts, before its work, in a write of their
own, so a consumer has them while that step (a tool, a model call) runs.
"with_steps": in the transaction that records the next step's outcome, one checkpoint
write per step instead of two, so a consumer has them only once that step ended."""


class DurableRunError(RuntimeError):
    """A durable run could not be started or read (unknown agent, no such run...)."""


class AgentChangedError(DurableRunError):
    """A run recorded on one definition of its agent was resumed on another: replaying
    its recorded steps there would be wrong, so that worker refused it (`result` raises
    this) and the run stays pending, to be finished by a worker with the agent it
    started on or one that accepts it (`recorded` in its `migrations`). `changed` names
    what differs."""

    def __init__(
        self, run_id: str, agent: str, changed: tuple[str, ...], recorded: str, current: str
    ) -> None:
        self.run_id, self.agent, self.changed = run_id, agent, changed
        self.recorded, self.current = recorded, current
        super().__init__(
            f"run {run_id!r} was recorded on another definition of agent {agent!r} "
            f"({recorded}, a worker has {current}); changed: {'; '.join(changed)}. "
            f"It is not resumed there and stays pending: resume it on a worker with the "
            f"agent it started on, or accept it with "
            f"migrations={{{agent!r}: [{recorded!r}]}} (a restarted worker resumes its "
            f"own runs; `recover` hands a live worker's to others)"
        )

    def __reduce__(self) -> tuple[type, tuple[str, str, tuple[str, ...], str, str]]:
        # DBOS pickles the run's error: rebuild it from its fields
        return (type(self), (self.run_id, self.agent, self.changed, self.recorded,
                             self.current))


class RunConflictError(DurableRunError):
    """A run id that exists was started again with another agent, input or options."""


class RunKeptCrashingError(DurableRunError):
    """A run was recovered more than `MAX_RECOVERY_ATTEMPTS` times without ending (it
    kills its worker, say): DBOS stopped resuming it."""


MAX_RECOVERY_ATTEMPTS = 100
"""Recoveries of one run after which it ends with `RunKeptCrashingError`."""

_log = logging.getLogger("interpreters.durable")

T = TypeVar("T")

DEFAULT_WORKER_CONCURRENCY = 32
"""Runs one worker takes from its queue at once unless told otherwise. Unbounded, the
first worker up dequeued every queued run, each on a thread of its own, exhausting
DBOS's connection pool while the other workers idled; between 16 and 64 served a
thousand queued runs best on a small machine."""

_VERSION_SCAN = 1000
"""Queued runs a launching worker reads to say which it leaves to another app_version."""


class StepFailed(RuntimeError):
    """A recorded I/O request failed; raised into the loop again on recovery."""


class RunStart(msgspec.Struct, frozen=True):
    """A run's inputs, as the workflow stores them."""

    messages: str | tuple[Message, ...]
    started_at: float
    thread_id: str | None = None
    resource_id: str | None = None
    values: JsonObject | None = None
    timeout: float | None = None
    deps: str | None = None
    """The run's stored deps, JSON (None: none, or the worker's factory builds them)."""
    definition: str | None = None
    """The canonical JSON of the agent's definition (`fingerprint.encode`) when the
    process that started the run runs it (`start`, `run`): stored with the inputs, it
    costs no step of its own. None (a queued run, or one stored by an older version):
    the run records it as its first step, `agent`, on the worker that takes it."""
    stream: StreamMode | None = None
    """How the run writes its chunks (`STREAM_MODES`), fixed for its life so a resume
    replays the same records: None (a queued run, or one stored by an older version) is
    "live"; a mode this version does not know fails the decode (never replayed as
    "live")."""


_NOT_COMPARED = frozenset({"started_at", "definition", "stream"})
"""`RunStart` fields a start of an existing run id may differ in (`_check_same`)."""


def _start_payload(messages: DurableInput, now: float, options: DurableScope,
                   definition: str | None = None, stream: StreamMode | None = None) -> bytes:
    """A run's stored inputs; TypeError for an unknown option or deps that cannot be
    stored, ValueError for a bad timeout (as on every interpreter)."""
    check_options(options, DURABLE_OPTIONS)
    deps = options.get("deps")
    try:
        stored_deps = None if deps is None else _enc.encode(deps).decode()
    except (TypeError, msgspec.EncodeError) as e:
        raise TypeError(
            f"deps of a durable run are stored with it and must be msgspec-encodable: {e}; "
            "build live ones per worker with DurableRuns(deps=factory)"
        ) from e
    return _enc.encode(
        RunStart(_stored(messages), now, options.get("thread_id"), options.get("resource_id"),
               options.get("values"), options.get("timeout"), stored_deps, definition,
               stream)
    )


def deps_type(agent: Agent) -> type:
    """The type a run's stored deps decode as: what its tools' `ToolContext` asks for."""
    for t in agent.tools:
        if t.context_param is not None and t.deps_type is not None:
            return t.deps_type
    return object


DURABLE_OPTIONS = keys_of(DurableScope)


class StepAnswer(msgspec.Struct, frozen=True):
    """A judge call's stored outcome: its answer, the provider's error, or a failure."""

    answer: ModelAnswer | None = None
    error: ApiError | None = None
    failure: str | None = None


_START = msgspec.json.Decoder(RunStart)
_MODEL = msgspec.json.Decoder(ModelOutcome)
_TOOL = msgspec.json.Decoder(ToolDone)
_ANSWER = msgspec.json.Decoder(StepAnswer)
_enc = msgspec.json.Encoder()

DEFAULT_STORE_RETRY = StoreRetry()
DEFAULT_TAKEOVER = Takeover()

_runtime: DurableRuns | None = None
_RUNNING = frozenset({"PENDING", "ENQUEUED", "DELAYED"})
_REFUSAL_CHECK = 0.5
"""Seconds between two looks, while waiting for a pending run, for a refused resume."""


class _QueuedRuns:
    """What a worker (`DurableRuns`, on this process's DBOS) and a client
    (`DurableClient`, on a `DBOSClient`) do alike: put runs on the queue and read them,
    through `_dbos`."""

    _dbos: type[DBOS] | DBOSClient
    _poll: float

    def _payload(self, agent: str, messages: DurableInput, options: DurableScope) -> bytes:
        """The run's stored inputs (`_start_payload`), once it may be started."""
        raise NotImplementedError

    def _put(self, run_id: str, agent: str, payload: bytes) -> None:
        """Enqueue the run's workflow on the queue."""
        raise NotImplementedError

    def _our_version(self) -> str | None:
        """The app_version of this process's runs (None: a client, which runs none)."""
        raise NotImplementedError

    def status(self, run_id: str) -> str | None:
        """DBOS's status of the run (PENDING, ENQUEUED, SUCCESS, ERROR...), None if none."""
        raise NotImplementedError

    def enqueue(
        self,
        agent: str,
        messages: DurableInput,
        *,
        run_id: str,
        **options: Unpack[DurableScope],
    ) -> str:
        """Put a run on the queue: any worker listening to it that knows `agent` takes
        it. Idempotent by run id, as `DurableRuns.start`."""
        payload = self._payload(agent, messages, options)
        if not self._exists(run_id, agent, payload):
            self._put(run_id, agent, payload)
            self._exists(run_id, agent, payload)  # the first enqueue of the id wins
        return run_id

    def _exists(self, run_id: str, agent: str, payload: bytes) -> bool:
        """Whether the run exists; RunConflictError when it does with another agent,
        input or options (its start time aside). Starting no workflow for a run that
        exists also spares DBOS's warning about the queue a recovered run is on."""
        found = self._dbos.list_workflows(workflow_ids=[run_id], load_output=False)
        if not found:
            return False
        _check_same(run_id, found[0].name, found[0].input, agent, payload)
        return True

    def result(self, run_id: str, *, timeout: float = 300.0) -> RunResult:
        """The run's result, waiting for it to end: TimeoutError after `timeout` seconds
        (the run goes on)."""
        _wait(self.status, run_id, timeout, self._poll, self._why_waiting, self._refused)
        try:
            data: object = self._dbos.retrieve_workflow(run_id).get_result(
                polling_interval_sec=self._poll
            )
        except dbos_error.DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded as e:
            raise _kept_crashing(run_id) from e
        return _decode_result(run_id, data, self._steps(run_id))

    def _steps(self, run_id: str) -> Callable[[], list[tuple[str, object]]]:
        """The run's recorded steps, by name, when called (to expand stored payloads)."""
        dbos = self._dbos
        return lambda: _named(dbos.list_workflow_steps(run_id))

    def _refused(self, run_id: str) -> AgentChangedError | None:
        """Why the last resume of `run_id` was refused (it stays pending), if it was."""
        store = SystemStore.of(self._dbos)
        r = refusals.find(store.engine, run_id, store.owner(run_id))
        if r is None:
            return None
        return AgentChangedError(run_id, r.agent, r.changed, r.recorded, r.current)

    def _why_waiting(self, run_id: str) -> str:
        found = self._dbos.list_workflows(
            workflow_ids=[run_id], load_input=False, load_output=False
        )
        return _version_note(found[0].app_version if found else None, self._our_version())

    def _channel(self) -> _Channel:
        raise NotImplementedError

    def suspended(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        limit: int = DEFAULT_LISTED,
    ) -> tuple[SuspendedRun, ...]:
        """The runs waiting for a decision in thread `thread_id` and for resource
        `resource_id` (None: any), the first `limit` in the order they started, each with
        the calls it waits on (see `interpreters.durable.dbos.listing`)."""
        return listing.suspended(self._dbos, self._channel(), WORKFLOW, thread_id=thread_id,
                                 resource_id=resource_id, limit=limit)

    def chunks(self, run_id: str, *, timeout: float = 300.0) -> Iterator[Chunk]:
        """The run's chunks from its start, as they come, until it ends (`timeout`:
        seconds to wait for each batch, past which DBOS raises its stream timeout)."""
        recorded = recorder(self._steps(run_id))
        for batch in self._dbos.read_stream(
            run_id, CHUNKS, polling_interval_sec=self._poll, timeout_seconds=timeout
        ):
            if isinstance(batch, bytes):
                yield from expand_chunks(batch, recorded)


class DurableRuns(_QueuedRuns):
    """Starts, resumes and reads durable runs of named agents; one per process.

    `agents` are the agents this process can run, by name (every worker of a queue must
    know the same names). `provider` serves every model, or `resolve` picks one per model
    id; `handlers` carry out generator hooks' I/O requests, by type (`AskModel` is built
    in). `database_url`: the DBOS system database, by default the SQLite file
    `pipeline_runs.sqlite` in the working directory; a `postgresql://` URL lets several
    workers share it. `queue`: the name of the DBOS queue `enqueue` puts runs on and
    this process takes runs from (at most `worker_concurrency` at once, 32 by default:
    a worker does not take more than it serves well, leaving the rest to other workers;
    runs handed over from a dead worker come back on it too). `executor_id` names this
    worker: a restarted worker with the same id resumes the runs it left.
    `app_version`: runs resume and are dequeued only by workers of the same version; bump
    it when an agent changes in a way a half-done run must not see (by default DBOS
    derives it from the workflow's code, which does not include your agents).
    `store_retry`: how long a checkpoint write the store refuses (full, locked,
    unreachable) is retried before the run is stopped unrecorded, to resume at the
    next `launch` (`StoreUnavailable`). `takeover`: a worker silent that long is dead
    and the live workers take its pending runs (None: only `recover` hands them over).

    Each run records its agent's definition (everything that shapes a run:
    `pipeline.definition`): a worker whose agent differs does not replay the run but
    refuses it, leaving it pending (`result` raises `AgentChangedError`, naming what
    changed). `migrations` maps an agent's name to the recorded definitions (their
    digests, as the error gives them) this worker resumes all the same: you checked
    that its runs replay on the agent as it is now.

    `deps`: a factory this worker calls with the agent's name when it runs or resumes a
    run, for dependencies that cannot be stored (a connection pool...): they are rebuilt
    per worker. Deps given to `start(..., deps=)` are stored with the run instead (they
    must be msgspec-encodable) and win over the factory's.

    A run whose tool gate asks approval waits in its workflow for the decisions
    (`pending`, `decide`; `interpreters.durable.dbos.approval`), across restarts, at most
    `approval_timeout` seconds (a week by default; within the run's `timeout`): its
    deadline is stored, and past it a decision is refused (`ApprovalExpired`) and the
    waiting calls are denied, never run, whether or not a worker was up.

    `stream`: how the runs started here write their chunks (`STREAM_MODES`): "live"
    (the default) before the next step's work, so a consumer has them while it runs;
    "with_steps" in the transaction of the next step's record, one checkpoint write per
    step instead of two, a consumer getting them once that step ended.
    """

    _dbos = DBOS  # (this process's DBOS, once launched)
    _folds: Folds  # (once launched)

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
        worker_concurrency: int = DEFAULT_WORKER_CONCURRENCY,
        executor_id: str | None = None,
        app_version: str | None = None,
        observers: Sequence[Observer] | None = None,
        price: Pricer | None = None,
        clock: Callable[[], float] = time.time,
        polling_interval: float = 0.05,
        store_retry: StoreRetry = DEFAULT_STORE_RETRY,
        takeover: Takeover | None = DEFAULT_TAKEOVER,
        migrations: Mapping[str, Collection[str]] | None = None,
        deps: Callable[[str], object] | None = None,
        approval_timeout: float = da.DEFAULT_APPROVAL_TIMEOUT,
        breaker: CircuitBreaker | None = None,
        stream: StreamMode = "live",
    ) -> None:
        self._approval_timeout = da.check_timeout(approval_timeout)
        if stream not in STREAM_MODES:
            raise ValueError(f"stream must be one of {sorted(STREAM_MODES)}, not {stream!r}")
        self._stream = stream
        if type(worker_concurrency) is not int or worker_concurrency < 1:
            raise ValueError(
                f"worker_concurrency must be a positive int, not {worker_concurrency!r}")
        if not isinstance(store_retry, StoreRetry):
            raise TypeError(f"store_retry must be a StoreRetry, not {store_retry!r}")
        if takeover is not None and not isinstance(takeover, Takeover):
            raise TypeError(f"takeover must be a Takeover or None, not {takeover!r}")
        self.agents = dict(agents)
        self._definitions = {name: fp.definition(a) for name, a in self.agents.items()}
        self._encoded = {name: fp.encode(d) for name, d in self._definitions.items()}
        unknown = sorted(set(migrations or {}) - set(self.agents))
        if unknown:
            raise ValueError(f"migrations name agents this worker does not run: {unknown}")
        if deps is not None and not callable(deps):
            raise TypeError(f"deps must be a function of the agent's name, not {deps!r}")
        self._deps = deps
        if any(isinstance(ds, str) for ds in (migrations or {}).values()):
            raise TypeError("migrations map an agent's name to a collection of digests")
        self._migrations = {name: frozenset(ds) for name, ds in (migrations or {}).items()}
        self._resolve = resolver(provider, resolve)
        self.breaker = breaker if breaker is not None else PROCESS_BREAKER
        """Skips fallback models that keep failing (each answer a recorded step)."""
        self._handlers = Handlers.of(handlers).with_defaults(self.breaker.handlers())
        self.database_url = database_url or "sqlite:///pipeline_runs.sqlite"
        self._app_name = app_name
        self.queue = queue
        self._worker_concurrency = worker_concurrency
        self._executor_id = executor_id
        self._app_version = app_version
        self._observers = observers_or_default(observers)
        self._price = price
        self._clock = clock
        self._poll = polling_interval
        self._launched = False
        self._checkpoints = Checkpoints(store_retry, stopped=self._resume_later)
        self._store_retry = store_retry
        self._takeover = takeover
        self._keeper: Keeper | None = None
        self._store: SystemStore | None = None
        self._client: DBOSClient | None = None

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
        self._store = SystemStore.of(DBOS)
        self._folds = Folds.of(DBOS)
        refusals.create(self._store.engine)
        self._keeper = Keeper(
            SystemStore.of(DBOS), DBOS.executor_id, self.queue, self._takeover,
            self._store_retry.max_wait,
        )
        self._keeper.start()
        self._note_other_versions()

    def _ended(self, run_id: str | None) -> None:
        if self._keeper is not None and run_id is not None:
            self._keeper.ended(run_id)

    def _resume_later(self, run_id: str) -> None:
        if self._keeper is not None:
            self._keeper.resume_later(run_id)

    def fingerprint(self, agent: str) -> str:
        """The digest of `agent`'s definition, as runs record it (see `migrations`)."""
        return fp.digest(self._definitions[agent])

    def _note_other_versions(self) -> None:
        """Log the runs on this queue that wait for a worker of another app_version: this
        worker does not take them (else they would seem stuck without a word)."""
        ours = DBOS.application_version
        waiting = DBOS.list_workflows(
            status="ENQUEUED", queue_name=self.queue, load_input=False, load_output=False,
            limit=_VERSION_SCAN,
        )
        # (a run queued with no version is for whichever worker takes it)
        left = [w.app_version for w in waiting if w.app_version and w.app_version != ours]
        others = sorted(set(left))
        if others:
            n = len(left)
            _log.warning(
                "%d run(s) on queue %r wait for app_version %s; this worker runs %r "
                "and does not take them", n, self.queue, ", ".join(map(repr, others)), ours,
            )

    def shutdown(self) -> None:
        """Stop this process's DBOS (unfinished runs resume at the next `launch`)."""
        global _runtime
        if self._keeper is not None:
            self._keeper.stop()
            self._keeper = None
        if self._client is not None:
            self._client.destroy()  # (not the engine: DBOS's own)
            self._client = None
        if self._launched:
            DBOS.destroy(destroy_registry=False)
            self._launched = False
        self._store = None
        if _runtime is self:
            _runtime = None

    def __enter__(self) -> DurableRuns:
        self.launch()
        return self

    def __exit__(self, *exc: object) -> None:
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
        payload = self._payload(agent, messages, options, here=True)
        if not self._exists(run_id, agent, payload):
            with SetWorkflowID(run_id):
                handle = DBOS.start_workflow(_run_workflow, agent, payload)
            if not isinstance(getattr(handle, "future", None), concurrent.futures.Future):
                self._exists(run_id, agent, payload)  # another process started it first
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
        payload = self._payload(agent, messages, options, here=True)
        if self._exists(run_id, agent, payload):
            return self.result(run_id, timeout=wait)
        with SetWorkflowID(run_id):
            handle = DBOS.start_workflow(_run_workflow, agent, payload)
        # Started here: wait on its thread, no polling. Else (it existed): poll its status.
        future = getattr(handle, "future", None)
        if isinstance(future, concurrent.futures.Future):
            try:
                return _decode_result(run_id, future.result(wait), self._steps(run_id))
            except concurrent.futures.TimeoutError as e:
                raise TimeoutError(f"run {run_id!r} still running after {wait:g} s") from e
        self._exists(run_id, agent, payload)  # another process started it first
        return self.result(run_id, timeout=wait)

    def _put(self, run_id: str, agent: str, payload: bytes) -> None:
        with SetWorkflowID(run_id):
            DBOS.enqueue_workflow(self.queue, _run_workflow, agent, payload)

    def _payload(self, agent: str, messages: DurableInput, options: DurableScope,
                 here: bool = False) -> bytes:
        """`here`: the run is started in this process, which runs it with its own
        agent: the definition goes with its inputs (a queued run records the one of
        the worker that takes it)."""
        if not self._launched:
            raise DurableRunError("launch() this DurableRuns (or use it in a with block) first")
        if agent not in self.agents:
            known = sorted(self.agents)
            raise DurableRunError(f"unknown agent {agent!r}; this process knows {known}")
        if options.get("deps") is not None:
            check_deps(self.agents[agent].tools, options.get("deps"))
        definition = self._encoded[agent].decode() if here else None
        stream = (None if self._stream == "live" else self._stream) if here else None
        return _start_payload(messages, self._clock(), options, definition, stream)

    def recover(self, executor_ids: Sequence[str]) -> list[str]:
        """Hand the pending runs of workers that are gone for good (`executor_ids`) to
        the live workers (each is dequeued by exactly one); returns their run ids."""
        if not self._launched:
            raise DurableRunError("launch() this DurableRuns (or use it in a with block) first")
        return recover(self._system(), executor_ids, self.queue)

    # --- approvals -----------------------------------------------------------------------
    def pending(self, run_id: str) -> tuple[PendingApproval, ...]:
        """The calls `run_id` waits for a decision on (`UnknownRun` for no such run,
        `RunNotSuspended` for a run that does not wait, `ApprovalExpired` for one
        whose wait is past its deadline)."""
        return da.waiting(self._channel(), run_id).pending

    def decide(self, run_id: str, decisions: Sequence[Decision]) -> None:
        """Send the decisions for the calls `run_id` waits on (one each, for the exact
        arguments; an edit bound to its tool); the worker holding the run, or
        recovering it, goes on with them. Refused with an `ApprovalError` (nothing
        sent): another call's or other arguments' decision (`ArgumentsMismatch`), an
        edit the tool refuses (`EditRejected`), a missing one, a run that does not wait
        or took other decisions already (`RunNotSuspended`), or past the wait's
        deadline (`ApprovalExpired`)."""
        da.decide(self._channel(), run_id, decisions, self.agents.get)

    def _channel(self) -> _Channel:
        return _Channel(DBOS, self._sender, self.status, self._system().engine)

    def _system(self) -> SystemStore:
        if self._store is None:
            raise DurableRunError("launch() this DurableRuns (or use it in a with block) first")
        return self._store

    def _sender(self) -> DBOSClient:
        """A client over this process's DBOS engine, for its send in a transaction."""
        if self._client is None:
            self._client = DBOSClient(system_database_engine=self._system().engine,
                                      lazy=True)
        return self._client

    # --- reading runs --------------------------------------------------------------------
    def status(self, run_id: str) -> str | None:
        """DBOS's status of the run (PENDING, ENQUEUED, SUCCESS, ERROR...), None if none."""
        st = DBOS.get_workflow_status(run_id)
        return None if st is None else st.status

    def _our_version(self) -> str | None:
        return DBOS.application_version

    # --- inside the workflow -------------------------------------------------------------
    def _run(self, agent_name: str, payload: bytes) -> bytes:
        agent = self.agents.get(agent_name)
        if agent is None:
            raise DurableRunError(f"this worker does not know agent {agent_name!r}")
        start = _START.decode(payload)
        run_id = DBOS.workflow_id
        assert run_id is not None
        self._check_definition(run_id, agent_name, start.definition)
        steps = _DbosSteps(self, start.started_at, start.timeout, run_id, agent_name,
                           with_steps=start.stream == "with_steps")
        if start.deps is not None:
            deps: object = msgspec.json.decode(start.deps, type=deps_type(agent))
        else:
            deps = self._deps(agent_name) if self._deps is not None else None
        messages = start.messages if isinstance(start.messages, str) else list(start.messages)

        def begin(resume: Resumption | None) -> Driver:
            return start_run(
                agent, () if resume is not None else messages, run_id=run_id,
                clock=steps.now,
                options={"thread_id": start.thread_id, "resource_id": start.resource_id,
                         "values": start.values, "deps": deps, "resume": resume},
                observers=self._observers, price=self._price,
            )

        result = drive_resumed(begin, steps, observers=self._observers, price=self._price)
        steps.flush(close=True)
        return compact(result, steps.big)

    def _check_definition(self, run_id: str, agent_name: str, given: str | None) -> None:
        """The run's recorded definition against this worker's: `given` with its inputs,
        else recorded as its first step (on a resume, that step gives the recorded
        one). A different one, unless migrated, is refused (the run stays pending,
        `RunRefused`)."""
        current = self._encoded[agent_name]
        stored: object
        if given is not None:
            stored = given.encode()
        else:
            stored = self._checkpoints.call(
                "agent", lambda: DBOS.run_step({"name": "agent"}, lambda: current)
            )
        if stored != current:
            recorded = fp.DEFINITION.decode(stored) if isinstance(stored, bytes) else None
            if recorded is None:
                raise DurableRunError(f"run {run_id!r}: its recorded agent cannot be read")
            digest = fp.digest(recorded)
            if digest not in self._migrations.get(agent_name, ()):
                self._refuse(run_id, agent_name, recorded)

    def _refuse(self, run_id: str, agent_name: str, recorded: AgentDefinition) -> None:
        """Stop this execution of a run recorded on another definition, unrecorded (it
        stays pending), saying why where `result` reads it."""
        current = self._definitions[agent_name]
        refusal = refusals.Refusal(agent_name, fp.changes(recorded, current),
                                   fp.digest(recorded), fp.digest(current), DBOS.executor_id,
                                   execution_token())
        error = AgentChangedError(run_id, agent_name, refusal.changed, refusal.recorded,
                                  refusal.current)
        engine = SystemStore.of(DBOS).engine
        self._checkpoints.call("refusal", lambda: refusals.record(engine, run_id, refusal))
        _log.error("%s", error)
        raise refusals.RunRefused(str(error))

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
            close_stream(stream)
        return ModelOutcome(tuple(events))

    def _perform(self, request: object) -> object:
        return _settled(perform_here(self._resolve, self._handlers, request))


class DurableClient(_QueuedRuns):
    """Puts runs on a queue and reads them, from a process that runs none itself (a web
    app in front of workers, say): it talks to the system database only.

    `database_url` must be the workers' (PostgreSQL when they are several processes);
    the workers must have launched once, creating the tables. `agents`: the agents by
    name, as the workers have them, for `decide` to bind an edit to its tool (without
    the run's agent an edit is refused: it could not be checked).
    """

    def __init__(
        self,
        database_url: str,
        *,
        queue: str = "pipeline-agents",
        app_version: str | None = None,
        clock: Callable[[], float] = time.time,
        polling_interval: float = 0.05,
        agents: Mapping[str, Agent] | None = None,
    ) -> None:
        self.agents = dict(agents or {})
        self._client = self._dbos = DBOSClient(system_database_url=database_url)
        self.queue = queue
        self._app_version = app_version
        self._clock = clock
        self._poll = polling_interval

    def _payload(self, agent: str, messages: DurableInput, options: DurableScope) -> bytes:
        return _start_payload(messages, self._clock(), options)

    def _put(self, run_id: str, agent: str, payload: bytes) -> None:
        queued = EnqueueOptions(
            workflow_name=WORKFLOW, queue_name=self.queue, workflow_id=run_id
        )
        if self._app_version is not None:
            queued["app_version"] = self._app_version  # else: the latest version takes it
        self._client.enqueue(queued, agent, payload)

    def _our_version(self) -> None:
        return None  # it runs none: a run waits for a worker of its version

    def status(self, run_id: str) -> str | None:
        """DBOS's status of the run (PENDING, ENQUEUED, SUCCESS, ERROR...), None if none."""
        found = self._client.list_workflows(workflow_ids=[run_id])
        return found[0].status if found else None

    def pending(self, run_id: str) -> tuple[PendingApproval, ...]:
        """The calls `run_id` waits for a decision on (as `DurableRuns.pending`)."""
        return da.waiting(self._channel(), run_id).pending

    def decide(self, run_id: str, decisions: Sequence[Decision]) -> None:
        """Send the decisions for the calls `run_id` waits on (as
        `DurableRuns.decide`; an edit needs the run's agent in `agents`)."""
        da.decide(self._channel(), run_id, decisions, self.agents.get)

    def _channel(self) -> _Channel:
        client = self._client
        return _Channel(client, lambda: client, self.status, SystemStore.of(client).engine)

    def recover(self, executor_ids: Sequence[str]) -> list[str]:
        """Hand the pending runs of workers that are gone for good (`executor_ids`) to
        the live workers (as `DurableRuns.recover`); returns their run ids."""
        return recover(SystemStore.of(self._client), executor_ids, self.queue)

    def close(self) -> None:
        self._client.destroy()


class _Channel:
    """`durable_approval.Channel` over DBOS in a worker, or over a `DBOSClient`."""

    def __init__(self, dbos: type[DBOS] | DBOSClient, client: Callable[[], DBOSClient],
                 status: Callable[[str], str | None], engine: sa.Engine) -> None:
        self._dbos = dbos
        self._client = client
        self.status = status
        self._engine = engine

    def get_event(self, workflow_id: str, key: str, timeout_seconds: float) -> object:
        data: object = self._dbos.get_event(workflow_id, key, timeout_seconds)
        return data

    def send_in(self, conn: sa.Connection, destination_id: str, message: bytes, topic: str,
                idempotency_key: str) -> None:
        self._client().send_in_transaction(conn, destination_id, message, topic,
                                           idempotency_key)

    @property
    def engine(self) -> sa.Engine:
        return self._engine


def _settled(value: object) -> object:
    """A tool's or handler's value, an awaitable awaited (on an event loop of its own)."""
    return wait_for(value) if isinstance(value, Awaitable) else value


def _stored(messages: DurableInput) -> str | tuple[Message, ...]:
    if isinstance(messages, MessageList):
        return tuple(messages.messages)
    if isinstance(messages, str):
        return messages
    return tuple(messages)


def _check_same(
    run_id: str, name: str, inputs: object, agent: str, payload: bytes
) -> None:
    """RunConflictError unless the stored run is this one: same workflow, agent, input
    and options (the start time is the first start's)."""
    args = inputs.get("args") if isinstance(inputs, dict) else None
    stored = tuple(args) if isinstance(args, list | tuple) else ()
    if name != WORKFLOW or len(stored) != 2 or not isinstance(stored[1], bytes):
        raise RunConflictError(f"run id {run_id!r} is taken by another kind of workflow")
    old, new = _START.decode(stored[1]), _START.decode(payload)
    what = [f"agent {stored[0]!r}"] if stored[0] != agent else []
    what += [f for f in RunStart.__struct_fields__
             if f not in _NOT_COMPARED and getattr(old, f) != getattr(new, f)]
    if what:
        raise RunConflictError(
            f"run {run_id!r} exists with another {', '.join(what)}: a run id starts one "
            "run; give this one another id"
        )


def _version_note(run_version: str | None, ours: str | None) -> str:
    if run_version is None:
        return ""
    if ours is None:
        return f" (it waits for a worker of app_version {run_version!r})"
    if run_version != ours:
        return (f": it is for app_version {run_version!r} and this worker runs {ours!r}, "
                "so only a worker of that version takes it")
    return ""


def _kept_crashing(run_id: str) -> RunKeptCrashingError:
    return RunKeptCrashingError(
        f"run {run_id!r} was recovered more than {MAX_RECOVERY_ATTEMPTS} times without "
        "ending (its worker died each time): it is not resumed again"
    )


def _wait(
    status: Callable[[str], str | None],
    run_id: str,
    timeout: float,
    poll: float,
    why: Callable[[str], str] = lambda _: "",
    refused: Callable[[str], Exception | None] = lambda _: None,
) -> None:
    """Until the run ended; a pending run whose resume a worker refused raises why."""
    deadline = time.monotonic() + timeout
    checked = -_REFUSAL_CHECK
    while True:
        st = status(run_id)
        if st is None:
            raise DurableRunError(f"no run {run_id!r}")
        if st not in _RUNNING:
            return
        if st == "PENDING" and time.monotonic() - checked >= _REFUSAL_CHECK:
            checked = time.monotonic()
            why_not = refused(run_id)
            if why_not is not None:
                raise why_not
        if time.monotonic() >= deadline:
            raise TimeoutError(f"run {run_id!r} still {st} after {timeout:g} s{why(run_id)}")
        time.sleep(poll)


def _decode_result(
    run_id: str, data: object, steps: Callable[[], list[tuple[str, object]]]
) -> RunResult:
    if not isinstance(data, bytes):
        raise DurableRunError(f"run {run_id!r} is not a pipeline-agents run")
    return expand(data, recorder(steps))


def _named(steps: Sequence[StepInfo]) -> list[tuple[str, object]]:
    return [(s["function_name"], s["output"]) for s in steps]


class _DbosSteps(RecordedClock):
    """`durable_loop.Steps` on DBOS: each side effect a checkpointed step."""

    def __init__(self, runs: DurableRuns, started_at: float, timeout: float | None,
                 run_id: str, agent_name: str, *, with_steps: bool = False) -> None:
        super().__init__(started_at, timeout)
        self._runs = runs
        self._with_steps = with_steps
        """The chunks published before a step go in its record's transaction."""
        self._run_id = run_id
        self._agent_name = agent_name
        self._pending: list[Chunk] = []
        self._tools = 0
        self._suspensions = 0
        self.big: dict[str, tuple[int, bytes]] = {}
        """Large tool results (`durable_payload.Big`): stored once, by the tool step."""
        self._ran = False
        """The body of the step being recorded ran in this execution."""
        self._live = False
        """A step's body ran in this execution: the replayed steps are behind it, so
        every write from here on is a new one, which DBOS writes only while this
        execution owns the run."""

    def publish(self, chunks: tuple[Chunk, ...]) -> None:
        self._pending.extend(chunks)

    def flush(self, close: bool = False) -> bool:
        """Write the buffered chunks to the run's stream (a checkpointed write), and its
        end after them in the same transaction when `close`; whether that write was a
        new one, so checked this execution's ownership of the run."""
        ck = self._runs._checkpoints
        if not self._pending:
            if close:
                ck.call("stream", lambda: DBOS.close_stream(CHUNKS))
            return False
        data = compact_chunks(tuple(self._pending), self.big)
        self._pending = []
        folds = self._runs._folds
        folds.fold(CHUNKS, (), close=close)
        try:
            ck.call("stream", lambda: DBOS.write_stream(CHUNKS, data))
        finally:
            folds.clear()
        return self._live

    def _record(self, name: str, call: Callable[[], T], checked: bool) -> T:
        """`call` (a DBOS step), retried on store faults. Unless `checked` (the stream
        write just before it made sure), the lookup of its recorded outcome, before its
        body, checks in its transaction that this execution owns the run
        (`RunTakenOver`). With `with_steps`, the chunks published since the last step
        are written in the transaction of its record."""
        ck, folds = self._runs._checkpoints, self._runs._folds
        chunks: list[Chunk] = []
        if self._with_steps and self._pending:
            chunks, self._pending = self._pending, []
            folds.fold(CHUNKS, (compact_chunks(tuple(chunks), self.big),))
        if not checked:
            folds.check_owner()
        self._ran = False
        try:
            return ck.call(name, call)
        finally:
            # A step that ran here but whose record DBOS did not write (an error it
            # cannot store) wrote no chunks: they go with the next record. (A replayed
            # step's record, and its chunks, were written by the execution that ran it.)
            if not folds.clear() and self._ran and chunks:
                self._pending[:0] = chunks

    def _before(self) -> bool:
        """Before a step: the buffered chunks written unless they go with its record;
        whether that write checked this execution's ownership of the run."""
        return False if self._with_steps else self.flush()

    def _running(self) -> None:
        """A step's body runs in this execution (its ownership checked before it)."""
        self._live = self._ran = True

    def _step(self, name: str, fn: Callable[[], bytes]) -> bytes:
        checked = self._before()
        clock = self._runs._clock

        def run() -> tuple[float, bytes]:
            self._running()
            out = fn()
            return clock(), out

        body = Once(run)  # a retried write stores this outcome: the body runs once
        at, data = self._record(name, lambda: DBOS.run_step({"name": name}, body), checked)
        self._now = at
        return data

    def model(self, request: ModelRequest) -> ModelOutcome:
        runs = self._runs
        return _MODEL.decode(self._step("model", lambda: _enc.encode(runs._call_model(request))))

    def tool(self, inv: ToolInvocation) -> ToolDone:
        def body() -> bytes:
            outcome = run_tool(inv, _settled)
            ctx = tool_context(inv)
            written = ctx.writer.written if ctx is not None else ()
            try:
                return _enc.encode(ToolDone(outcome, written))
            except (TypeError, msgspec.EncodeError) as e:
                bad = ToolOutcome(
                    inv.call.tool_call_id, f"tool result not storable: {e}", is_error=True
                )
                return _enc.encode(ToolDone(bad, written))

        data = self._step(f"tool:{inv.call.tool_name}", body)
        done = _TOOL.decode(data)
        if len(data) >= REF_MIN:
            self.big[inv.call.tool_call_id] = (self._tools, _enc.encode(done.outcome.result))
        self._tools += 1
        return done

    def perform(self, request: object) -> object:
        runs = self._runs
        if isinstance(request, AskModel):
            def ask() -> bytes:
                try:
                    answer = runs._perform(request)
                except ProviderError as e:
                    return _enc.encode(StepAnswer(error=e.error))
                except Exception as e:
                    return _enc.encode(StepAnswer(failure=f"{type(e).__name__}: {e}"))
                assert isinstance(answer, ModelAnswer)
                return _enc.encode(StepAnswer(answer=answer))

            got = _ANSWER.decode(self._step("ask-model", ask))
            if got.error is not None:
                raise ProviderError(got.error)
            if got.failure is not None:
                raise StepFailed(got.failure)
            return got.answer
        # Other requests' answers are stored by DBOS's own serializer.
        checked = self._before()
        name = f"perform:{type(request).__name__}"
        def performed() -> tuple[object, float]:
            self._running()
            return runs._perform(request), runs._clock()

        body = Once(performed)
        value, at = self._record(name, lambda: DBOS.run_step({"name": name}, body), checked)
        self._now = at
        return value

    def approval(self, s: Suspension) -> tuple[Decision, ...]:
        """Publish what `s` waits for and wait for its decisions, at most the approval
        timeout (within the run's) from now on the database's clock; each part a
        recorded DBOS operation (`interpreters.durable.dbos.approval`)."""
        self.flush()
        runs, ck = self._runs, self._runs._checkpoints
        engine = runs._system().engine
        wait = runs._approval_timeout
        if self._deadline is not None:
            wait = max(0.0, min(wait, self._deadline - self._now))
        number = self._suspensions
        self._suspensions += 1
        on = da.topic(number)
        # (the database's clock read again on a replay, which records nothing of it)
        now = ck.call("approval", lambda: da.clock(engine))
        deadline: float = ck.call("approval", lambda: DBOS.run_step(
            {"name": "approval-deadline"}, lambda: now + wait))
        w = da.Waiting(number, s.pending, wait, deadline=deadline, agent=self._agent_name,
                       children=da.children_of(s))
        ck.call("approval", lambda: DBOS.set_event(da.APPROVAL, da.encode(w)))
        agent = runs.agents.get(self._agent_name)
        timeout = wait
        decisions: tuple[Decision, ...] | None = None
        for _ in range(da.MAX_LOOKS):
            message, settled = self._look(engine, number, deadline, timeout)
            decisions = da.look(s, message, settled, agent)
            if decisions is not None:
                break
            if settled.outcome == "unclaimed":
                _log.warning("run %r: a message on %s not sent by decide() was not taken",
                             self._run_id, on)
            timeout = da.next_wait(deadline, settled)
        if decisions is None:
            decisions = da.deny_all(s, f"no decision taken in {da.MAX_LOOKS} looks: the "
                                       "call was not run")
        done = msgspec.structs.replace(w, decided=True)
        ck.call("approval", lambda: DBOS.set_event(da.APPROVAL, da.encode(done)))
        clock = runs._clock
        at = ck.call("approval", lambda: DBOS.run_step({"name": "approval-time"}, clock))
        self._now = max(self._now, at)
        return decisions

    def _look(self, engine: sa.Engine, number: int, deadline: float,
              timeout: float) -> tuple[object, da.Settled]:
        """Wait at most `timeout` for a message, then settle who decided (recorded)."""
        ck = self._runs._checkpoints
        on = da.topic(number)
        message = ck.call("approval", lambda: DBOS.recv(on, timeout_seconds=timeout))
        # (on a replay the look is made again and its recorded outcome kept: a claim it
        # makes is one the deadline had made due)
        found = ck.call("approval", lambda: da.encode_settled(
            da.settle(engine, self._run_id, number, deadline, message)))
        settled = ck.call("approval", lambda: DBOS.run_step(
            {"name": "approval-settle"}, lambda: found))
        return message, da.read_settled(settled)

    def sleep(self, seconds: float) -> None:
        self.flush()
        if self._deadline is not None:  # no backoff past the run's deadline
            seconds = max(0.0, min(seconds, self._deadline - self._now))
        self._runs._checkpoints.call("sleep", lambda: DBOS.sleep(seconds))
        self._now += seconds


@DBOS.workflow(name=WORKFLOW, max_recovery_attempts=MAX_RECOVERY_ATTEMPTS)
def _run_workflow(agent: str, payload: bytes) -> bytes:
    if _runtime is None:
        raise DurableRunError("no DurableRuns launched in this process")
    runtime, run_id = _runtime, DBOS.workflow_id
    try:
        out = runtime._run(agent, payload)
    except Exception:
        runtime._ended(run_id)  # DBOS records the error next
        raise
    runtime._ended(run_id)  # DBOS records the result next
    return out
