"""For any sequence of rule changes, decisions by allowed and disallowed principals,
edits, expiries, crashes and resumes: every call that runs had a valid decision by a
principal the policy allowed when it was made, under the gates in force when the run
resumed, and runs exactly once, with the arguments decided; every decision has exactly
one audit record.

On the simulator: a scripted model makes one refund call per run (its amount drawn); the
tool needs approval; a gate refuses refunds while the shop's "blocked" flag is set (it
changes while runs wait); the desk's policy (allowed principals, two people above a
bound, never the run's user, an expiry) changes too; decisions come from drawn
principals; a taken resumption is run, or dropped (a crash: its call never runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from effects import Continue, SkipCall
from interpreters.approvals.policy import (
    ApprovalPolicy,
    DeciderNotAllowed,
    SecondApprovalNeeded,
    ToolApprovalRule,
)
from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline import ModelRequest
from pipeline.agent import Agent
from pipeline.approval import (
    ApprovalExpired,
    Decision,
    Resumption,
    RunNotSuspended,
    UnknownRun,
    approve,
    call_digest,
    deny,
    edit,
)
from pipeline.processor import ToolCallArgs, ToolCallResult, processor
from pipeline.tools import tool
from pipeline.tools.context import ToolContext
from tests.helpers import unpaired_tool_calls

USER = "cust"
PEOPLE = ("ann", "bob", "ann", "bob", "cy", USER, "")
"""Who decides (drawn): mostly people a policy may allow, sometimes the run's own user
or no one."""
BOUND = 500


@dataclass
class World:
    """What the shop's rules are now, and what happened."""

    blocked: bool = False
    now: float = 0.0
    ran: list[tuple[tuple[str, str], int]] = field(default_factory=list)
    """((run id, call id), amount) of each refund that ran."""
    decisions: int = 0
    """Decisions that reached the policy (accepted, refused, first of two)."""


def _agent(w: World) -> Agent:
    def refund(ctx: ToolContext[None], order: str, amount: int) -> str:
        """Refund an order."""
        w.ran.append(((ctx.run.run_id, ctx.tool_call_id), amount))
        return f"refunded {amount}"

    def shop(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        if w.blocked:
            return SkipCall("not run: refunds are blocked", True)
        return Continue()

    return Agent.create("sim/model", tools=[tool(refund, needs_approval=True)],
                        input_processors=[processor("shop", process_tool_call=shop)])


def _script(amount: int) -> ScriptedModel:
    def answer(request: ModelRequest) -> Say:
        if any(m.role == "tool" for m in request.messages):
            return Say("done")
        return Say(calls=[call("refund", order="A1", amount=amount)])

    return ScriptedModel(answer)


def _policy(allowed: frozenset[str], expires: float | None) -> ApprovalPolicy:
    return ApprovalPolicy(
        tools={"refund": ToolApprovalRule(principals=allowed,
                                          two_person_above=("amount", BOUND))},
        not_the_runs_user=True, expires_after=expires)


ops = st.lists(st.one_of(
    st.tuples(st.just("decide"), st.sampled_from(PEOPLE),
              st.sampled_from(("approve", "approve", "deny", "edit")),
              st.sampled_from((50, 400, 900))),
    st.tuples(st.just("decide"), st.sampled_from(PEOPLE), st.just("approve"), st.just(0)),
    st.tuples(st.just("allow"), st.frozensets(st.sampled_from(("ann", "bob", "cy", USER)),
                                              min_size=1)),
    st.tuples(st.just("block"), st.booleans()),
    st.tuples(st.just("tick"), st.sampled_from((1.0, 30.0, 90.0))),
    st.just(("resume",)),
    st.just(("crash",)),
    st.just(("new run",)),
), min_size=1, max_size=14)


@given(amounts=st.lists(st.sampled_from((50, 400, 900)), min_size=1, max_size=3),
       steps=ops, expires=st.sampled_from((None, 60.0)),
       allowed=st.frozensets(st.sampled_from(("ann", "bob", "cy", USER)), min_size=2))
def test_every_call_that_runs_had_a_valid_decision_under_the_policy_at_resume(
    amounts: list[int], steps: list[tuple[object, ...]], expires: float | None,
    allowed: frozenset[str],
) -> None:
    w = World()
    agent = _agent(w)
    approvals = Approvals(MemoryApprovalStore(), agent, policy=_policy(allowed, expires),
                          clock=lambda: w.now)
    pending_amounts = list(amounts)
    held: list[tuple[Resumption, Simulator]] = []
    sims: dict[str, Simulator] = {}
    accepted: dict[tuple[str, str], list[tuple[str, int]]] = {}  # (by, amount) accepted

    def start() -> None:
        if not pending_amounts:
            return
        sim = Simulator(_script(pending_amounts.pop(0)))
        r = approvals.keep(sim.run(agent, "refund", resource_id=USER).result)
        if w.blocked:  # the gate refused it before anyone was asked
            assert r.status == "finished" and r.suspension is None
            return
        assert r.status == "suspended" and r.suspension is not None
        sims[r.suspension.run_id] = sim

    start()
    for op in steps:
        kind = op[0]
        if kind == "new run":
            start()
        elif kind == "allow":
            allowed = op[1]  # type: ignore[assignment]
            approvals.policy = _policy(allowed, expires)
        elif kind == "block":
            w.blocked = bool(op[1])
        elif kind == "tick":
            w.now += float(op[1])  # type: ignore[arg-type]
        elif kind == "decide":
            _, by, how, amount = op
            assert isinstance(by, str) and isinstance(amount, int)
            waiting = approvals.suspended(limit=1)
            if not waiting:
                continue
            run = waiting[0]
            (p,) = run.pending
            d: Decision = (approve(p, by=by) if how == "approve"
                           else deny(p, "no", by=by) if how == "deny"
                           else edit(p, {**p.args, "amount": amount}, by=by))
            try:
                go_on = approvals.decide(run.run_id, [d])
            except (DeciderNotAllowed, SecondApprovalNeeded):
                w.decisions += 1
                continue
            except (ApprovalExpired, RunNotSuspended, UnknownRun):
                continue
            w.decisions += 1
            may = by in allowed and by not in ("", USER)
            assert may, f"{by!r} decided under {sorted(allowed)}"
            runs_with = int(str(p.args["amount"])) if how != "edit" else amount
            if how != "deny":
                accepted.setdefault((run.run_id, p.tool_call_id), []).append((by, runs_with))
            held.append((go_on, sims[run.run_id]))
        elif kind in ("resume", "crash") and held:
            go_on, sim = held.pop(0)
            if kind == "crash":
                continue
            blocked_now = w.blocked
            before = len(w.ran)
            done = sim.run(agent, (), resume=go_on).result
            assert unpaired_tool_calls(done.messages.messages) == []
            new = w.ran[before:]
            if blocked_now:
                assert new == []  # the gates in force at resume refused it
            for key, ran_amount in new:
                assert any(a == ran_amount for _, a in accepted.get(key, ())), (
                    f"call {key} ran with {ran_amount} without a decision for it")
    # exactly once
    ids = [key for key, _ in w.ran]
    assert len(ids) == len(set(ids))
    # every decision: one audit record
    trail = approvals.audit(limit=1000)
    decided = [r for r in trail if r.outcome in (
        "approved", "edited", "denied", "refused", "first approval")]
    assert len(decided) == w.decisions
    # an approval that let a call run names an allowed principal and the exact call
    for r in trail:
        if r.outcome in ("approved", "edited"):
            assert r.decided_by not in ("", USER)
    for (run_id, call_id), amount in w.ran:
        rec = [r for r in trail if (r.run_id, r.tool_call_id) == (run_id, call_id)
               and r.outcome in ("approved", "edited")]
        assert len(rec) == 1
        want = call_digest(call_id, "refund", {"order": "A1", "amount": amount})
        assert (rec[0].edited_digest or rec[0].digest) == want
