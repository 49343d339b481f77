"""The approval reviewer: a judge (`AskModel`, scripted here) approves the calls below
a risk bound and hands the rest to a person; one that fails or answers what cannot be
read hands the call to a person, never approves; its judge calls count in the run's
judges and usage; each verdict is an audit record."""

from __future__ import annotations

import pytest

from interpreters.approvals.store import Approvals, MemoryApprovalStore
from interpreters.record.journal import Recorder
from interpreters.testing import Fail, Say, ScriptedCall, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.approval import approve
from pipeline.processors import ApprovalReviewer, ProcessorConfigError
from pipeline.tools import tool
from pipeline.values.chunks import Usage
from tests.refund_tool import ran, refund


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def delete_account(user: str) -> str:
    """Delete an account."""
    ran.append((user, -1))
    return "deleted"


def _agent(**options: object) -> Agent:
    reviewer = ApprovalReviewer("judge", risk_below=0.3, **options)  # type: ignore[arg-type]
    return Agent.create("sim/model", tools=[tool(refund, needs_approval=True),
                                            tool(delete_account, needs_approval=True)],
                        input_processors=[reviewer])


def _sim(judge: list[Say | Fail], *calls: ScriptedCall) -> tuple[Simulator, ScriptedModel]:
    judge_model = ScriptedModel(judge)
    model = ScriptedModel([Say(calls=list(calls) or [call("refund", order="A1", amount=5)]),
                           Say("done")])
    return Simulator(model, models={"judge": judge_model}), judge_model


def test_a_call_below_the_bound_runs_without_a_person_and_is_recorded() -> None:
    sim, judge = _sim([Say('{"risk": 0.1, "reason": "a small refund"}',
                           usage=Usage(input_tokens=40, output_tokens=9))])
    agent = _agent()
    approvals = Approvals(MemoryApprovalStore(), agent)
    r = approvals.keep(sim.run(agent, "refund").result)
    assert r.status == "finished" and ran == [("A1", 5)]
    assert len(judge.requests) == 1
    assert '"arguments":{"amount":5,"order":"A1"}' in judge.requests[0].messages[0].text
    (j,) = r.judges
    assert (j.processor_id, j.hook) == ("approval-reviewer", "process_tool_call")
    assert r.judge_usage.input_tokens == 40
    (v,) = r.reviews
    assert (v.approved, v.risk, v.reason) == (True, 0.1, "a small refund")
    (rec,) = approvals.audit()
    assert (rec.outcome, rec.decided_by, rec.reason, rec.tool_name) == (
        "approved", "reviewer:approval-reviewer", "a small refund", "refund")


def test_a_call_at_or_above_the_bound_waits_for_a_person_with_the_reason() -> None:
    sim, _ = _sim([Say('{"risk": 0.3, "reason": "a new customer"}')])
    agent = _agent()
    approvals = Approvals(MemoryApprovalStore(), agent)
    r = approvals.keep(sim.run(agent, "refund").result)
    assert r.status == "suspended" and r.suspension is not None and ran == []
    assert "a new customer" in r.suspension.pending[0].message
    assert [(x.outcome, x.decided_by) for x in approvals.audit()] == [
        ("referred", "reviewer:approval-reviewer"), ("waiting", "")]
    go_on = approvals.decide(r.suspension.run_id, [approve(r.suspension.pending[0], by="ann")])
    assert sim.run(agent, (), resume=go_on).result.status == "finished"
    assert ran == [("A1", 5)]


@pytest.mark.parametrize("judge", [
    Fail(status=500), Fail(status=None, message="timed out"), Say("low risk, go ahead"),
    Say('{"risk": -1}'), Say('{"risk": "none"}'), Say('{"reason": "fine"}'),
])
def test_a_reviewer_that_fails_or_cannot_be_read_hands_the_call_to_a_person(
    judge: Say | Fail,
) -> None:
    sim, _ = _sim([judge])
    agent = _agent()
    r = sim.run(agent, "refund").result
    assert r.status == "suspended" and ran == []
    (v,) = r.reviews
    assert not v.approved and "a person decides" in v.reason


def test_the_reviewer_only_reviews_the_tools_it_is_given() -> None:
    sim, judge = _sim([Say('{"risk": 0.0}')], call("delete_account", user="u1"))
    agent = _agent(tools={"refund"})
    r = sim.run(agent, "delete").result
    assert r.status == "suspended" and ran == [] and judge.requests == []
    assert "does not review" in r.reviews[0].reason


def test_a_reviewer_is_refused_an_unusable_setting() -> None:
    with pytest.raises(ProcessorConfigError, match="risk_below"):
        ApprovalReviewer("judge", risk_below=2)
    with pytest.raises(ProcessorConfigError, match="tools"):
        ApprovalReviewer("judge", tools="refund")


def test_a_run_the_reviewer_approved_replays_from_its_journal_running_no_tool() -> None:
    agent = _agent()
    rec = Recorder()
    sim = Simulator(ScriptedModel([Say(calls=[call("refund", order="A1", amount=5)]),
                                   Say("done")]),
                    models={"judge": ScriptedModel([Say('{"risk": 0.1, "reason": "small"}')])},
                    observers=[rec])
    run = sim.run(agent, "refund")
    done = run.result
    assert done.status == "finished" and ran == [("A1", 5)]
    replay = Simulator.replay(rec.last(), agent)
    assert replay.identical and replay.result == done and ran == [("A1", 5)]
