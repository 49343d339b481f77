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

import itertools
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, Protocol, TypeVar

import msgspec

from interpreters.approvals.audit import (
    AuditRecord,
    Waits,
    decision_record,
    jsonl,
    review_records,
    waiting_records,
)
from interpreters.approvals.policy import (
    ApprovalPolicy,
    DeciderNotAllowed,
    SecondApprovalNeeded,
    check_deciders,
)
from pipeline.agent import Agent
from pipeline.approval import (
    ApprovalExpired,
    Decision,
    Deny,
    Resumption,
    RunNotSuspended,
    UnknownRun,
    check_owner,
    check_resumption,
    resumption,
    suspended_run,
    typed_states,
)
from pipeline.values.result import RunResult, SuspendedRun, Suspension

Output = TypeVar("Output")


DEFAULT_LISTED = 100
"""How many waiting runs a listing gives by default."""
MAX_LISTED = 1000
"""How many waiting runs one listing gives at most."""


class ApprovalStore(Protocol):
    """Where suspended runs wait for their decisions, and the audit trail of them
    (`interpreters.approvals.audit`: appended, never changed)."""

    def save(self, suspension: Suspension, audit: Sequence[AuditRecord] = ()) -> None:
        """Keep `suspension` (a run suspended again replaces what was taken), and append
        `audit` with it (one transaction)."""
        ...

    def take(
        self,
        run_id: str,
        audit: Sequence[AuditRecord] = (),
        expected: Suspension | None = None,
    ) -> Suspension:
        """The suspension of `run_id`, handed out once, `audit` appended with the take
        (one transaction): `UnknownRun` if none was kept, `RunNotSuspended` if it was
        taken already, or is not `expected` (when given: it was resumed and suspended
        again since it was read; then nothing is taken or appended)."""
        ...

    def append_audit(self, audit: Sequence[AuditRecord]) -> None:
        """Append records that go with no save or take (a refused decision, a first of
        two approvals)."""
        ...

    def audit(
        self,
        *,
        run_id: str | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        after: int = 0,
        limit: int = DEFAULT_LISTED,
    ) -> tuple[AuditRecord, ...]:
        """The records of run `run_id`, thread `thread_id`, resource `resource_id` (each
        None: any) appended after record `after` (its `seq`), the first `limit` in the
        order they were appended."""
        ...

    def get(self, run_id: str) -> Suspension | None:
        """The suspension waiting for `run_id`, if any (not taken)."""
        ...

    def suspended(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        limit: int = DEFAULT_LISTED,
    ) -> tuple[Suspension, ...]:
        """The suspensions waiting (not taken) in thread `thread_id` and for resource
        `resource_id` (None: any), the first `limit` in the order they were saved."""
        ...


def check_listing(thread_id: object, resource_id: object, limit: object) -> int:
    """The arguments of a listing, checked: `TypeError` or `ValueError`."""
    for name, value in (("thread_id", thread_id), ("resource_id", resource_id)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} is a str or None, not {value!r}")
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit is an int, not {limit!r}")
    if not 1 <= limit <= MAX_LISTED:
        raise ValueError(f"limit is from 1 to {MAX_LISTED}, not {limit}")
    return limit


def check_after(run_id: object, after: object) -> int:
    """The run id and the `after` of an audit listing, checked."""
    if run_id is not None:
        check_run_id(run_id)
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise ValueError(f"after is a record's seq (an int from 0), not {after!r}")
    return after


def check_records(audit: Sequence[AuditRecord]) -> tuple[AuditRecord, ...]:
    """`audit` as records to append, checked."""
    records = tuple(audit)
    for r in records:
        if not isinstance(r, AuditRecord):
            raise TypeError(f"an audit trail holds AuditRecords, not {type(r).__name__}")
    return records


def check_run_id(run_id: object) -> str:
    """`run_id`, checked: a non-empty str, else `TypeError`."""
    if not isinstance(run_id, str) or not run_id:
        raise TypeError(f"a run id is a non-empty str, not {run_id!r}")
    return run_id


class _Owned(Protocol):
    @property
    def thread_id(self) -> str | None: ...
    @property
    def resource_id(self) -> str | None: ...


def owned_by(s: _Owned, thread_id: str | None, resource_id: str | None) -> bool:
    """Whether `s` (a suspension, a waiting run, an audit record) is in thread
    `thread_id` and for resource `resource_id` (None: any)."""
    return (thread_id is None or s.thread_id == thread_id) and (
        resource_id is None or s.resource_id == resource_id
    )


class CheckedApprovalStore(ABC):
    """An `ApprovalStore` whose arguments are checked once, here, for every kind of
    store (`TypeError`, `ValueError`: nothing read or written); a subclass keeps and
    reads what passed (`_save`, `_take`, `_append`, `_audit`, `_get`, `_suspended`)."""

    def save(self, suspension: Suspension, audit: Sequence[AuditRecord] = ()) -> None:
        if not isinstance(suspension, Suspension):
            raise TypeError(
                f"an approval store keeps a Suspension, not {type(suspension).__name__}"
            )
        self._save(suspension, check_records(audit))

    def take(
        self,
        run_id: str,
        audit: Sequence[AuditRecord] = (),
        expected: Suspension | None = None,
    ) -> Suspension:
        return self._take(check_run_id(run_id), check_records(audit), expected)

    def append_audit(self, audit: Sequence[AuditRecord]) -> None:
        self._append(check_records(audit))

    def audit(
        self,
        *,
        run_id: str | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        after: int = 0,
        limit: int = DEFAULT_LISTED,
    ) -> tuple[AuditRecord, ...]:
        limit = check_listing(thread_id, resource_id, limit)
        after = check_after(run_id, after)
        return self._audit(run_id, thread_id, resource_id, after, limit)

    def get(self, run_id: str) -> Suspension | None:
        return self._get(check_run_id(run_id))

    def suspended(
        self,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        limit: int = DEFAULT_LISTED,
    ) -> tuple[Suspension, ...]:
        return self._suspended(thread_id, resource_id,
                               check_listing(thread_id, resource_id, limit))

    @abstractmethod
    def _save(self, s: Suspension, records: tuple[AuditRecord, ...]) -> None: ...

    @abstractmethod
    def _take(
        self, run_id: str, records: tuple[AuditRecord, ...], expected: Suspension | None
    ) -> Suspension: ...

    @abstractmethod
    def _append(self, records: tuple[AuditRecord, ...]) -> None: ...

    @abstractmethod
    def _audit(
        self, run_id: str | None, thread_id: str | None, resource_id: str | None,
        after: int, limit: int,
    ) -> tuple[AuditRecord, ...]: ...

    @abstractmethod
    def _get(self, run_id: str) -> Suspension | None: ...

    @abstractmethod
    def _suspended(
        self, thread_id: str | None, resource_id: str | None, limit: int
    ) -> tuple[Suspension, ...]: ...


class MemoryApprovalStore(CheckedApprovalStore):
    """An in-process `ApprovalStore` (thread-safe; lost with the process)."""

    def __init__(self) -> None:
        self._waiting: dict[str, Suspension] = {}
        self._taken: set[str] = set()
        self._trail: list[AuditRecord] = []
        self._lock = threading.Lock()

    def _save(self, s: Suspension, records: tuple[AuditRecord, ...]) -> None:
        with self._lock:
            self._waiting.pop(s.run_id, None)  # (saved again: the latest)
            self._waiting[s.run_id] = s
            self._taken.discard(s.run_id)
            self._keep(records)

    def _take(
        self, run_id: str, records: tuple[AuditRecord, ...], expected: Suspension | None
    ) -> Suspension:
        with self._lock:
            s = self._waiting.get(run_id)
            if s is not None:
                if expected is not None and s != expected:
                    raise RunNotSuspended(
                        f"run {run_id!r} was resumed (and suspended again) meanwhile"
                    )
                del self._waiting[run_id]
                self._taken.add(run_id)
                self._keep(records)
                return s
            if run_id in self._taken:
                raise RunNotSuspended(f"run {run_id!r} was resumed already")
            raise UnknownRun(f"no suspended run {run_id!r}")

    def _append(self, records: tuple[AuditRecord, ...]) -> None:
        with self._lock:
            self._keep(records)

    def _keep(self, records: tuple[AuditRecord, ...]) -> None:
        for r in records:
            self._trail.append(msgspec.structs.replace(r, seq=len(self._trail) + 1))

    def _audit(
        self, run_id: str | None, thread_id: str | None, resource_id: str | None,
        after: int, limit: int,
    ) -> tuple[AuditRecord, ...]:
        with self._lock:
            found = (
                r for r in self._trail[after:]
                if (run_id is None or r.run_id == run_id) and owned_by(r, thread_id, resource_id)
            )
            return tuple(itertools.islice(found, limit))

    def _get(self, run_id: str) -> Suspension | None:
        with self._lock:
            return self._waiting.get(run_id)

    def _suspended(
        self, thread_id: str | None, resource_id: str | None, limit: int
    ) -> tuple[Suspension, ...]:
        with self._lock:
            found = (s for s in self._waiting.values() if owned_by(s, thread_id, resource_id))
            return tuple(itertools.islice(found, limit))

    def close(self) -> None:
        """Nothing to close (like the SQL stores' `close`)."""


Found = TypeVar("Found", Suspension, SuspendedRun)


class ApprovalDeskBase(ABC, Generic[Found]):
    """What both approval desks (`interpreters.approvals.desk.ApprovalDesk`) do alike:
    list the runs waiting, read the audit trail, hold decisions to the policy. A desk
    finds its waiting runs (`Found`: suspensions, or runs read from elsewhere) and says
    which of them are listed (`_listed`); `_trail` is where its audit records are."""

    policy: ApprovalPolicy | None

    @property
    @abstractmethod
    def _trail(self) -> ApprovalStore | None: ...

    @abstractmethod
    def _waiting_run(self, run_id: str) -> Found | None: ...

    @abstractmethod
    def _waiting_runs(
        self, thread_id: str | None, resource_id: str | None, limit: int
    ) -> tuple[Found, ...]: ...

    @abstractmethod
    def _listed(self, found: tuple[Found, ...]) -> tuple[SuspendedRun, ...]: ...

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
        suspended (see `ApprovalDesk.suspended`)."""
        limit = check_listing(thread_id, resource_id, limit)
        if run_id is None:
            return self._listed(self._waiting_runs(thread_id, resource_id, limit))
        found = self._waiting_run(check_run_id(run_id))
        if found is None or not owned_by(found, thread_id, resource_id):
            return ()
        return self._listed((found,))

    def audit(
        self,
        *,
        run_id: str | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        after: int = 0,
        limit: int = DEFAULT_LISTED,
    ) -> tuple[AuditRecord, ...]:
        """The audit records (`interpreters.approvals.audit`) of run `run_id`, thread
        `thread_id`, resource `resource_id` (each None: any), after record `after`, the
        first `limit` in the order they were appended; () where none are kept."""
        trail = self._trail
        if trail is None:
            return ()
        return trail.audit(run_id=run_id, thread_id=thread_id, resource_id=resource_id,
                           after=after, limit=limit)

    def _check_policy(self, run: Waits, decisions: Sequence[Decision], now: float) -> None:
        """`decisions` held to the policy's rules on deciders before anything is taken or
        sent: `DeciderNotAllowed`, `SecondApprovalNeeded` (the run still waits), each
        refusal and first approval recorded in the trail."""
        if self.policy is None:
            return
        trail = self._trail
        earlier = trail.audit(run_id=run.run_id, limit=MAX_LISTED) if trail is not None else ()
        refused, first = check_deciders(self.policy, run, decisions, earlier)
        if refused:
            if trail is not None:
                trail.append_audit([decision_record(run, p, d, now, "refused", why)
                                    for p, d, why in refused])
            raise DeciderNotAllowed("; ".join(why for _, _, why in refused))
        if first:
            if trail is None:
                raise TypeError("two people above a bound need DurableApprovals(..., "
                                "trail=store): it remembers the first approval")
            trail.append_audit([decision_record(run, p, d, now, "first approval")
                                for p, d in first])
            raise SecondApprovalNeeded(
                "a second person's approval is needed for call(s) "
                + ", ".join(p.tool_call_id for p, _ in first)
                + ": the first is recorded, the run still waits"
            )


EXPIRED = "the approval expired: no decision came in time"
"""The reason an expired call is denied with."""


class Approvals(ApprovalDeskBase[Suspension]):
    """Keeps the suspended runs of `store` and hands each out once, with its decisions:
    the `ApprovalDesk` of in-process runs (`interpreters.approvals.desk`). `agent`: the
    agent its runs are resumed on, which `decide` checks them against (`take` is given
    it instead).

    `policy`: the rules on who decides and how long a call waits
    (`interpreters.approvals.policy`); None: anyone, until decided. `clock`: the time
    (seconds since the epoch) records and expiries are read on. `skip_gates_on_resume`:
    what the resumptions it gives say (`pipeline.approval.Resumption`): by default a
    resumed step's calls go through the gates again. Every suspension it keeps and every
    decision it is given leaves an audit record in the store (`audit`)."""

    def __init__(
        self,
        store: ApprovalStore,
        agent: Agent | None = None,
        *,
        policy: ApprovalPolicy | None = None,
        clock: Callable[[], float] = time.time,
        skip_gates_on_resume: bool = False,
    ) -> None:
        if policy is not None and not isinstance(policy, ApprovalPolicy):
            raise TypeError(f"policy is an ApprovalPolicy, not {type(policy).__name__}")
        self.store = store
        self.agent = agent
        self.policy = policy
        self.clock = clock
        self.skip_gates_on_resume = skip_gates_on_resume

    def keep(self, result: RunResult[Output]) -> RunResult[Output]:
        """`result`, its suspension kept in the store when it is suspended (a "waiting"
        record for each call, with when its wait ends); the approval reviewer's verdicts
        in it recorded (keep every result of an agent with an `ApprovalReviewer`)."""
        s = result.suspension
        reviewed = review_records(result, self.clock) if result.reviews else ()
        if result.status == "suspended" and s is not None:
            now = self.clock()
            ends = self.policy.expires_at(s, now) if self.policy is not None else None
            if ends != s.expires_at:
                s = msgspec.structs.replace(s, expires_at=ends)
            self.store.save(s, (*reviewed, *waiting_records(s, now, ends)))
        elif reviewed:
            self.store.append_audit(reviewed)
        return result

    def waiting(self, run_id: str) -> Suspension:
        """What `run_id` waits for (`UnknownRun` if nothing waits, `RunNotSuspended` if
        it was resumed already, `ApprovalExpired` if its wait ended: then it is denied,
        never run, and recorded "expired")."""
        s = self.store.get(run_id)
        if s is None:
            # Why nothing waits: only a take says (unknown, or taken already). A run
            # saved meanwhile is taken by it, so it is put back: reading takes nothing.
            try:
                found = self.store.take(run_id)
            except RunNotSuspended:
                trail = self.store.audit(run_id=run_id, limit=MAX_LISTED)
                if trail and trail[-1].outcome == "expired":
                    raise ApprovalExpired(
                        f"run {run_id!r} waited past its deadline: its calls were denied"
                    ) from None
                raise
            self.store.save(found)
            return found
        if self._expired(s):
            self._expire(s)
            raise ApprovalExpired(f"run {run_id!r} waited past its deadline: its calls are "
                                  "denied")
        return s

    def _expired(self, s: Suspension) -> bool:
        return s.expires_at is not None and self.clock() >= s.expires_at

    def _expire(self, s: Suspension) -> Resumption | None:
        """Take `s` as expired: its calls denied and recorded "expired" (None: it was
        taken meanwhile)."""
        now = self.clock()
        denials = tuple(Deny(p.tool_call_id, p.digest, EXPIRED) for p in s.pending)
        records = [decision_record(s, p, d, now, "expired")
                   for p, d in zip(s.pending, denials, strict=True)]
        try:
            taken = self.store.take(s.run_id, records, expected=s)
        except (RunNotSuspended, UnknownRun):
            return None
        return Resumption(taken, denials, skip_gates_on_resume=self.skip_gates_on_resume)

    def expire_due(self, limit: int = MAX_LISTED) -> tuple[Resumption, ...]:
        """Every run (of the first `limit` waiting) whose wait ended: taken, its calls
        denied and recorded "expired". Each one's `Resumption` (its calls denied) for
        the app to run, if the model is to answer the person; never one that runs a
        call. (A typed-states resumption needs the agent: `typed_states`.)"""
        found = self.store.suspended(limit=check_listing(None, None, limit))
        out: list[Resumption] = []
        for s in found:
            if self._expired(s):
                r = self._expire(s)
                if r is not None:
                    out.append(r if self.agent is None else Resumption(
                        typed_states(self.agent, r.suspension), r.decisions,
                        skip_gates_on_resume=r.skip_gates_on_resume))
        return tuple(out)

    @property
    def _trail(self) -> ApprovalStore:
        return self.store

    def _waiting_run(self, run_id: str) -> Suspension | None:
        return self.store.get(run_id)

    def _waiting_runs(
        self, thread_id: str | None, resource_id: str | None, limit: int
    ) -> tuple[Suspension, ...]:
        return self.store.suspended(thread_id=thread_id, resource_id=resource_id, limit=limit)

    def _listed(self, found: tuple[Suspension, ...]) -> tuple[SuspendedRun, ...]:
        """A run whose wait ended is not listed: it is taken as expired here (`audit`
        lists it so)."""
        listed: list[SuspendedRun] = []
        for s in found:
            if self._expired(s):
                self._expire(s)
            else:
                listed.append(suspended_run(s))
        return tuple(listed)

    def export_audit(
        self,
        *,
        run_id: str | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        after: int = 0,
    ) -> Iterator[bytes]:
        """Every audit record so chosen (see `audit`), one JSON line each, read from the
        store a page at a time."""
        while True:
            page = self.audit(run_id=run_id, thread_id=thread_id, resource_id=resource_id,
                              after=after, limit=MAX_LISTED)
            yield from jsonl(page)
            if len(page) < MAX_LISTED:
                return
            after = page[-1].seq

    def decide(
        self,
        run_id: str,
        decisions: Sequence[Decision],
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> Resumption:
        """`take` on this Approvals' agent: the resumption of `run_id` with `decisions`,
        everything checked before the run is taken (see `ApprovalDesk.decide`); run it
        with `interp.run(agent, (), resume=...)`."""
        if self.agent is None:
            raise TypeError(
                "Approvals.decide checks the run against its agent before taking it: "
                "make it Approvals(store, agent), or call take(agent, ...)"
            )
        return self.take(self.agent, run_id, decisions, thread_id=thread_id,
                         resource_id=resource_id)

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
        given, must be the run's, else `OwnerMismatch`; the policy's rules on deciders:
        `DeciderNotAllowed`, `SecondApprovalNeeded`, each recorded), so a refused resume
        leaves it waiting; once taken it is never handed out again. The decisions are
        recorded with the take."""
        waiting = self.waiting(run_id)
        check_owner(waiting, thread_id, resource_id)
        r = resumption(waiting, list(decisions),
                       skip_gates_on_resume=self.skip_gates_on_resume)
        check_resumption(agent, r)
        typed = typed_states(agent, waiting)
        now = self.clock()
        pending = {p.tool_call_id: p for p in waiting.pending}
        self._check_policy(waiting, r.decisions, now)
        records = [decision_record(waiting, pending[d.tool_call_id], d, now)
                   for d in r.decisions]
        self.store.take(run_id, records, expected=waiting)
        return Resumption(typed, r.decisions, skip_gates_on_resume=r.skip_gates_on_resume)
