"""Suspended runs kept in a store, and resumed once with a person's decisions.

    approvals = Approvals(MemoryApprovalStore())
    result = approvals.keep(interp.run(agent, "pay the invoice"))
    if result.suspension is not None:
        p = result.suspension.pending[0]          # show p.tool_name, p.args, p.message
        go_on = approvals.take(agent, result.suspension.run_id, [approve(p)])
        result = approvals.keep(interp.run(agent, (), resume=go_on))

`ApprovalStore` is what a store does: keep a suspension (`save`), hand it out once
(`take`: a second take of the same suspension is `RunNotSuspended`, so an approved tool
never runs twice), and show what waits (`get`). `MemoryApprovalStore` is the in-process
one; `interpreters.approvals.sql` has the SQLite and PostgreSQL ones. A store that
writes suspensions out gives their processors' states back as plain data; `Approvals.take`
types them again by the agent's processors (`typed_states`).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Protocol, TypeVar

from pipeline.agent import Agent
from pipeline.approval import (
    Decision,
    Resumption,
    RunNotSuspended,
    UnknownRun,
    check_owner,
    check_resumption,
    resumption,
    suspended_run,
    typed_states,
)
from pipeline.values.result import RunResult, SuspendedRun, Suspension

Output = TypeVar("Output")


DEFAULT_LISTED = 100
"""How many waiting runs a listing gives by default."""
MAX_LISTED = 1000
"""How many waiting runs one listing gives at most."""


class ApprovalStore(Protocol):
    """Where suspended runs wait for their decisions."""

    def save(self, suspension: Suspension) -> None:
        """Keep `suspension` (a run suspended again replaces what was taken)."""
        ...

    def take(self, run_id: str) -> Suspension:
        """The suspension of `run_id`, handed out once: `UnknownRun` if none was kept,
        `RunNotSuspended` if it was taken already."""
        ...

    def get(self, run_id: str) -> Suspension | None:
        """The suspension waiting for `run_id`, if any (not taken)."""
        ...

    def suspended(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        limit: int = DEFAULT_LISTED,
    ) -> tuple[Suspension, ...]:
        """The suspensions waiting (not taken) in thread `thread_id` and for resource
        `resource_id` (None: any), the first `limit` in the order they were saved."""
        ...


def check_listing(thread_id: object, resource_id: object, limit: object) -> int:
    """The arguments of a listing, checked: `TypeError` or `ValueError`."""
    for name, value in (("thread_id", thread_id), ("resource_id", resource_id)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} is a str or None, not {value!r}")
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit is an int, not {limit!r}")
    if not 1 <= limit <= MAX_LISTED:
        raise ValueError(f"limit is from 1 to {MAX_LISTED}, not {limit}")
    return limit


def _run_id(run_id: object) -> str:
    if not isinstance(run_id, str) or not run_id:
        raise TypeError(f"a run id is a non-empty str, not {run_id!r}")
    return run_id


def owned_by(s: Suspension, thread_id: str | None, resource_id: str | None) -> bool:
    """Whether `s` is in thread `thread_id` and for resource `resource_id` (None: any)."""
    return (thread_id is None or s.thread_id == thread_id) and (
        resource_id is None or s.resource_id == resource_id
    )


class MemoryApprovalStore:
    """An in-process `ApprovalStore` (thread-safe; lost with the process)."""

    def __init__(self) -> None:
        self._waiting: dict[str, Suspension] = {}
        self._taken: set[str] = set()
        self._lock = threading.Lock()

    def save(self, suspension: Suspension) -> None:
        with self._lock:
            self._waiting.pop(suspension.run_id, None)  # (saved again: the latest)
            self._waiting[suspension.run_id] = suspension
            self._taken.discard(suspension.run_id)

    def take(self, run_id: str) -> Suspension:
        with self._lock:
            s = self._waiting.pop(run_id, None)
            if s is not None:
                self._taken.add(run_id)
                return s
            if run_id in self._taken:
                raise RunNotSuspended(f"run {run_id!r} was resumed already")
            raise UnknownRun(f"no suspended run {run_id!r}")

    def get(self, run_id: str) -> Suspension | None:
        with self._lock:
            return self._waiting.get(run_id)

    def suspended(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        limit: int = DEFAULT_LISTED,
    ) -> tuple[Suspension, ...]:
        limit = check_listing(thread_id, resource_id, limit)
        with self._lock:
            found = (s for s in self._waiting.values() if owned_by(s, thread_id, resource_id))
            return tuple(itertools.islice(found, limit))

    def close(self) -> None:
        """Nothing to close (like the SQL stores' `close`)."""


class Approvals:
    """Keeps the suspended runs of `store` and hands each out once, with its decisions:
    the `ApprovalDesk` of in-process runs (`interpreters.approvals.desk`). `agent`: the
    agent its runs are resumed on, which `decide` checks them against (`take` is given
    it instead)."""

    def __init__(self, store: ApprovalStore, agent: Agent | None = None) -> None:
        self.store = store
        self.agent = agent

    def keep(self, result: RunResult[Output]) -> RunResult[Output]:
        """`result`, its suspension kept in the store when it is suspended."""
        if result.status == "suspended" and result.suspension is not None:
            self.store.save(result.suspension)
        return result

    def waiting(self, run_id: str) -> Suspension:
        """What `run_id` waits for (`UnknownRun` if nothing waits, `RunNotSuspended` if
        it was resumed already)."""
        s = self.store.get(run_id)
        if s is None:
            # Why nothing waits: only a take says (unknown, or taken already). A run
            # saved meanwhile is taken by it, so it is put back: reading takes nothing.
            found = self.store.take(run_id)
            self.store.save(found)
            return found
        return s

    def suspended(
        self,
        *,
        run_id: str | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        limit: int = DEFAULT_LISTED,
    ) -> tuple[SuspendedRun, ...]:
        """The runs waiting for decisions: run `run_id`, in thread `thread_id`, for
        resource `resource_id` (each None: any), the first `limit` in the order they
        suspended (see `ApprovalDesk.suspended`)."""
        limit = check_listing(thread_id, resource_id, limit)
        found: tuple[Suspension, ...]
        if run_id is not None:
            s = self.store.get(_run_id(run_id))
            found = () if s is None or not owned_by(s, thread_id, resource_id) else (s,)
        else:
            found = self.store.suspended(thread_id=thread_id, resource_id=resource_id,
                                         limit=limit)
        return tuple(suspended_run(s) for s in found)

    def decide(
        self,
        run_id: str,
        decisions: Sequence[Decision],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> Resumption:
        """`take` on this Approvals' agent: the resumption of `run_id` with `decisions`,
        everything checked before the run is taken (see `ApprovalDesk.decide`); run it
        with `interp.run(agent, (), resume=...)`."""
        if self.agent is None:
            raise TypeError(
                "Approvals.decide checks the run against its agent before taking it: "
                "make it Approvals(store, agent), or call take(agent, ...)"
            )
        return self.take(self.agent, run_id, decisions, thread_id=thread_id,
                         resource_id=resource_id)

    def take(
        self,
        agent: Agent,
        run_id: str,
        decisions: Sequence[Decision],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> Resumption:
        """The resumption of `run_id` with `decisions`, for `interp.run(agent, (),
        resume=...)` on any interpreter. Everything is checked before the suspension is
        taken (the decisions, the agent, the owner: `thread_id` and `resource_id`, when
        given, must be the run's, else `OwnerMismatch`), so a refused resume leaves it
        waiting; once taken it is never handed out again."""
        waiting = self.waiting(run_id)
        check_owner(waiting, thread_id, resource_id)
        r = resumption(waiting, list(decisions))
        check_resumption(agent, r)
        typed = typed_states(agent, waiting)
        taken = self.store.take(run_id)
        if taken != waiting:  # resumed and suspended again since it was read
            self.store.save(taken)
            raise RunNotSuspended(f"run {run_id!r} was resumed (and suspended again) meanwhile")
        return Resumption(typed, r.decisions)
