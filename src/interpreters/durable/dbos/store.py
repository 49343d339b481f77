"""The durable runs' side of their store: retrying its faults and noticing dead workers.

A checkpoint write that fails for a moment (`database or disk is full`, a lock timeout, a
dropped connection the driver does not retry) is a fault of the store, not of the run:
`Checkpoints` retries the write with capped exponential backoff, and when `StoreRetry`'s
deadline passes it stops the run with `StoreUnavailable`, which records no outcome, so
the run stays pending. A step's body
(the tool, the model call) runs once: a retry writes the outcome it already has.

`Keeper` (a worker's background thread) queues such a run again once the store takes
writes again, and hands back to the queue a run whose execution here ended but whose
outcome (written by DBOS after the run's last step) did not land. With a `Takeover` it
also keeps a row per worker in the system database, refreshed every
`Takeover.interval`; a worker silent for `Takeover.after` seconds is taken for dead and
its pending runs are handed to the live workers (DBOS's recovery: the run is queued
again and exactly one worker dequeues it). A dead worker that wakes up cannot complete a
run it lost: DBOS checks the run's ownership token with every checkpoint it writes, and
the runs check it before each step's work (in the transaction where DBOS looks its
outcome up, `internals.Folds.check_owner`, or by the stream write just before the step,
which DBOS checks).
"""

from __future__ import annotations

import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import msgspec
import psycopg
import sqlalchemy as sa
from dbos import error as dbos_error

from interpreters.durable.dbos.internals import StepPosition, SystemStore

log = logging.getLogger("interpreters.durable")

T = TypeVar("T")


class StoreRetry(msgspec.Struct, frozen=True):
    """How long a failed checkpoint write is retried: waits of `initial` seconds,
    doubling up to `max_wait`, jittered, until `deadline` seconds after the first
    failure; then the run is stopped unrecorded (`StoreUnavailable`)."""

    initial: float = 0.1
    max_wait: float = 5.0
    deadline: float = 60.0

    def __post_init__(self) -> None:
        for name in ("initial", "max_wait", "deadline"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value < float("inf")):
                raise ValueError(f"StoreRetry.{name} must be a positive number of seconds")
        if self.max_wait < self.initial:
            raise ValueError("StoreRetry.max_wait must be at least StoreRetry.initial")


class Takeover(msgspec.Struct, frozen=True):
    """A worker silent for `after` seconds is dead: the live ones take its pending
    runs. Each worker beats every `interval` seconds (by default `after` / 4)."""

    after: float = 60.0
    interval: float | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.after, int | float) and 0 < self.after < float("inf")):
            raise ValueError("Takeover.after must be a positive number of seconds")
        if self.interval is not None and not (0 < self.interval < self.after):
            raise ValueError("Takeover.interval must be positive and below Takeover.after")

    @property
    def every(self) -> float:
        return self.interval if self.interval is not None else self.after / 4


class StoreUnavailable(BaseException):
    """The store kept failing past `StoreRetry.deadline`: the run was stopped without an
    outcome and stays pending; it resumes at the next `launch()` of this executor, or
    on another worker through `recover`. A BaseException, so neither the agent loop nor
    DBOS takes it for the run's own failure."""


class RunTakenOver(BaseException):
    """Another worker owns this run now (this one was taken for dead): this execution
    stops and writes nothing more for it."""


def is_store_error(e: BaseException) -> bool:
    """An error of the store itself (full, locked, unreachable), not of a run's code."""
    return isinstance(
        e,
        sa.exc.OperationalError | sa.exc.InterfaceError | sa.exc.TimeoutError
        | sqlite3.OperationalError | psycopg.OperationalError,
    )


def brief(e: BaseException) -> str:
    """The driver's message, without the statement and its parameters (a run's data)."""
    orig = e.orig if isinstance(e, sa.exc.DBAPIError) else e
    return f"{type(orig).__name__}: {str(orig).splitlines()[0] if str(orig) else ''}"


class Checkpoints:
    """Runs DBOS calls that write a checkpoint, retrying the store's faults."""

    def __init__(
        self,
        policy: StoreRetry,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        stopped: Callable[[str], None] = lambda run_id: None,
    ) -> None:
        self.policy = policy
        self._sleep = sleep
        self._monotonic = monotonic
        self._stopped = stopped

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """`fn()` (one DBOS call of the running workflow), again after a store fault
        with the workflow's step counter put back, so the retry writes the same step."""
        here = StepPosition()
        wait = self.policy.initial
        deadline: float | None = None
        attempt = 0
        while True:
            try:
                return fn()
            except dbos_error.DBOSWorkflowConflictIDError as e:
                log.warning("%s: another worker owns this run now (this one was taken for "
                            "dead): it stops here, its outcome not written", what)
                raise RunTakenOver(f"{what}: another worker owns this run now") from e
            except Exception as e:
                if not is_store_error(e):
                    raise
                now = self._monotonic()
                if deadline is None:
                    deadline = now + self.policy.deadline
                attempt += 1
                if now >= deadline:
                    log.error("%s: the store kept failing for %g s, stopping the run "
                              "unrecorded (it resumes once the store takes writes again): %s",
                              what, self.policy.deadline, brief(e))
                    if here.workflow_id:
                        self._stopped(here.workflow_id)
                    raise StoreUnavailable(f"{what}: the store failed for "
                                           f"{self.policy.deadline:g} s: {brief(e)}") from e
                pause = min(wait * (0.5 + random.random()), deadline - now)
                log.warning("%s: checkpoint write failed (attempt %d), retrying in %.2f s: %s",
                            what, attempt, pause, brief(e))
                self._sleep(pause)
                wait = min(wait * 2, self.policy.max_wait)
                here.restore()


class StepDatabaseError(RuntimeError):
    """A step's own code (a handler) failed with a database error: that is the step's
    outcome, recorded as such, not a fault of the checkpoint store to retry."""


class Once(Generic[T]):
    """A step body that runs once: a retried step gets the first run's outcome. A
    database error of the body's own is raised as `StepDatabaseError`, so it is not
    taken for the store's (nor is its recorded copy on a resume)."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._outcome: tuple[T] | None = None
        self._error: Exception | None = None

    def __call__(self) -> T:
        if self._error is not None:
            raise self._error
        if self._outcome is None:
            try:
                self._outcome = (self._fn(),)
            except Exception as e:
                if is_store_error(e):
                    own = StepDatabaseError(brief(e))
                    self._error = own
                    raise own from e
                self._error = e
                raise
        return self._outcome[0]


_META = sa.MetaData()
HEARTBEATS = sa.Table(
    "pipeline_agents_heartbeats",
    _META,
    sa.Column("executor_id", sa.Text, primary_key=True),
    sa.Column("app_name", sa.Text, nullable=False),
    sa.Column("beat_at", sa.Float, nullable=False),
)
"""One row per worker: when it last beat (seconds, the database's clock)."""


def ensure_table(engine: sa.Engine, table: sa.Table) -> None:
    """Create `table` in the system database unless it is there (of two workers creating
    it at the same moment, the one that loses finds it made)."""
    try:
        table.create(engine, checkfirst=True)
    except sa.exc.DBAPIError:
        if not sa.inspect(engine).has_table(table.name):
            raise


def db_now(engine: sa.Engine) -> sa.ColumnElement[float]:
    """The database's clock (seconds since the epoch), so workers' clocks need not agree."""
    if engine.dialect.name == "sqlite":
        return sa.literal_column("((julianday('now') - 2440587.5) * 86400.0)")
    return sa.literal_column("EXTRACT(EPOCH FROM clock_timestamp())")


def recover(store: SystemStore, executor_ids: Sequence[str], queue: str) -> list[str]:
    """Hand the pending runs of `executor_ids` (workers that are gone) to the live
    workers: each goes back on its queue (a run started in-process: on `queue`, whose
    workers take at most their `worker_concurrency` at once), where exactly one worker
    dequeues it. Returns the
    ids handed over. Safe to repeat: a run a live worker took is no longer the dead
    one's, so it is not handed over again."""
    ids = list(executor_ids)
    if not ids:
        return []
    return [run_id for run_id in store.pending_of(ids) if store.requeue(run_id, ids, queue)]


_BATCH = 500
"""Runs one status query reads at most."""


class Keeper:
    """A worker's background thread: it resumes the runs this worker stopped on a store
    fault once the store takes writes again, hands back the runs whose outcome did not
    land and, with a `Takeover`, beats and takes over the runs of workers silent too
    long. Wakes every `every` seconds."""

    def __init__(self, store: SystemStore, executor_id: str, queue: str,
                 takeover: Takeover | None, every: float) -> None:
        self._store = store
        self._queue = queue
        self._engine = store.engine
        self._app = store.app_name
        self._me = executor_id
        self._takeover = takeover
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._every = takeover.every if takeover is not None else every
        self._lock = threading.Lock()
        self._stopped: set[str] = set()
        self._ended: dict[str, int] = {}
        self._round = 0

    def start(self) -> None:
        if self._takeover is not None:
            ensure_table(self._engine, HEARTBEATS)
            self.beat()
        self._thread = threading.Thread(target=self._loop, name="pipeline-keeper",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._every + 5.0)
            self._thread = None

    def resume_later(self, run_id: str) -> None:
        """A run this worker stopped unrecorded: queue it again once the store heals."""
        with self._lock:
            self._stopped.add(run_id)

    def ended(self, run_id: str) -> None:
        """The execution of `run_id` here returned: DBOS writes its outcome next. If that
        write fails (a store fault), nothing would resume the run while this worker
        lives; one still pending here after a full round is handed back to the queue."""
        with self._lock:
            self._ended[run_id] = self._round

    def hand_back_stranded(self) -> list[str]:
        """Hand back the runs whose execution here ended a round ago or more and whose
        outcome was not recorded; returns them."""
        with self._lock:
            due = {r: k for r, k in self._ended.items() if k < self._round - 1}
        handed: list[str] = []
        ids = sorted(due)
        for i in range(0, len(ids), _BATCH):
            # (fails on a store still down: the runs stay listed for the next round)
            for run_id in self._store.pending_of([self._me], ids[i:i + _BATCH]):
                if self._store.requeue(run_id, [self._me], self._queue):
                    handed.append(run_id)
            with self._lock:
                for run_id in ids[i:i + _BATCH]:
                    if self._ended.get(run_id) == due[run_id]:
                        del self._ended[run_id]
        if handed:
            log.warning("runs %s ended here but their outcome was not recorded (a store "
                        "fault): they go back on the queue and resume from their "
                        "checkpoints", handed)
        return handed

    def resume_stopped(self) -> list[str]:
        with self._lock:
            waiting = sorted(self._stopped)
        resumed = []
        for run_id in waiting:
            # Fails on a store still down (kept for the next round); a no-op for a run
            # no longer pending here (taken over, or resumed by a relaunch).
            self._store.requeue(run_id, [self._me], self._queue)
            with self._lock:
                self._stopped.discard(run_id)
            resumed.append(run_id)
        if resumed:
            log.warning("the store takes writes again: runs %s resume", resumed)
        return resumed

    def beat(self) -> None:
        now = db_now(self._engine)
        with self._engine.begin() as c:
            done = c.execute(
                sa.update(HEARTBEATS).where(HEARTBEATS.c.executor_id == self._me)
                .values(beat_at=now, app_name=self._app)
            ).rowcount
            if not done:
                c.execute(sa.insert(HEARTBEATS).values(
                    executor_id=self._me, app_name=self._app, beat_at=now))

    def dead(self) -> list[str]:
        """The other workers of this app silent for longer than `Takeover.after`."""
        assert self._takeover is not None
        limit = db_now(self._engine) - self._takeover.after
        with self._engine.begin() as c:
            rows = c.execute(
                sa.select(HEARTBEATS.c.executor_id).where(
                    HEARTBEATS.c.app_name == self._app,
                    HEARTBEATS.c.executor_id != self._me,
                    HEARTBEATS.c.beat_at < limit,
                )
            ).fetchall()
        return [r[0] for r in rows]

    def sweep(self) -> list[str]:
        """Take over the runs of dead workers; returns the runs handed over."""
        dead = self.dead()
        if not dead:
            return []
        taken = recover(self._store, dead, self._queue)
        if taken:
            log.warning("workers %s silent for %g s: their runs %s go to the live workers",
                        dead, self._takeover.after if self._takeover else 0, taken)
        return taken

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            self._round += 1
            try:
                self.resume_stopped()
                self.hand_back_stranded()
                if self._takeover is not None:
                    self.beat()
                    self.sweep()
            except Exception as e:  # a store fault: try again next time
                if not is_store_error(e):
                    log.exception("heartbeat or resume failed")
                else:
                    log.warning("heartbeat or resume failed: %s", brief(e))
