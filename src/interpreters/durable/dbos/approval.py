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

import hashlib
import math
from collections.abc import Sequence
from typing import Protocol

import msgspec
import sqlalchemy as sa

from interpreters.durable.dbos.store import ensure_table
from pipeline.approval import (
    ApprovalError,
    Decision,
    Deny,
    RunNotSuspended,
    UnknownRun,
    check_pending,
)
from pipeline.values.result import PendingApproval, Suspension

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


class Channel(Protocol):
    """How `pending` and `decide` reach a run: DBOS's public calls (of `DBOS` in a
    worker, of a `DBOSClient` elsewhere) and the system database's engine, which holds
    the claims."""

    def get_event(self, workflow_id: str, key: str, timeout_seconds: float) -> object: ...

    def send(self, destination_id: str, message: bytes, topic: str,
             idempotency_key: str) -> None: ...

    def status(self, run_id: str) -> str | None: ...

    @property
    def engine(self) -> sa.Engine: ...


CLAIMS = sa.Table(
    "pipeline_agents_decisions",
    sa.MetaData(),
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("topic", sa.Text, primary_key=True),
    sa.Column("digest", sa.Text, nullable=False),
)
"""One row per suspension decided: the SHA-256 of the decisions sent to it. Its primary
key makes the first `decide` the only one (DBOS's send has no send-if-none)."""


def waiting(ch: Channel, run_id: str) -> Waiting:
    """What `run_id` waits for: `UnknownRun` for no such run, `RunNotSuspended` for a
    run that does not wait for a decision (not yet, not any more, or never)."""
    data = ch.get_event(run_id, APPROVAL, 0)
    if data is None:
        if ch.status(run_id) is None:
            raise UnknownRun(f"no run {run_id!r}")
        raise RunNotSuspended(f"run {run_id!r} does not wait for approval")
    if not isinstance(data, bytes):
        raise RunNotSuspended(f"run {run_id!r} is not a pipeline-agents run")
    w = _WAITING.decode(data)
    if w.decided:
        raise RunNotSuspended(f"run {run_id!r} took its decisions already")
    return w


def decide(ch: Channel, run_id: str, decisions: Sequence[Decision]) -> None:
    """Send `decisions` to the waiting run `run_id`, checked first (one per waiting call,
    each for the exact arguments: `ArgumentsMismatch`...). A suspension takes one set of
    decisions: the first `decide` claims it (in one insert, so of two at the same moment
    exactly one wins) and any other set is `RunNotSuspended`. The same set again is
    sent again, to the same idempotency key: a caller that crashed between its claim and
    its send finishes by repeating the call, and the run still gets one message."""
    w = waiting(ch, run_id)
    body = _enc.encode(check_pending(run_id, w.pending, tuple(decisions)))
    digest = hashlib.sha256(body).hexdigest()
    claimed = _claim(ch.engine, run_id, topic(w.number), digest)
    if claimed != digest:
        raise RunNotSuspended(f"run {run_id!r} was sent other decisions already")
    ch.send(run_id, body, topic(w.number), f"{topic(w.number)}:decision")


def _claim(engine: sa.Engine, run_id: str, on: str, digest: str) -> str:
    """The digest of the decisions that hold the claim on `run_id`'s suspension `on`:
    `digest` when this call took it, another one when another call had."""
    ensure_table(engine, CLAIMS)
    try:
        with engine.begin() as c:
            c.execute(sa.insert(CLAIMS).values(run_id=run_id, topic=on, digest=digest))
        return digest
    except sa.exc.IntegrityError:
        with engine.begin() as c:
            held = c.execute(
                sa.select(CLAIMS.c.digest).where(CLAIMS.c.run_id == run_id,
                                                 CLAIMS.c.topic == on)
            ).scalar_one()
        return str(held)
