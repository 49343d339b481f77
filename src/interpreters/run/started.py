"""How interpreters answer started requests (`effects.started`: Start, Ready, Collect).

One object per run holds its started jobs by ticket (0, 1, 2... in the order of the
starts) and answers the three requests; `perform` is how the interpreter carries out
the request a job started (`AskModel` on its provider, any other by its handler):

- `InOrder`: a job is carried out when it is started and waits there; `Ready` is always
  true. No concurrency, and nothing that depends on timing: the durable loop uses it
  (each started call is its own checkpointed step, so a recovery takes the same path),
  and the async interpreter where no task group is open.
- `Threaded` (the sync interpreter): each job runs in a worker thread; `Collect` waits
  within the run's deadline and its cancel signal.
- `Virtual` (the sync simulator): a job is carried out when started, on the virtual
  clock set aside (`VirtualClock.aside`), and is ready once the clock reaches the time
  it took; `Collect` moves the clock there.
- `AsyncStarted` (the async interpreter): each job a task in the run's task group.

A job's failure is kept and raised at its `Collect`, never before.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.abc
import anyio.lowlevel

from effects.started import Collect, Ready, Start

if TYPE_CHECKING:
    from pipeline.agent import Agent

Outcome = tuple[bool, object]
"""(True, the answer) or (False, the exception the request raised)."""

MAX_WORKERS = 8
"""Worker threads of one sync run's started jobs (more jobs wait for a free one)."""

WAIT_SLICE = 0.05
"""How often a sync `Collect` looks at the run's cancel signal while it waits (seconds)."""


class Stop(Protocol):
    """What a sync run's `Collect` waits within (`interpreters.core.deadline.StopCheck`)."""

    def left(self) -> float: ...

    def reason(self) -> str | None: ...


def carry_out(perform: Callable[[object], object], request: object) -> Outcome:
    try:
        return True, perform(request)
    except Exception as e:
        return False, e


def answer_of(outcome: Outcome) -> object:
    ok, value = outcome
    if ok:
        return value
    assert isinstance(value, Exception)
    raise value


def unknown(ticket: int) -> LookupError:
    return LookupError(f"no started job with ticket {ticket} (never started, or collected)")


class InOrder:
    """Each job carried out when it is started (see the module docstring)."""

    __slots__ = ("_done", "_next", "_perform")

    def __init__(self, perform: Callable[[object], object]) -> None:
        self._perform = perform
        self._done: dict[int, Outcome] = {}
        self._next = 0

    def answer(self, request: object) -> object:
        t = type(request)
        if t is Start:
            assert isinstance(request, Start)
            ticket, self._next = self._next, self._next + 1
            self._done[ticket] = carry_out(self._perform, request.request)
            return ticket
        if t is Ready:
            assert isinstance(request, Ready)
            return request.ticket in self._done
        assert isinstance(request, Collect)
        ticket = request.job.ticket
        if ticket not in self._done:
            raise unknown(ticket)
        return answer_of(self._done.pop(ticket))

    def close(self) -> None:
        self._done.clear()


class Threaded:
    """Each job in a worker thread, with the caller's context (its run's deadline)."""

    __slots__ = ("_jobs", "_next", "_perform", "_pool", "_stop")

    def __init__(self, perform: Callable[[object], object], stop: Stop) -> None:
        self._perform = perform
        self._stop = stop
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._jobs: dict[int, concurrent.futures.Future[Outcome]] = {}
        self._next = 0

    def answer(self, request: object) -> object:
        t = type(request)
        if t is Start:
            assert isinstance(request, Start)
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    MAX_WORKERS, thread_name_prefix="started-job"
                )
            ticket, self._next = self._next, self._next + 1
            context = contextvars.copy_context()
            self._jobs[ticket] = self._pool.submit(
                context.run, carry_out, self._perform, request.request
            )
            return ticket
        if t is Ready:
            assert isinstance(request, Ready)
            job = self._jobs.get(request.ticket)
            return job is not None and job.done()
        assert isinstance(request, Collect)
        ticket = request.job.ticket
        job = self._jobs.get(ticket)
        if job is None:
            raise unknown(ticket)
        while not job.done():  # within the run's deadline, looking at its signal
            if self._stop.reason() is not None:
                raise TimeoutError(f"the run stopped while job {ticket} ran")
            concurrent.futures.wait((job,), min(WAIT_SLICE, self._stop.left()))
        del self._jobs[ticket]
        return answer_of(job.result())

    def close(self) -> None:
        """The run is over: jobs not started yet never start; running ones are left to
        end in their thread (their answers are dropped)."""
        self._jobs.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


class _Slot:
    __slots__ = ("done", "outcome")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.outcome: Outcome = (False, LookupError("not done"))


class AsyncStarted:
    """Each job a task in `group` (the run's); with no group, in order (`InOrder`)."""

    __slots__ = ("_jobs", "_next", "_perform", "group")

    def __init__(self, perform: Callable[[object], Awaitable[object]]) -> None:
        self._perform = perform
        self.group: anyio.abc.TaskGroup | None = None
        self._jobs: dict[int, _Slot] = {}
        self._next = 0

    async def answer(self, request: object) -> object:
        t = type(request)
        if t is Start:
            assert isinstance(request, Start)
            ticket, self._next = self._next, self._next + 1
            slot = self._jobs[ticket] = _Slot()
            if self.group is None:
                await self._run(slot, request.request)
            else:
                self.group.start_soon(self._run, slot, request.request)
            return ticket
        if t is Ready:
            assert isinstance(request, Ready)
            job = self._jobs.get(request.ticket)
            if job is not None and not job.done.is_set():
                await anyio.lowlevel.checkpoint()  # the started jobs get their turn
            return job is not None and job.done.is_set()
        assert isinstance(request, Collect)
        ticket = request.job.ticket
        waiting = self._jobs.get(ticket)
        if waiting is None:
            raise unknown(ticket)
        await waiting.done.wait()
        del self._jobs[ticket]
        return answer_of(waiting.outcome)

    async def _run(self, slot: _Slot, request: object) -> None:
        try:
            slot.outcome = True, await self._perform(request)
        except Exception as e:
            slot.outcome = False, e
        slot.done.set()

    def close(self) -> None:
        """The run is over: its jobs still running are cancelled (their answers dropped)."""
        self._jobs.clear()
        if self.group is not None:
            self.group.cancel_scope.cancel()


class SyncStarted(Protocol):
    """A sync run's started jobs (`InOrder`, `Threaded`, `Virtual`)."""

    def answer(self, request: object) -> object: ...

    def close(self) -> None: ...


SyncStartedFactory = Callable[[Callable[[object], object], Stop], SyncStarted]
"""How a sync interpreter makes a run's started jobs: from how it performs a request and
the run's stop (`Threaded` by default; the simulator's `Virtual`)."""


def starts_requests(agent: Agent) -> bool:
    """Whether a processor of `agent` says it starts requests (`starts_requests = True`):
    the async interpreter then opens a task group for the run's started jobs (without
    one they are carried out in order, `InOrder`'s way: correct, not concurrent). An
    input processor that races the model (`concurrent`) starts its requests too."""
    if not agent.input_processors and not agent.output_processors:
        return False  # (every run asks: no generator made for an agent without any)
    return any(
        getattr(p, "starts_requests", False)
        for p in (*agent.input_processors, *agent.output_processors)
    ) or any(p.concurrent for p in agent.input_processors)
