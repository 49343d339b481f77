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
    typed_states,
)
from pipeline.values.result import RunResult, Suspension

Output = TypeVar("Output")


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


class MemoryApprovalStore:
    """An in-process `ApprovalStore` (thread-safe; lost with the process)."""

    def __init__(self) -> None:
        self._waiting: dict[str, Suspension] = {}
        self._taken: set[str] = set()
        self._lock = threading.Lock()

    def save(self, suspension: Suspension) -> None:
        with self._lock:
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

    def close(self) -> None:
        """Nothing to close (like the SQL stores' `close`)."""


class Approvals:
    """Keeps the suspended runs of `store` and hands each out once, with its decisions."""

    def __init__(self, store: ApprovalStore) -> None:
        self.store = store

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
            self.store.take(run_id)  # raises the error that says why
            raise UnknownRun(f"no suspended run {run_id!r}")  # (a store that took it)
        return s

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
