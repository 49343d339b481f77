"""The durable runs waiting for approval, by whose they are: their thread and resource.

A durable run keeps its thread and resource in its stored start (`RunStart`, the
workflow's input), and publishes what it waits for as the DBOS event `approval`
(`interpreters.durable.dbos.approval`). A listing reads the pending runs' inputs, a page
at a time in the order they started, and asks each run of the owner sought what it waits
for: a run that does not wait (yet, or any more) is not listed.
"""

from __future__ import annotations

import msgspec
from dbos import DBOS, DBOSClient

from interpreters.approvals.store import check_listing
from interpreters.durable.dbos import approval as da
from pipeline.approval import RunNotSuspended, UnknownRun
from pipeline.values.result import SuspendedRun

PAGE = 100
"""The pending runs read at once."""


class Owner(msgspec.Struct, frozen=True):
    """What a listing reads of a run's stored start: its thread and resource."""

    thread_id: str | None = None
    resource_id: str | None = None


_OWNER = msgspec.json.Decoder(Owner)


Workflows = type[DBOS] | DBOSClient
"""DBOS's listing of workflows: of `DBOS` in a worker, of a `DBOSClient` elsewhere."""


def owner_of(inputs: object) -> Owner | None:
    """The owner in a run's workflow input (`{"args": [agent, payload]}`), None when it is
    not a pipeline-agents run's."""
    args = inputs.get("args") if isinstance(inputs, dict) else None
    if not isinstance(args, list | tuple) or len(args) != 2 or not isinstance(args[1], bytes):
        return None
    try:
        return _OWNER.decode(args[1])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def run_owner(dbos: Workflows, workflow: str, run_id: str) -> Owner:
    """The owner of run `run_id` (`UnknownRun` when there is no such run)."""
    found = dbos.list_workflows(workflow_ids=[run_id], name=workflow, load_output=False)
    owner = owner_of(found[0].input) if found else None
    if owner is None:
        raise UnknownRun(f"no run {run_id!r}")
    return owner


def suspended(
    dbos: Workflows,
    channel: da.Channel,
    workflow: str,
    *,
    thread_id: str | None,
    resource_id: str | None,
    limit: int,
) -> tuple[SuspendedRun, ...]:
    """The runs of `workflow` waiting for approval in thread `thread_id` and for resource
    `resource_id` (None: any), the first `limit` in the order they started."""
    limit = check_listing(thread_id, resource_id, limit)
    found: list[SuspendedRun] = []
    offset = 0
    while True:
        page = dbos.list_workflows(name=workflow, status="PENDING", limit=PAGE, offset=offset,
                                   load_input=True, load_output=False)
        for w in page:
            owner = owner_of(w.input)
            if owner is None or (thread_id is not None and owner.thread_id != thread_id) or (
                resource_id is not None and owner.resource_id != resource_id
            ):
                continue
            try:
                waiting = da.waiting(channel, w.workflow_id)
            except (RunNotSuspended, UnknownRun):
                continue  # not waiting for a decision (yet, or any more)
            found.append(SuspendedRun(run_id=w.workflow_id, thread_id=owner.thread_id,
                                      resource_id=owner.resource_id, pending=waiting.pending))
            if len(found) == limit:
                return tuple(found)
        if len(page) < PAGE:
            return tuple(found)
        offset += PAGE
