"""One approval API for suspended runs on every interpreter: `ApprovalDesk`.

    desk = Approvals(store, agent)          # in-process runs (any interpreter), or
    desk = DurableApprovals(runs)           # durable runs (DurableRuns or DurableClient)

    for run in desk.suspended(thread_id=chat):       # SuspendedRun: run_id, owner, pending
        go_on = desk.decide(run.run_id, [approve(p) for p in run.pending], thread_id=chat)

Both list what waits the same way and refuse a decision with the same `ApprovalError`s,
before anything runs or is taken: `UnknownRun`, `RunNotSuspended` (decided already),
`OwnerMismatch` (another thread or resource), `ArgumentsMismatch` (a stale approval),
`EditRejected` (an edit its tool refuses), `UnknownCall`, `DuplicateDecision`,
`MissingDecision`. They differ in how the run goes on: an in-process
run is run again by the app with the `Resumption` `decide` gives (`interp.run(agent, (),
resume=go_on)`); a durable run goes on in its worker (`decide` gives None; read it with
`result` or `chunks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from interpreters.approvals.store import DEFAULT_LISTED
from pipeline.approval import ApprovalAnswer, Decision, Resumption, UnknownRun, answered
from pipeline.values.result import SuspendedRun


class ApprovalDesk(Protocol):
    """Where a person's decisions meet the runs waiting for them (see the module doc)."""

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
        suspended (durable: started). A run that does not wait is not listed."""
        ...

    def decide(
        self,
        run_id: str,
        decisions: Sequence[Decision],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> Resumption | None:
        """Hand `decisions` (one per waiting call) to run `run_id`, checked first: an
        `ApprovalError` leaves the run waiting. `thread_id`, `resource_id`: the owner the
        caller acts for (None: not checked), which must be the run's. Gives the
        `Resumption` an in-process run goes on with, None for a durable run."""
        ...


def decide_answers(
    desk: ApprovalDesk,
    answers: Sequence[ApprovalAnswer],
    *,
    thread_id: str,
    resource_id: str | None = None,
    by: str = "",
) -> Resumption | None:
    """Hand the answers a page sent (`pipeline.approval.ApprovalAnswer`, by approval id) to the
    run waiting in thread `thread_id` (and for `resource_id`, when given), as decisions
    made by `by`: what an HTTP handler for a chat's approvals does. `UnknownRun` when no
    run waits there; the other `ApprovalError`s as `decide`."""
    waiting = desk.suspended(thread_id=thread_id, resource_id=resource_id, limit=1)
    if not waiting:
        raise UnknownRun(f"no run waits for approval in thread {thread_id!r}")
    run = waiting[0]
    return desk.decide(run.run_id, answered(run.pending, answers, by=by),
                       thread_id=thread_id, resource_id=resource_id)
