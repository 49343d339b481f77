"""Human approval of tool calls: what a suspended run keeps, and the decisions that resume it.

A `process_tool_call` hook that returns `AskApproval(message)` suspends the run before any
tool of its step runs: the run ends with status "suspended" and `result.suspension`, a
`Suspension` listing each call waiting (`PendingApproval`) and everything the loop needs to
go on (both in `pipeline.values.result`). `resumption(suspension, decisions)` checks the
decisions against it (`check_decisions`) and gives the `Resumption` a run is started with
(`resume=` on the interpreters, or `interpreters.approvals.store.Approvals.resume`, which
also keeps suspensions in a store).

An approval is bound to a digest of the exact call (its id, tool and arguments): a decision
made for other arguments is refused, and a suspension is resumed once (the store hands it
out once), so no retry, replay or second resume runs an approved tool again.

Pure: the digest is a SHA-256 of the call's canonical JSON.
"""

from __future__ import annotations

import hashlib

import msgspec

from pipeline.agent import Agent
from pipeline.tools import Tool
from pipeline.values.messages import JsonObject
from pipeline.values.result import PendingApproval, Suspension

__all__ = [
    "AgentChanged", "ApprovalError", "Approve", "ArgumentsMismatch", "Decision", "Deny",
    "DuplicateDecision", "Edit", "MissingDecision", "PendingApproval", "Resumption",
    "RunNotSuspended", "Suspension", "UnknownCall", "UnknownRun", "approve", "call_digest",
    "agent_digest", "check_decisions", "check_pending", "check_resumption", "deny", "edit",
    "resumption", "typed_states",
]

_encoder = msgspec.json.Encoder(order="sorted")


def call_digest(tool_call_id: str, tool_name: str, args: JsonObject) -> str:
    """The digest an approval is bound to: the call id, the tool and the exact arguments
    (key order does not matter)."""
    body = _encoder.encode((tool_call_id, tool_name, args))
    return hashlib.sha256(body).hexdigest()


# --- errors ----------------------------------------------------------------------------


class ApprovalError(Exception):
    """A resume that cannot be carried out as asked; nothing ran."""


class UnknownRun(ApprovalError):
    """No suspended run of this id is kept."""


class RunNotSuspended(ApprovalError):
    """The run is not waiting for approval (resumed already, or it finished)."""


class UnknownCall(ApprovalError):
    """A decision names a call that is not waiting for approval in this run."""


class DuplicateDecision(ApprovalError):
    """Two decisions for the same call."""


class MissingDecision(ApprovalError):
    """A call waiting for approval got no decision."""


class ArgumentsMismatch(ApprovalError):
    """A decision was made for other arguments than the call waiting (its digest differs),
    or edited arguments the tool's schema refuses."""


class AgentChanged(ApprovalError):
    """The agent resumed is not the one that suspended (tools or processors differ)."""


# --- what a suspended run lists, and the decisions ------------------------------------


class Approve(msgspec.Struct, frozen=True, tag=True):
    """Run the call with the arguments it waited with."""

    tool_call_id: str
    digest: str


class Deny(msgspec.Struct, frozen=True, tag=True):
    """Do not run it; the call's result is an error result with `reason` (the model reads
    it)."""

    tool_call_id: str
    digest: str
    reason: str = ""


class Edit(msgspec.Struct, frozen=True, tag=True):
    """Run it with these arguments instead (checked against the tool's schema)."""

    tool_call_id: str
    digest: str
    args: JsonObject


Decision = Approve | Deny | Edit


def approve(p: PendingApproval) -> Approve:
    """Run the call as it waits."""
    return Approve(p.tool_call_id, p.digest)


def deny(p: PendingApproval, reason: str = "") -> Deny:
    """Answer the call with an error result giving `reason`, without running it."""
    return Deny(p.tool_call_id, p.digest, reason)


def edit(p: PendingApproval, args: JsonObject) -> Edit:
    """Run the call with these arguments instead."""
    return Edit(p.tool_call_id, p.digest, args)


def resumption(s: Suspension, decisions: tuple[Decision, ...] | list[Decision]) -> Resumption:
    """The resumption of `s` with these decisions (`check_decisions` raises when they do
    not fit)."""
    return Resumption(s, check_decisions(s, tuple(decisions)))


class Resumption(msgspec.Struct, frozen=True):
    """A suspended run and its checked decisions (one per pending call, by call id)."""

    suspension: Suspension
    decisions: tuple[Decision, ...]


def check_decisions(s: Suspension, decisions: tuple[Decision, ...]) -> tuple[Decision, ...]:
    """The decisions, checked against the suspension: one per pending call, each for the
    exact arguments it waits with (the digest). Raises an `ApprovalError`."""
    return check_pending(s.run_id, s.pending, decisions)


def check_pending(
    run_id: str, waiting: tuple[PendingApproval, ...], decisions: tuple[Decision, ...]
) -> tuple[Decision, ...]:
    """`check_decisions` against the calls `waiting` in run `run_id` (what a durable run
    publishes of its suspension)."""
    pending = {p.tool_call_id: p for p in waiting}
    seen: set[str] = set()
    for d in decisions:
        if not isinstance(d, Approve | Deny | Edit):
            raise TypeError(f"a decision is Approve, Deny or Edit, got {type(d).__name__}")
        p = pending.get(d.tool_call_id)
        if p is None:
            raise UnknownCall(f"no call {d.tool_call_id!r} waits for approval in run {run_id!r}")
        if d.tool_call_id in seen:
            raise DuplicateDecision(f"two decisions for call {d.tool_call_id!r}")
        seen.add(d.tool_call_id)
        if d.digest != p.digest:
            raise ArgumentsMismatch(
                f"the decision for call {d.tool_call_id!r} was made for other arguments"
            )
        if isinstance(d, Edit) and not isinstance(d.args, dict):
            raise ArgumentsMismatch(f"edited arguments of {d.tool_call_id!r} are not an object")
    missing = sorted(pending.keys() - seen)
    if missing:
        raise MissingDecision(f"no decision for call(s) {', '.join(missing)}")
    return decisions


# --- a resumed run's agent ----------------------------------------------------------


def tools_of(agent: Agent) -> dict[str, Tool]:
    """The tools a resumed run's calls may be of, by name: the agent's, then those its
    processors add to steps (`BaseProcessor.step_tools`) under another name."""
    tools = {t.name: t for t in agent.tools}
    for p in agent.all_processors():
        for t in p.step_tools:
            tools.setdefault(t.name, t)
    return tools


def agent_digest(agent: Agent) -> str:
    """What a suspended run's agent must still be to resume it: its tools (names and
    schemas, its processors' step tools included) and its processors (ids and hooks)."""
    shape = (
        [(t.name, t.spec.parameters) for t in tools_of(agent).values()],
        [(p.id, sorted(p.hook_functions())) for p in agent.all_processors()],
    )
    return hashlib.sha256(msgspec.json.encode(shape, order="sorted")).hexdigest()


def check_resumption(agent: Agent, r: Resumption) -> None:
    """Raise `AgentChanged` when `agent` is not the one that suspended, and
    `ArgumentsMismatch` for edited arguments its tool refuses: before the run starts."""
    s = r.suspension
    if agent_digest(agent) != s.agent_digest:
        raise AgentChanged(
            f"run {s.run_id!r} was suspended by another agent (tools or processors differ)"
        )
    tools = tools_of(agent)
    for d in r.decisions:
        if isinstance(d, Edit):
            name = next(c.call.tool_name for c in s.calls if c.call.tool_call_id == d.tool_call_id)
            try:
                tools[name].bind(d.args)
            except (msgspec.ValidationError, TypeError) as e:
                raise ArgumentsMismatch(
                    f"edited arguments for call {d.tool_call_id!r} ({name}): {e}"
                ) from e


def typed_states(agent: Agent, s: Suspension) -> Suspension:
    """`s` with each processor's state of the type of its initial state (a state read
    back from a store is plain data: a Struct's or dataclass's fields are typed again by
    their annotations). `TypeError` for a state that does not fit its processor."""
    procs = agent.all_processors()
    states: list[object] = []
    changed = False
    for slot, state in enumerate(s.states):
        want = type(procs[slot].initial_state()) if slot < len(procs) else type(None)
        if want is type(None) or isinstance(state, want):
            states.append(state)
            continue
        try:
            states.append(msgspec.convert(state, want))
        except msgspec.ValidationError as e:
            raise TypeError(
                f"the stored state of processor {procs[slot].id!r} of run {s.run_id!r} is "
                f"not a {want.__name__}: {e}"
            ) from None
        changed = True
    return msgspec.structs.replace(s, states=tuple(states)) if changed else s
