"""`DurableApprovals`: the approval desk of durable runs (`interpreters.ApprovalDesk`).

    desk = DurableApprovals(runs)             # a DurableRuns (a worker) or a DurableClient
    for run in desk.suspended(thread_id=chat):
        desk.decide(run.run_id, [approve(p) for p in run.pending], thread_id=chat)
    runs.result(run.run_id)                   # the run went on in its worker

The same listing and errors as `Approvals` over a store: a decision for another thread
or resource than the run's is `OwnerMismatch`, before anything is sent. What waits and
the decisions themselves are `DurableRuns.pending` and `decide`'s (and their client's).
"""

from __future__ import annotations

from collections.abc import Sequence

from interpreters.approvals.store import DEFAULT_LISTED, check_listing
from interpreters.durable.dbos import listing
from interpreters.durable.dbos.runs import WORKFLOW, DurableClient, DurableRuns
from pipeline.approval import Decision, RunNotSuspended, UnknownRun, check_owner
from pipeline.values.result import SuspendedRun


class DurableApprovals:
    """The runs of `runs` waiting for decisions, listed and decided as in-process ones
    are with `Approvals` (see the module doc)."""

    def __init__(self, runs: DurableRuns | DurableClient) -> None:
        if not isinstance(runs, DurableRuns | DurableClient):
            raise TypeError(f"DurableApprovals takes a DurableRuns or DurableClient, not "
                            f"{type(runs).__name__}")
        self.runs = runs

    def _run(self, run_id: str) -> SuspendedRun:
        """What `run_id` waits for and whose it is (`UnknownRun`, `RunNotSuspended`)."""
        if not isinstance(run_id, str) or not run_id:
            raise TypeError(f"a run id is a non-empty str, not {run_id!r}")
        owner = listing.run_owner(self.runs._dbos, WORKFLOW, run_id)
        return SuspendedRun(run_id=run_id, thread_id=owner.thread_id,
                            resource_id=owner.resource_id, pending=self.runs.pending(run_id))

    def suspended(
        self,
        *,
        run_id: str | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        limit: int = DEFAULT_LISTED,
    ) -> tuple[SuspendedRun, ...]:
        """The runs waiting for decisions (see `ApprovalDesk.suspended`): by the order
        they started, read from the pending runs (`DurableRuns.suspended`)."""
        limit = check_listing(thread_id, resource_id, limit)
        if run_id is None:
            return self.runs.suspended(thread_id=thread_id, resource_id=resource_id,
                                       limit=limit)
        try:
            run = self._run(run_id)
        except (UnknownRun, RunNotSuspended):
            return ()
        if (thread_id is not None and run.thread_id != thread_id) or (
            resource_id is not None and run.resource_id != resource_id
        ):
            return ()
        return (run,)

    def decide(
        self,
        run_id: str,
        decisions: Sequence[Decision],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> None:
        """Send `decisions` to the waiting run `run_id` (`DurableRuns.decide`), the owner
        checked first (see `ApprovalDesk.decide`); the run goes on in its worker."""
        check_owner(self._run(run_id), thread_id, resource_id)
        self.runs.decide(run_id, decisions)
