"""The audit trail of approvals: one record for every suspension and every decision.

An `ApprovalStore` appends them (with the suspension it saves, the run it hands out:
in the same transaction) and lists them; it never changes or removes one (the SQL
stores' tables refuse an UPDATE or DELETE). `Approvals.audit(...)` lists them and
`Approvals.export_audit()` gives them as JSON lines.

Outcomes:
- `"waiting"`: a call suspended for a decision (`decided_by` empty; `expires_at` when the
  wait ends, if it does);
- `"approved"`, `"edited"`, `"denied"`: a decision that resumed the run;
- `"first approval"`: one of the two approvals a call needs (`ToolApprovalRule.
  two_person_above`), the run still waiting for the second;
- `"refused"`: a decision the rules on deciders refused (`reason` says why), the run
  still waiting;
- `"expired"`: the wait ended without a decision: the call is denied, never run;
- `"referred"`: the reviewer handed the call to a person (`reason` says why).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import msgspec

from pipeline.approval import Approve, Decision, Deny, Edit, call_digest
from pipeline.values.result import PendingApproval, RunResult, SuspendedRun, Suspension

Waits = Suspension | SuspendedRun
"""A run waiting for decisions: its suspension, or as a desk lists it (either has its
run id, owner and pending calls)."""

Outcome = Literal[
    "waiting", "approved", "edited", "denied", "first approval", "refused", "expired",
    "referred",
]
OUTCOMES: tuple[Outcome, ...] = (
    "waiting", "approved", "edited", "denied", "first approval", "refused", "expired",
    "referred",
)


class AuditRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One suspension or decision of one call (see the module doc for `outcome`)."""

    run_id: str
    thread_id: str | None = None
    resource_id: str | None = None
    """The run's owner (its thread and resource)."""
    tool_call_id: str
    tool_name: str
    digest: str
    """`call_digest` of the call as it waited (its id, tool and exact arguments)."""
    outcome: Outcome
    decided_by: str = ""
    """The principal who decided (a reviewer's is "reviewer:<id>"); empty for a wait."""
    reason: str = ""
    edited_digest: str | None = None
    """For an edit: the digest of the arguments it runs with instead."""
    at: float
    """When it was recorded (seconds since the epoch, the desk's clock)."""
    expires_at: float | None = None
    """For a wait: when it ends undecided (None: it does not)."""
    seq: int = 0
    """Its place in the store's trail (set by the store; 0 before it is appended)."""


_ENC = msgspec.json.Encoder(order="sorted")


def waiting_records(
    s: Waits, at: float, expires_at: float | None
) -> tuple[AuditRecord, ...]:
    """A "waiting" record for each call `s` waits with."""
    return tuple(
        AuditRecord(run_id=s.run_id, thread_id=s.thread_id, resource_id=s.resource_id,
                    tool_call_id=p.tool_call_id, tool_name=p.tool_name, digest=p.digest,
                    outcome="waiting", at=at, expires_at=expires_at)
        for p in s.pending
    )


def decision_record(
    s: Waits,
    p: PendingApproval,
    d: Decision,
    at: float,
    outcome: Outcome | None = None,
    reason: str | None = None,
) -> AuditRecord:
    """The record of decision `d` for call `p` of `s` (its outcome from the decision's
    kind unless given)."""
    edited = call_digest(p.tool_call_id, p.tool_name, d.args) if isinstance(d, Edit) else None
    kind: Outcome = ("denied" if isinstance(d, Deny) else "edited" if isinstance(d, Edit)
                     else "approved")
    assert isinstance(d, Approve | Deny | Edit)
    return AuditRecord(
        run_id=s.run_id, thread_id=s.thread_id, resource_id=s.resource_id,
        tool_call_id=p.tool_call_id, tool_name=p.tool_name, digest=p.digest,
        outcome=outcome or kind, decided_by=d.by,
        reason=d.reason if reason is None else reason, edited_digest=edited, at=at,
    )


def review_records(
    result: RunResult[Any], clock: Callable[[], float]
) -> tuple[AuditRecord, ...]:
    """A record of each approval reviewer's verdict in `result`: "approved" (decided by
    "reviewer:<id>") or "referred" (handed to a person)."""
    if not result.reviews:
        return ()
    now = clock()
    return tuple(
        AuditRecord(run_id=v.run_id, thread_id=v.thread_id, resource_id=v.resource_id,
                    tool_call_id=v.tool_call_id, tool_name=v.tool_name, digest=v.digest,
                    outcome="approved" if v.approved else "referred",
                    decided_by=f"reviewer:{v.reviewer}", reason=v.reason, at=now)
        for v in result.reviews
    )


def jsonl(records: Sequence[AuditRecord]) -> Iterator[bytes]:
    """Each record as one line of JSON (keys sorted)."""
    for r in records:
        yield _ENC.encode(r) + b"\n"
