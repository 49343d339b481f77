"""`DurableApprovals`: the approval desk of durable runs (`interpreters.ApprovalDesk`).

    desk = DurableApprovals(runs)             # a DurableRuns (a worker) or a DurableClient
    for run in desk.suspended(thread_id=chat):
        desk.decide(run.run_id, [approve(p) for p in run.pending], thread_id=chat)
    runs.result(run.run_id)                   # the run went on in its worker

The same listing and errors as `Approvals` over a store: a decision for another thread
or resource than the run's is `OwnerMismatch`, before anything is sent. What waits and
the decisions themselves are `DurableRuns.pending` and `decide`'s (and their client's).

`policy` (an `ApprovalPolicy`: who may decide, two people above a bound, never the run's
user) is checked before anything is sent, as `Approvals` does; `trail` (an approval
store) keeps the audit records of the decisions this desk sends and refuses, appended
once `decide` claimed the decision (the claim in the system database is what decides;
a desk that dies between the claim and the record leaves the decision unrecorded).
Two people above a bound need a `trail` (it remembers the first approval).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from interpreters.approvals.audit import decision_record
from interpreters.approvals.policy import ApprovalPolicy
from interpreters.approvals.store import ApprovalDeskBase, ApprovalStore, check_run_id
from interpreters.durable.dbos import listing
from interpreters.durable.dbos.runs import WORKFLOW, DurableClient, DurableRuns
from pipeline.approval import Decision, RunNotSuspended, UnknownRun, check_owner, check_pending
from pipeline.values.result import SuspendedRun


class DurableApprovals(ApprovalDeskBase[SuspendedRun]):
    """The runs of `runs` waiting for decisions, listed and decided as in-process ones
    are with `Approvals` (see the module doc)."""

    def __init__(
        self,
        runs: DurableRuns | DurableClient,
        *,
        policy: ApprovalPolicy | None = None,
        trail: ApprovalStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(runs, DurableRuns | DurableClient):
            raise TypeError(f"DurableApprovals takes a DurableRuns or DurableClient, not "
                            f"{type(runs).__name__}")
        if policy is not None and not isinstance(policy, ApprovalPolicy):
            raise TypeError(f"policy is an ApprovalPolicy, not {type(policy).__name__}")
        self.runs = runs
        self.policy = policy
        self.trail = trail
        self.clock = clock

    def _run(self, run_id: str) -> SuspendedRun:
        """What `run_id` waits for and whose it is (`UnknownRun`, `RunNotSuspended`)."""
        owner = listing.run_owner(self.runs._dbos, WORKFLOW, check_run_id(run_id))
        return SuspendedRun(run_id=run_id, thread_id=owner.thread_id,
                            resource_id=owner.resource_id, pending=self.runs.pending(run_id))

    @property
    def _trail(self) -> ApprovalStore | None:
        return self.trail

    # The runs waiting, for `suspended`: by the order they started, read from the
    # pending runs (`DurableRuns.suspended`).
    def _waiting_run(self, run_id: str) -> SuspendedRun | None:
        try:
            return self._run(run_id)
        except (UnknownRun, RunNotSuspended):
            return None

    def _waiting_runs(
        self, thread_id: str | None, resource_id: str | None, limit: int
    ) -> tuple[SuspendedRun, ...]:
        return self.runs.suspended(thread_id=thread_id, resource_id=resource_id, limit=limit)

    def _listed(self, found: tuple[SuspendedRun, ...]) -> tuple[SuspendedRun, ...]:
        return found

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
        run = self._run(run_id)
        check_owner(run, thread_id, resource_id)
        given = check_pending(run_id, run.pending, tuple(decisions))
        now = self.clock()
        pending = {p.tool_call_id: p for p in run.pending}
        self._check_policy(run, given, now)
        self.runs.decide(run_id, given)
        if self.trail is not None:
            self.trail.append_audit(
                [decision_record(run, pending[d.tool_call_id], d, now) for d in given])
