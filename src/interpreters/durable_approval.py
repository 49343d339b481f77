"""Approvals of durable runs: a suspended run waits in its workflow for the decisions.

A durable run whose gate asks approval does not end: its workflow publishes what waits
(the DBOS event `approval`, a `Waiting`) and waits for one message on the suspension's
topic (`DBOS.recv`, whose deadline DBOS records, so a restart does not move it). Any
process sends the decisions (`decide`, on `DurableRuns` or `DurableClient`); the worker
that holds the run, or the one that recovers it after a crash, takes them and the run
goes on in the same workflow. The message is consumed once and recorded: a recovery
replays the same decisions, and the approved tool's step is checkpointed, so it never
runs twice. Past the approval timeout the waiting calls are denied (never run).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import msgspec
import sqlalchemy as sa
from dbos import WorkflowSerializationFormat
from dbos._sys_db import SendMessage, SystemDatabase

from pipeline.approval import (
    ApprovalError,
    Decision,
    Deny,
    RunNotSuspended,
    UnknownRun,
    check_pending,
)
from pipeline.result import PendingApproval, Suspension

APPROVAL = "approval"
"""The DBOS event key a waiting run publishes its `Waiting` under."""

DEFAULT_APPROVAL_TIMEOUT = 7 * 24 * 3600.0
"""How long a durable run waits for a decision by default (a week)."""


class Waiting(msgspec.Struct, frozen=True):
    """What a durable run waits for: its `number`-th suspension's pending calls, until
    `timeout` seconds after it suspended; `decided` once it took its decisions."""

    number: int
    pending: tuple[PendingApproval, ...]
    timeout: float
    decided: bool = False


_WAITING = msgspec.json.Decoder(Waiting)
_DECISIONS = msgspec.json.Decoder(tuple[Decision, ...])
_enc = msgspec.json.Encoder()


def check_timeout(value: object) -> float:
    """The approval timeout, checked: a positive finite number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
        0 < value < math.inf
    ):
        raise ValueError(f"approval_timeout must be a positive number of seconds, not {value!r}")
    return float(value)


def topic(number: int) -> str:
    """The message topic of a run's `number`-th suspension (a stale message never
    answers a later one)."""
    return f"{APPROVAL}:{number}"


def encode(w: Waiting) -> bytes:
    return _enc.encode(w)


def taken(s: Suspension, message: object) -> tuple[Decision, ...]:
    """The decisions a run goes on with: the message's, checked again against the
    suspension; every call denied when none came in time or it cannot be read (fails
    closed: nothing runs that was not approved)."""
    if message is None:
        return _deny_all(s, "no decision within the approval timeout: the call was not run")
    try:
        if not isinstance(message, bytes):
            raise ValueError("not a decision message")
        return check_pending(s.run_id, s.pending, _DECISIONS.decode(message))
    except (ValueError, TypeError, msgspec.DecodeError, ApprovalError) as e:
        return _deny_all(s, f"the decision could not be taken ({e}): the call was not run")


def _deny_all(s: Suspension, reason: str) -> tuple[Decision, ...]:
    return tuple(Deny(p.tool_call_id, p.digest, reason) for p in s.pending)


def waiting(sys_db: SystemDatabase, status: Callable[[str], str | None],
            run_id: str) -> Waiting:
    """What `run_id` waits for: `UnknownRun` for no such run, `RunNotSuspended` for a
    run that does not wait for a decision (not yet, not any more, or never)."""
    data = sys_db.get_event(run_id, APPROVAL, 0)
    if data is None:
        if status(run_id) is None:
            raise UnknownRun(f"no run {run_id!r}")
        raise RunNotSuspended(f"run {run_id!r} does not wait for approval")
    if not isinstance(data, bytes):
        raise RunNotSuspended(f"run {run_id!r} is not a pipeline-agents run")
    w = _WAITING.decode(data)
    if w.decided:
        raise RunNotSuspended(f"run {run_id!r} took its decisions already")
    return w


def decide(sys_db: SystemDatabase, status: Callable[[str], str | None], run_id: str,
           decisions: Sequence[Decision]) -> None:
    """Send `decisions` to the waiting run `run_id`, checked first (one per waiting call,
    each for the exact arguments: `ArgumentsMismatch`...). A suspension takes one
    message: a second decision is `RunNotSuspended` (two sent at the same moment: the
    first stored is the one taken, the other dropped by its idempotency key)."""
    w = waiting(sys_db, status, run_id)
    checked = check_pending(run_id, w.pending, tuple(decisions))
    key = f"{topic(w.number)}:decision"
    if _sent(sys_db, run_id, key):
        raise RunNotSuspended(f"run {run_id!r} was sent its decisions already")
    sys_db.send_bulk(
        [SendMessage(run_id, _enc.encode(checked), topic(w.number), key)],
        serialization_type=WorkflowSerializationFormat.DEFAULT, workflow_id=None, function_id=None,
        function_name="DBOS.send", send_to_forks=False,
    )


def _sent(sys_db: SystemDatabase, run_id: str, key: str) -> bool:
    """Whether the message of idempotency `key` to `run_id` is stored (DBOS names it
    `key::destination`)."""
    t = sys_db.tables.notifications
    with sys_db.engine.begin() as c:
        row = c.execute(
            sa.select(t.c.message_uuid).where(t.c.message_uuid == f"{key}::{run_id}")
        ).first()
    return row is not None
