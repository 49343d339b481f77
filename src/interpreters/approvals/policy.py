"""Rules on who decides a call and how long it waits: `ApprovalPolicy`.

    policy = ApprovalPolicy(
        tools={"refund": ToolApprovalRule(principals=frozenset({"ann", "bob", "cy"}),
                                          two_person_above=("amount", 1000),
                                          expires_after=3600)},
        not_the_runs_user=True,
        expires_after=86400,
    )
    approvals = Approvals(store, agent, policy=policy)

- `principals`: who may decide the tool's calls (None: anyone the app names; a decision
  that names no one is refused whenever the policy has a rule on deciders);
- `two_person_above=(argument, bound)`: a call whose `argument` is above `bound` runs
  only once two different principals approved it (the same arguments); the first
  approval is recorded and the run waits for the second (`SecondApprovalNeeded`);
  a denial by either is final;
- `not_the_runs_user`: no one decides a call of a run they are the user of (the run's
  `resource_id`, the user the app runs it for);
- `expires_after`: seconds a call waits before it is denied (the tool's, else the
  policy's; None: it waits until decided).

Pure: `check_deciders` is given the earlier records and the time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from interpreters.approvals.audit import AuditRecord, Waits
from pipeline.approval import ApprovalError, Decision, Deny, Edit, call_digest
from pipeline.values.result import PendingApproval


class DeciderNotAllowed(ApprovalError):
    """A decision by someone the policy does not let decide this call (the run still
    waits; the refusal is recorded)."""


class SecondApprovalNeeded(ApprovalError):
    """The call needs a second person's approval: the first is recorded and the run
    still waits."""


def _check_expiry(after: object) -> None:
    if after is not None and (
        isinstance(after, bool) or not isinstance(after, int | float) or not after > 0
    ):
        raise ValueError(f"expires_after is a number of seconds above 0, or None, not {after!r}")


class ToolApprovalRule(msgspec.Struct, frozen=True, kw_only=True):
    """Who decides one tool's calls, and how long they wait (see the module doc)."""

    principals: frozenset[str] | None = None
    two_person_above: tuple[str, float] | None = None
    expires_after: float | None = None

    def __post_init__(self) -> None:
        if self.principals is not None and (
            not isinstance(self.principals, frozenset)  # a str would be read letter by letter
            or not all(isinstance(p, str) and p for p in self.principals)
        ):
            raise TypeError("principals are a frozenset of non-empty strs, got "
                            f"{self.principals!r}")
        if self.two_person_above is not None:
            arg, bound = self.two_person_above
            if not isinstance(arg, str) or isinstance(bound, bool) or not isinstance(
                bound, int | float
            ):
                raise TypeError("two_person_above is (argument name, number)")
        _check_expiry(self.expires_after)


class ApprovalPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """The rules on deciders, per tool (see the module doc)."""

    tools: Mapping[str, ToolApprovalRule] = msgspec.field(default_factory=dict)
    default: ToolApprovalRule = msgspec.field(default_factory=ToolApprovalRule)
    """The rule of a tool not in `tools`."""
    not_the_runs_user: bool = False
    expires_after: float | None = None
    """How long a call waits when its tool's rule does not say (None: until decided)."""

    def __post_init__(self) -> None:
        for name, rule in self.tools.items():
            if not isinstance(rule, ToolApprovalRule):
                raise TypeError(f"the rule of tool {name!r} is a ToolApprovalRule")
        _check_expiry(self.expires_after)

    def rule(self, tool_name: str) -> ToolApprovalRule:
        return self.tools.get(tool_name, self.default)

    def names_deciders(self) -> bool:
        """Whether a decision must say who made it."""
        rules = (self.default, *self.tools.values())
        return self.not_the_runs_user or any(
            r.principals is not None or r.two_person_above is not None for r in rules
        )

    def expires_at(self, s: Waits, now: float) -> float | None:
        """When the wait of `s` ends: its soonest-ending call's (None: never)."""
        ends = [
            now + after for p in s.pending
            if (after := self._after(p.tool_name)) is not None
        ]
        return min(ends) if ends else None

    def _after(self, tool_name: str) -> float | None:
        own = self.rule(tool_name).expires_after
        return own if own is not None else self.expires_after


def needs_two(rule: ToolApprovalRule, args: Mapping[str, object]) -> bool:
    """Whether a call with `args` needs two approvals under `rule`."""
    if rule.two_person_above is None:
        return False
    arg, bound = rule.two_person_above
    value = args.get(arg)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value is not None  # (an amount that is no number: two people, not none)
    return value > bound


def refusal(
    policy: ApprovalPolicy, s: Waits, p: PendingApproval, d: Decision
) -> str | None:
    """Why the policy does not let `d.by` decide call `p` of `s`, or None."""
    if not policy.names_deciders():
        return None
    if not d.by:
        return "the decision does not say who made it"
    rule = policy.rule(p.tool_name)
    if rule.principals is not None and d.by not in rule.principals:
        return f"{d.by!r} may not decide calls of {p.tool_name!r}"
    if policy.not_the_runs_user and s.resource_id is not None and d.by == s.resource_id:
        return f"{d.by!r} is the run's own user"
    return None


def decided_args(p: PendingApproval, d: Decision) -> Mapping[str, object]:
    return d.args if isinstance(d, Edit) else p.args


def first_approvers(
    earlier: Sequence[AuditRecord], p: PendingApproval, d: Decision
) -> set[str]:
    """Who gave the first of two approvals of this very decision (the same call, the
    same arguments) since the call last began to wait."""
    want = call_digest(p.tool_call_id, p.tool_name, dict(decided_args(p, d)))
    found: set[str] = set()
    for r in earlier:
        if r.tool_call_id != p.tool_call_id or r.digest != p.digest:
            continue
        if r.outcome == "waiting":
            found.clear()  # (waiting again: earlier approvals were of an earlier wait)
        elif r.outcome == "first approval" and (r.edited_digest or r.digest) == want:
            found.add(r.decided_by)
    return found


def check_deciders(
    policy: ApprovalPolicy,
    s: Waits,
    decisions: Sequence[Decision],
    earlier: Sequence[AuditRecord],
) -> tuple[list[tuple[PendingApproval, Decision, str]], list[tuple[PendingApproval, Decision]]]:
    """The decisions refused (with why) and those that are only a first approval (the
    call needs a second person's), by the policy, given the run's earlier records."""
    pending = {p.tool_call_id: p for p in s.pending}
    refused: list[tuple[PendingApproval, Decision, str]] = []
    first: list[tuple[PendingApproval, Decision]] = []
    for d in decisions:
        p = pending[d.tool_call_id]
        why = refusal(policy, s, p, d)
        if why is not None:
            refused.append((p, d, why))
            continue
        if isinstance(d, Deny) or not needs_two(policy.rule(p.tool_name), decided_args(p, d)):
            continue
        # (an earlier approval counts while its decider may still decide: a rule
        # changed since takes it back)
        before = {by for by in first_approvers(earlier, p, d)
                  if refusal(policy, s, p, msgspec.structs.replace(d, by=by)) is None}
        if not before - {d.by}:
            first.append((p, d))
    return refused, first
