"""Approvals inside a tree of runs: a child's waiting calls as its parent lists them, and
the decisions handed back down.

A child run that suspends suspends its parent, and so on up to the root: the root's
`Suspension.pending` lists every waiting call of the tree, each with its `path` (the
tool-call ids of the child runs it waits in) and an id that is that path and the call's
own id joined by "/", its digest over that id. A decision made for it is checked against
the root's pending list like any (`pipeline.approval.check_decisions`), then handed down
as the child's own (`child_resumption`), so the child resumes exactly at that call, once.
"""

from __future__ import annotations

from pipeline.approval import call_digest, nested_resumption
from pipeline.values.result import PendingApproval, Suspension

SEP = "/"


def nested_pending(call_id: str, child: Suspension) -> tuple[PendingApproval, ...]:
    """The child's waiting calls as its parent lists them, under its call `call_id`."""
    out: list[PendingApproval] = []
    for p in child.pending:
        qid = f"{call_id}{SEP}{p.tool_call_id}"
        out.append(PendingApproval(
            tool_call_id=qid, tool_name=p.tool_name, args=p.args, message=p.message,
            processor_id=p.processor_id, digest=call_digest(qid, p.tool_name, p.args),
            metadata=p.metadata, path=(call_id, *p.path),
        ))
    return tuple(out)


def split_id(tool_call_id: str) -> tuple[str, str] | None:
    """A nested call's id as (the parent's call, the rest); None for a run's own call."""
    head, sep, rest = tool_call_id.partition(SEP)
    return (head, rest) if sep else None


child_resumption = nested_resumption
"""The child's resumption from the root's decisions that name calls under its call (see
`pipeline.approval.nested_resumption`)."""
