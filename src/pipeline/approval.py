"""Human approval of tool calls: what a suspended run keeps, and the decisions that resume it.

A `process_tool_call` hook that returns `AskApproval(message)` suspends the run before any
tool of its step runs: the run ends with status "suspended" and `result.suspension`, a
`Suspension` listing each call waiting (`PendingApproval`) and everything the loop needs to
go on (both in `pipeline.values.result`). `resumption(suspension, decisions)` checks the
decisions against it (`check_decisions`) and gives the `Resumption` a run is started with
(`resume=` on the interpreters; `interpreters.approvals.store.Approvals.decide` also
keeps suspensions in a store and hands each out once).

A suspension is its run's: it keeps the run's thread and resource, which a resume
inherits, and a resume naming others is `OwnerMismatch` (`resumed_context`). It keeps the
tools its step offered (name and schema digest): a resume finds each call's tool again
among the agent's and its processors' declared ones (`resumed_tools`).

An approval is bound to a digest of the exact call (its id, tool and arguments): a decision
made for other arguments is refused, and a suspension is resumed once (the store hands it
out once), so no retry, replay or second resume runs an approved tool again.

Pure: the digest is a SHA-256 of the call's canonical JSON.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from pipeline.agent import Agent, AgentTool
from pipeline.definition import agent_definition
from pipeline.processor import BaseProcessor
from pipeline.tools import Tool
from pipeline.values.context import RunContext
from pipeline.values.messages import JsonObject
from pipeline.values.result import PendingApproval, StepTool, SuspendedRun, Suspension

__all__ = [
    "AgentChanged", "ApprovalAnswer", "ApprovalError", "ApprovalExpired", "Approve",
    "ArgumentsMismatch", "Decision", "Deny", "DuplicateDecision", "Edit", "EditRejected",
    "MissingDecision", "OwnerMismatch", "PendingApproval", "Resumption", "RunNotSuspended",
    "Suspension", "ToolNotFound", "UnknownCall", "UnknownRun", "agent_digest", "answered",
    "approve", "approved_digests", "call_digest", "check_decisions", "check_edits",
    "check_owner", "check_pending", "check_resumption", "deny", "edit", "nested_resumption",
    "offered_tools", "resumed_context",
    "resumed_tools", "resumption", "suspended_run", "tool_digest", "typed_states",
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


class ApprovalExpired(RunNotSuspended):
    """The decision came too late: the run's wait for it had ended (past its deadline,
    the waiting calls are denied)."""


class UnknownCall(ApprovalError):
    """A decision names a call that is not waiting for approval in this run."""


class DuplicateDecision(ApprovalError):
    """Two decisions for the same call."""


class MissingDecision(ApprovalError):
    """A call waiting for approval got no decision."""


class ArgumentsMismatch(ApprovalError):
    """A decision was made for other arguments than the call waiting (its digest differs):
    a stale approval."""


class EditRejected(ApprovalError):
    """Edited arguments do not fit the tool's schema (its binding refuses them)."""


class AgentChanged(ApprovalError):
    """The agent resumed is not the one that suspended (tools or processors differ)."""


class ToolNotFound(ApprovalError):
    """A call of the suspended step needs a tool the resumed agent cannot give: not one of
    its tools, nor one its processors declare (`BaseProcessor.tools`)."""


class OwnerMismatch(ApprovalError):
    """A resume names another thread or resource than the suspended run's."""


# --- what a suspended run lists, and the decisions ------------------------------------


class Approve(msgspec.Struct, frozen=True, tag=True):
    """Run the call with the arguments it waited with."""

    tool_call_id: str
    digest: str
    by: str = ""
    """Who decided: the principal id the app gives (a person's, a reviewer's)."""
    reason: str = ""
    """Why, as the decider said it (kept in the audit record)."""


class Deny(msgspec.Struct, frozen=True, tag=True):
    """Do not run it; the call's result is an error result with `reason` (the model reads
    it)."""

    tool_call_id: str
    digest: str
    reason: str = ""
    by: str = ""
    """Who decided (see `Approve.by`)."""


class Edit(msgspec.Struct, frozen=True, tag=True):
    """Run it with these arguments instead (the same tool: checked against its schema,
    then by its rule and the gates on resume)."""

    tool_call_id: str
    digest: str
    args: JsonObject
    by: str = ""
    """Who decided (see `Approve.by`)."""
    reason: str = ""


Decision = Approve | Deny | Edit


def approve(p: PendingApproval, *, by: str = "", reason: str = "") -> Approve:
    """Run the call as it waits; `by`: who decided, `reason`: why."""
    return Approve(p.tool_call_id, p.digest, by, reason)


def deny(p: PendingApproval, reason: str = "", *, by: str = "") -> Deny:
    """ApprovalAnswer the call with an error result giving `reason`, without running it."""
    return Deny(p.tool_call_id, p.digest, reason, by)


def edit(p: PendingApproval, args: JsonObject, *, by: str = "", reason: str = "") -> Edit:
    """Run the call with these arguments instead."""
    return Edit(p.tool_call_id, p.digest, args, by, reason)


class ApprovalAnswer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A person's answer to one waiting call as a page sends it (the AI SDK's
    `addToolApprovalResponse`: `{id, approved, reason}`; `args` to run the call with
    other arguments, an edit): `id` is the call's `approval_id` (its digest)."""

    id: str
    approved: bool
    reason: str | None = None
    args: JsonObject | None = None


def answered(
    pending: tuple[PendingApproval, ...], answers: Sequence[ApprovalAnswer], *, by: str = ""
) -> tuple[Decision, ...]:
    """The decisions `answers` give for the calls `pending` (each found by its digest),
    made by `by`. `UnknownCall` for an answer no call waits for; `ArgumentsMismatch` for
    arguments with a denial."""
    waiting = {p.digest: p for p in pending}
    out: list[Decision] = []
    for a in answers:
        p = waiting.get(a.id)
        if p is None:
            raise UnknownCall(f"no call waits for approval {a.id!r}")
        reason = a.reason or ""
        if a.args is not None and not a.approved:
            raise ArgumentsMismatch(f"edited arguments for approval {a.id!r}, denied")
        if a.args is not None:
            out.append(edit(p, a.args, by=by, reason=reason))
        elif a.approved:
            out.append(approve(p, by=by, reason=reason))
        else:
            out.append(deny(p, reason or "denied", by=by))
    return tuple(out)


def resumption(
    s: Suspension,
    decisions: tuple[Decision, ...] | list[Decision],
    *,
    skip_gates_on_resume: bool = False,
) -> Resumption:
    """The resumption of `s` with these decisions (`check_decisions` raises when they do
    not fit); see `Resumption.skip_gates_on_resume`."""
    return Resumption(s, check_decisions(s, tuple(decisions)),
                      skip_gates_on_resume=skip_gates_on_resume)


class Resumption(msgspec.Struct, frozen=True):
    """A suspended run and its checked decisions (one per pending call, by call id)."""

    suspension: Suspension
    decisions: tuple[Decision, ...]
    skip_gates_on_resume: bool = False
    """False (the default): the resumed step's calls go through the gates again (the
    agent's `process_tool_call` hooks and the tools' `needs_approval` rules, as they are
    now); a decided call's approval answers their asks for exactly that call, and a call
    they now refuse is not run, its result saying why. True: the gates' decisions from
    before the suspension stand, and they are not asked again."""


def approved_digests(r: Resumption) -> dict[str, str]:
    """Each call a person let run, by call id: the digest of the arguments it runs with
    (an approval's, or an edit's own), with the calls decided on an earlier resume of
    the same step (`GatedCall.approved`)."""
    s = r.suspension
    out = {g.call.tool_call_id: g.approved for g in s.calls if g.approved is not None}
    names = {g.call.tool_call_id: g.call.tool_name for g in s.calls}
    for d in r.decisions:
        if isinstance(d, Approve):
            out[d.tool_call_id] = d.digest
        elif isinstance(d, Edit):
            name = names.get(d.tool_call_id)
            if name is not None:
                out[d.tool_call_id] = call_digest(d.tool_call_id, name, d.args)
    return out


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


# --- whose run it is -------------------------------------------------------------------


def suspended_run(s: Suspension) -> SuspendedRun:
    """What `s` waits for and whose it is, as an approval desk lists it."""
    return SuspendedRun(run_id=s.run_id, thread_id=s.thread_id, resource_id=s.resource_id,
                        pending=s.pending)


def check_owner(
    s: Suspension | SuspendedRun, thread_id: str | None, resource_id: str | None
) -> None:
    """Raise `OwnerMismatch` when a resume names another thread or resource than the
    suspended run's (None names none: the suspension's is inherited)."""
    for what, given, own in (("thread", thread_id, s.thread_id),
                             ("resource", resource_id, s.resource_id)):
        if given is not None and given != own:
            raise OwnerMismatch(
                f"run {s.run_id!r} was suspended in {what} {own!r}, not {given!r}: "
                f"it resumes in its own {what} only"
            )


def resumed_context(ctx: RunContext, s: Suspension) -> RunContext:
    """The context a resumed run goes on with: `ctx` in the suspended run's thread and
    resource (`OwnerMismatch` when `ctx` names others)."""
    check_owner(s, ctx.thread_id, ctx.resource_id)
    if ctx.thread_id == s.thread_id and ctx.resource_id == s.resource_id:
        return ctx
    return msgspec.structs.replace(ctx, thread_id=s.thread_id, resource_id=s.resource_id)


# --- a resumed run's agent ----------------------------------------------------------


def agent_digest(agent: Agent) -> str:
    """What a suspended run's agent must still be to resume it: its tools (names and
    schemas) and its processors (stage, class, id, hooks and settings, as
    `pipeline.definition.agent_definition` gives them: a guard weakened from "block" to
    "detect" is another agent)."""
    d = agent_definition(agent)
    shape = (
        [(t.name, t.schema) for t in d.tools],
        [(p.stage, p.cls, p.id, p.hooks, p.settings) for p in d.processors],
    )
    return hashlib.sha256(msgspec.json.encode(shape, order="sorted")).hexdigest()


def tool_digest(t: Tool) -> str:
    """What a suspended step keeps of a tool it offered (`StepTool.digest`): its name and
    parameters' schema."""
    return hashlib.sha256(_encoder.encode((t.name, t.spec.parameters))).hexdigest()


def offered_tools(tools: tuple[Tool, ...]) -> tuple[StepTool, ...]:
    """The step's tools as a suspension keeps them."""
    return tuple(StepTool(t.name, tool_digest(t)) for t in tools)


def resumed_tools(agent: Agent, r: Resumption) -> dict[str, Tool]:
    """The tools the suspended step's calls run with, by name: each call that runs (the
    gates let it, or the person approved or edited it) finds the tool the step offered
    among `agent`'s tools and its processors' declared ones (`BaseProcessor.tools`).
    `ToolNotFound` for a tool neither has; `AgentChanged` for one whose schema changed."""
    s = r.suspension
    offered = {t.name: t.digest for t in s.tools}
    denied = {d.tool_call_id for d in r.decisions if isinstance(d, Deny)}
    found: dict[str, Tool] = {}
    candidates: tuple[Tool, ...] | None = None
    for g in s.calls:
        name = g.call.tool_name
        if g.kind == "answered" or g.call.tool_call_id in denied or name in found:
            continue
        if candidates is None:
            declared = (t for p in agent.all_processors() for t in p.tools)
            candidates = (*agent.tools, *declared)
        named = [t for t in candidates if t.name == name]
        want = offered.get(name)  # (None: a suspension that kept no step tools)
        match = next((t for t in named if want is None or tool_digest(t) == want), None)
        if match is None:
            if named:
                raise AgentChanged(
                    f"tool {name!r} of run {s.run_id!r} changed since the run suspended "
                    "(its parameters differ)"
                )
            raise ToolNotFound(
                f"run {s.run_id!r} calls tool {name!r}, which is neither the agent's nor "
                "one its processors declare (a processor that adds a tool to a step "
                "lists it in its `tools`)"
            )
        found[name] = match
    return found


def check_resumption(agent: Agent, r: Resumption) -> None:
    """Raise `AgentChanged` when `agent` is not the one that suspended, `ToolNotFound`
    when a call that runs has no tool in it, and `EditRejected` for edited arguments its
    tool refuses: before the run starts. A child run waiting under a call is checked the
    same way against its own agent."""
    s = r.suspension
    if agent_digest(agent) != s.agent_digest:
        # (a processor's settings include the tools it declares: one of the step's whose
        # schema changed is named)
        with contextlib.suppress(ToolNotFound):
            resumed_tools(agent, r)
        raise AgentChanged(
            f"run {s.run_id!r} was suspended by another agent (tools or processors differ)"
        )
    tools = resumed_tools(agent, r)
    for g in s.calls:
        if g.kind == "child" and g.child is not None:
            # A child run waiting under this call: its own agent checked the same way,
            # with the decisions for its calls (`pipeline.agents.nested`).
            from_tree = tools.get(g.call.tool_name)
            if not isinstance(from_tree, AgentTool):
                raise AgentChanged(
                    f"tool {g.call.tool_name!r} of run {s.run_id!r} no longer runs an agent"
                )
            check_resumption(
                from_tree.agent, nested_resumption(g.call.tool_call_id, g.child, r.decisions)
            )
    named = {c.call.tool_call_id: c.call.tool_name for c in s.calls}
    for d in r.decisions:
        if isinstance(d, Edit) and "/" not in d.tool_call_id:
            name = named.get(d.tool_call_id, "")
            _bind(tools.get(name), name, d)


def check_edits(agent: Agent, calls: Iterable[tuple[str, str]],
                decisions: Iterable[Decision]) -> None:
    """Raise `EditRejected` for an edit whose arguments its tool refuses (its binding:
    the schema, the types, the validators): `agent`'s tool of that name, or one its
    processors declare; `calls` gives each call's tool by call id. An edit of a call a
    child run waits on (its id "call/...") is bound to the child's agent's tool by
    `check_resumption`, which follows the tree."""
    declared = (t for p in agent.all_processors() for t in p.tools)
    tools = {t.name: t for t in (*declared, *agent.tools)}  # (the agent's own wins)
    named = dict(calls)
    for d in decisions:
        if isinstance(d, Edit) and "/" not in d.tool_call_id:
            name = named.get(d.tool_call_id, "")
            _bind(tools.get(name), name, d)


def _bind(t: Tool | None, name: str, d: Edit) -> None:
    if t is None:
        raise EditRejected(
            f"edited arguments for call {d.tool_call_id!r}: the agent has no tool {name!r}"
        )
    try:
        t.bind(d.args)
    except (msgspec.ValidationError, TypeError, ValueError) as e:
        raise EditRejected(f"edited arguments for call {d.tool_call_id!r} ({name}): {e}") from e


def nested_resumption(
    call_id: str, child: Suspension, decisions: tuple[Decision, ...]
) -> Resumption:
    """The child's resumption from a parent's decisions that name calls under its call
    `call_id` (ids "call_id/..."; checked against the parent's pending list already):
    each keyed by the child's own id and digest (`pipeline.agents.nested`)."""
    own = {p.tool_call_id: p for p in child.pending}
    mine: list[Decision] = []
    for d in decisions:
        head, sep, rest = d.tool_call_id.partition("/")
        if not sep or head != call_id:
            continue
        p = own.get(rest)
        if p is None:
            raise UnknownCall(f"no call {d.tool_call_id!r} waits in child run {child.run_id!r}")
        mine.append(msgspec.structs.replace(d, tool_call_id=p.tool_call_id, digest=p.digest))
    return Resumption(child, tuple(mine))


def typed_states(agent: Agent, s: Suspension) -> Suspension:
    """`s` with each processor's state of the type of its initial state (a state read
    back from a store is plain data: a Struct's or dataclass's fields are typed again by
    their annotations), its states before the gates too; a child run waiting under one
    of its calls, by its own agent's processors (found by the call's tool). `TypeError`
    for a state that does not fit its processor."""
    calls = s.calls
    if any(g.child is not None for g in calls):
        tools = {t.name: t for t in (*agent.tools, *(
            t for p in agent.all_processors() for t in p.tools))}
        nested = list(calls)
        for i, g in enumerate(calls):
            tool = tools.get(g.call.tool_name)
            if g.child is not None and isinstance(tool, AgentTool):
                nested[i] = msgspec.structs.replace(g, child=typed_states(tool.agent, g.child))
        s = msgspec.structs.replace(s, calls=tuple(nested))
    procs = agent.all_processors()
    states, changed = _typed(procs, s.run_id, s.states)
    gated, gated_changed = (
        _typed(procs, s.run_id, s.gate_states) if s.gate_states is not None else (None, False)
    )
    if not changed and not gated_changed:
        return s
    return msgspec.structs.replace(s, states=tuple(states), gate_states=gated)


def _typed(
    procs: tuple[BaseProcessor[Any], ...], run_id: str, given: tuple[object, ...]
) -> tuple[tuple[object, ...], bool]:
    states: list[object] = []
    changed = False
    for slot, state in enumerate(given):
        want = type(procs[slot].initial_state()) if slot < len(procs) else type(None)
        if want is type(None) or isinstance(state, want):
            states.append(state)
            continue
        try:
            states.append(msgspec.convert(state, want))
        except msgspec.ValidationError as e:
            raise TypeError(
                f"the stored state of processor {procs[slot].id!r} of run {run_id!r} is "
                f"not a {want.__name__}: {e}"
            ) from None
        changed = True
    return tuple(states), changed
