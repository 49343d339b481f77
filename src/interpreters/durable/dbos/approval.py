"""Approvals of durable runs: a suspended run waits in its workflow for the decisions.

A durable run whose gate asks approval does not end: its workflow publishes what waits
(the DBOS event `approval`, a `Waiting`, with the absolute deadline of the wait) and
waits for a message on the suspension's topic (`DBOS.recv`). Any process sends the
decisions (`decide`, on `DurableRuns` or `DurableClient`); the worker that holds the
run, or the one that recovers it after a crash, takes them and the run goes on in the
same workflow.

Who decided is settled by one row per suspension in the system database (table
`pipeline_agents_approval_claims`), written with the database's clock:

- `decide` checks the decisions (one per waiting call, for the exact arguments; an edit
  bound to its tool), then in ONE transaction claims the suspension and sends the
  message: a caller that dies mid-way leaves neither. Past the deadline it claims the
  suspension as expired instead and raises `ApprovalExpired`.
- The run, each time it wakes (a message, or its wait's end), settles: a claim made in
  time is the decision and its message is taken (checked again, edits bound again: a
  message that does not fit is a denial, never an error that ends the run); with no
  claim past the deadline it claims the suspension as expired and denies the calls; a
  message no `decide` claimed is not taken (the run waits on).

Of a decision and the deadline exactly one wins, whichever claims first: never a
decision accepted and then dropped, never one run after it was refused. Every look is
recorded, so a recovery replays the same decisions, and the approved tool's step is
checkpointed: it never runs twice.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Literal, Protocol

import msgspec
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from interpreters.durable.dbos.store import db_now, ensure_table
from pipeline.agent import Agent, AgentTool
from pipeline.approval import (
    ApprovalError,
    ApprovalExpired,
    Decision,
    Deny,
    Edit,
    EditRejected,
    Resumption,
    RunNotSuspended,
    UnknownRun,
    check_edits,
    check_pending,
    check_resumption,
)
from pipeline.values.result import PendingApproval, Suspension

APPROVAL = "approval"
"""The DBOS event key a waiting run publishes its `Waiting` under."""

DEFAULT_APPROVAL_TIMEOUT = 7 * 24 * 3600.0
"""How long a durable run waits for a decision by default (a week)."""

MAX_LOOKS = 1000
"""Times one wait wakes (a message not sent by `decide`, an early wake) before its calls
are denied: a bound on what a flood of stray messages can make a run record."""

RELOOK = 0.05
"""The shortest wait of a look after the first."""

TIMED_OUT = "no decision within the approval timeout: the call was not run"


class Waiting(msgspec.Struct, frozen=True):
    """What a durable run waits for: its `number`-th suspension's pending calls, until
    `deadline` (seconds since the epoch, on the system database's clock; `timeout`
    seconds after it suspended); `decided` once it took its decisions. `agent`: the
    run's agent, by name, whose tools an edit is bound to; `children`: each child run
    waiting in the run's tree of agents, by its call's id (its path joined by "/") and
    the tool that runs it, so an edit of a call a child waits on is bound to the
    child's agent's tool."""

    number: int
    pending: tuple[PendingApproval, ...]
    timeout: float
    decided: bool = False
    deadline: float | None = None
    agent: str = ""
    children: tuple[tuple[str, str], ...] = ()


class Settled(msgspec.Struct, frozen=True):
    """What one look at a wait found (recorded as the step `approval-settle`): a claimed
    decision (its digest), the wait expired, a message no `decide` claimed, or nothing
    yet; `now` is the database's time of the look."""

    outcome: Literal["decided", "expired", "unclaimed", "open"]
    now: float
    digest: str | None = None


_WAITING = msgspec.json.Decoder(Waiting)
_SETTLED = msgspec.json.Decoder(Settled)
_DECISIONS = msgspec.json.Decoder(tuple[Decision, ...])
_enc = msgspec.json.Encoder()

AgentOf = Callable[[str], Agent | None]
"""The agent of that name whose tools edits are bound to (None: not known here)."""


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


def encode_settled(s: Settled) -> bytes:
    return _enc.encode(s)


def read_settled(data: object) -> Settled:
    if not isinstance(data, bytes):
        raise TypeError("a recorded look at an approval wait is not readable")
    return _SETTLED.decode(data)


def children_of(s: Suspension, prefix: str = "") -> tuple[tuple[str, str], ...]:
    """The child runs waiting in `s`'s tree (`Waiting.children`)."""
    found: list[tuple[str, str]] = []
    for g in s.calls:
        if g.kind == "child" and g.child is not None:
            qid = prefix + g.call.tool_call_id
            found.append((qid, g.call.tool_name))
            found.extend(children_of(g.child, qid + "/"))
    return tuple(found)


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


# --- the run's side ------------------------------------------------------------------


def look(s: Suspension, message: object, settled: Settled,
         agent: Agent | None) -> tuple[Decision, ...] | None:
    """The decisions a run goes on with after one look, or None to wait on: the
    claimed decision's message (checked again against the suspension and bound to the
    tools of `agent`: one that does not fit denies every call), every call denied past
    the deadline. Pure: a replay gets the same from the recorded look."""
    if settled.outcome == "expired":
        return deny_all(s, TIMED_OUT)
    if (settled.outcome == "decided" and isinstance(message, bytes)
            and _digest(message) == settled.digest):
        return taken(s, message, agent)
    return None


def taken(s: Suspension, message: bytes, agent: Agent | None) -> tuple[Decision, ...]:
    """The decisions in `message`, checked again against the suspension and its tools;
    every call denied when they do not fit (fails closed: nothing runs that was not
    approved, and the run goes on)."""
    try:
        decisions = check_pending(s.run_id, s.pending, _DECISIONS.decode(message))
        if agent is None:
            if any(isinstance(d, Edit) for d in decisions):
                raise EditRejected("the run's agent is unknown here: an edit cannot be bound")
        else:  # what the resume checks (edits bound, a child run's by its own agent)
            check_resumption(agent, Resumption(s, decisions))
        return decisions
    except (ValueError, TypeError, msgspec.DecodeError, ApprovalError) as e:
        return deny_all(s, f"the decision could not be taken ({e}): the call was not run")


def deny_all(s: Suspension, reason: str) -> tuple[Decision, ...]:
    return tuple(Deny(p.tool_call_id, p.digest, reason) for p in s.pending)


def next_wait(deadline: float, settled: Settled) -> float:
    """How long the next look waits (a message is sent at once: this is the most)."""
    return max(RELOOK, deadline - settled.now)


def clock(engine: sa.Engine) -> float:
    """The database's time now (what deadlines are on)."""
    with engine.begin() as c:
        return float(c.execute(sa.select(db_now(engine))).scalar_one())


def settle(engine: sa.Engine, run_id: str, number: int, deadline: float,
           message: object) -> Settled:
    """Look at the claim on `run_id`'s `number`-th suspension: a claimed decision wins;
    with none past `deadline`, claim the suspension as expired (of this and a `decide`
    at the same moment, exactly one claims it)."""
    ensure_table(engine, CLAIMS)
    on = topic(number)
    with engine.begin() as c:
        now = float(c.execute(sa.select(db_now(engine))).scalar_one())
        row = _claim_of(c, run_id, on)
        if row is None and now >= deadline:
            c.execute(_insert_absent(engine, run_id, on, "expired", None, now))
            row = _claim_of(c, run_id, on)
    if row is None:
        return Settled("open" if message is None else "unclaimed", now)
    outcome, digest = row
    if outcome == "expired":
        return Settled("expired", now)
    return Settled("decided", now, digest)


# --- the caller's side -----------------------------------------------------------------


class Channel(Protocol):
    """How `pending` and `decide` reach a run: DBOS's public calls (of `DBOS` in a
    worker, of a `DBOSClient` elsewhere) and the system database's engine, which holds
    the claims."""

    def get_event(self, workflow_id: str, key: str, timeout_seconds: float) -> object: ...

    def send_in(self, conn: sa.Connection, destination_id: str, message: bytes, topic: str,
                idempotency_key: str) -> None:
        """Send in the caller's transaction (`DBOSClient.send_in_transaction`)."""
        ...

    def status(self, run_id: str) -> str | None: ...

    @property
    def engine(self) -> sa.Engine: ...


CLAIMS = sa.Table(
    "pipeline_agents_approval_claims",
    sa.MetaData(),
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("topic", sa.Text, primary_key=True),
    sa.Column("outcome", sa.Text, nullable=False),
    sa.Column("digest", sa.Text, nullable=True),
    sa.Column("at", sa.Float, nullable=False),
)
"""One row per suspension settled: "decided" (the SHA-256 of the decisions sent to it)
or "expired", and when (the database's clock). Its primary key makes the first claim
the only one."""


def waiting(ch: Channel, run_id: str) -> Waiting:
    """What `run_id` waits for: `UnknownRun` for no such run, `RunNotSuspended` for a
    run that does not wait for a decision (not yet, not any more, or never),
    `ApprovalExpired` for one whose wait is past its deadline."""
    data = ch.get_event(run_id, APPROVAL, 0)
    if data is None:
        if ch.status(run_id) is None:
            raise UnknownRun(f"no run {run_id!r}")
        raise RunNotSuspended(f"run {run_id!r} does not wait for approval")
    if not isinstance(data, bytes):
        raise RunNotSuspended(f"run {run_id!r} is not a pipeline-agents run")
    w = _WAITING.decode(data)
    if w.deadline is None:  # (a wait an older version published)
        if w.decided:
            raise RunNotSuspended(f"run {run_id!r} took its decisions already")
        return w
    engine = ch.engine
    ensure_table(engine, CLAIMS)
    with engine.begin() as c:
        now = float(c.execute(sa.select(db_now(engine))).scalar_one())
        row = _claim_of(c, run_id, topic(w.number))
    if (row is not None and row[0] == "expired") or (row is None and now >= w.deadline):
        raise _too_late(run_id)
    if w.decided:
        raise RunNotSuspended(f"run {run_id!r} took its decisions already")
    return w


def decide(ch: Channel, run_id: str, decisions: Sequence[Decision], agent_of: AgentOf) -> None:
    """Send `decisions` to the waiting run `run_id`, checked first (one per waiting call,
    each for the exact arguments: `ArgumentsMismatch`...; an edit bound to its tool of
    the run's agent: `EditRejected`). A suspension takes one set of decisions: the
    first `decide` claims it, with its message, in one transaction (of two at the same
    moment exactly one wins), and any other set is `RunNotSuspended`; past the deadline
    it is `ApprovalExpired`. The same set again is accepted and delivered once."""
    w = waiting(ch, run_id)
    checked = check_pending(run_id, w.pending, tuple(decisions))
    if any(isinstance(d, Edit) for d in checked):
        agent = agent_of(w.agent)
        if agent is None:
            raise EditRejected(
                f"run {run_id!r}: an edit is checked against the tools of agent "
                f"{w.agent!r}, which this process does not have (give agents= to "
                "DurableClient)"
            )
        _check_edits(run_id, w, agent, checked)
    body = _enc.encode(checked)
    _claim_and_send(ch, run_id, w, body, _digest(body))


def _check_edits(run_id: str, w: Waiting, agent: Agent,
                 decisions: tuple[Decision, ...]) -> None:
    """`EditRejected` for an edit its tool refuses: the run's own call's tool, or for a
    call a child run waits on, the tool of the child's agent, found down the tree by
    the tools that run each child (`Waiting.children`)."""
    by_id = {p.tool_call_id: p for p in w.pending}
    routes = dict(w.children)
    for d in decisions:
        if not isinstance(d, Edit):
            continue
        p = by_id[d.tool_call_id]
        paths = ["/".join(p.path[:k + 1]) for k in range(len(p.path))]
        if any(q not in routes for q in paths):
            continue  # (a wait an older version published: bound when the run takes it)
        owner = agent
        for q in paths:
            t = next((t for t in owner.tools if t.name == routes[q]), None)
            if not isinstance(t, AgentTool):
                raise EditRejected(
                    f"run {run_id!r}: tool {routes[q]!r} of call {d.tool_call_id!r} runs "
                    "no agent"
                )
            owner = t.agent
        own = d.tool_call_id[len(paths[-1]) + 1:] if paths else d.tool_call_id
        check_edits(owner, ((own, p.tool_name),),
                    (msgspec.structs.replace(d, tool_call_id=own),))


def _claim_and_send(ch: Channel, run_id: str, w: Waiting, body: bytes, digest: str) -> None:
    engine = ch.engine
    ensure_table(engine, CLAIMS)
    on = topic(w.number)
    with engine.begin() as c:
        now = float(c.execute(sa.select(db_now(engine))).scalar_one())
        late = w.deadline is not None and now >= w.deadline
        claimed = c.execute(_insert_absent(
            engine, run_id, on, "expired" if late else "decided", None if late else digest,
            now,
        )).first() is not None
        if claimed and not late:
            ch.send_in(c, run_id, body, on, f"{on}:decision")
            return
        row = _claim_of(c, run_id, on)
    if row is not None and row == ("decided", digest):
        return  # the same decisions again (a caller repeating its call): sent once
    if row is not None and row[0] == "expired":
        raise _too_late(run_id)
    raise RunNotSuspended(f"run {run_id!r} was sent other decisions already")


def _too_late(run_id: str) -> ApprovalExpired:
    return ApprovalExpired(
        f"run {run_id!r}: the decision came too late, its wait for one has ended (its "
        "calls are denied)"
    )


def _claim_of(c: sa.Connection, run_id: str, on: str) -> tuple[str, str | None] | None:
    row = c.execute(
        sa.select(CLAIMS.c.outcome, CLAIMS.c.digest).where(
            CLAIMS.c.run_id == run_id, CLAIMS.c.topic == on)
    ).first()
    return None if row is None else (str(row[0]), row[1])


def _insert_absent(engine: sa.Engine, run_id: str, on: str, outcome: str,
                   digest: str | None, at: float) -> sa.Executable:
    """The claim, unless the suspension has one (then nothing, and no row returned)."""
    values = {"run_id": run_id, "topic": on, "outcome": outcome, "digest": digest, "at": at}
    if engine.dialect.name == "sqlite":
        return (sqlite.insert(CLAIMS).values(**values).on_conflict_do_nothing()
                .returning(CLAIMS.c.run_id))
    return (postgresql.insert(CLAIMS).values(**values).on_conflict_do_nothing()
            .returning(CLAIMS.c.run_id))
