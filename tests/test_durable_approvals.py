"""Approvals of durable runs in this process on SQLite: a run whose gate asks approval
waits in its workflow; the decisions sent by id resume it (approve, deny, edit), bound to
the exact arguments and taken once; past the approval timeout the calls are denied."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import msgspec
import pytest
from dbos import DBOSClient

from effects import AskApproval, Continue
from interpreters.durable.dbos.replay import replay_runs
from interpreters.durable.dbos.runs import DurableClient, DurableRuns
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.approval import (
    ApprovalExpired,
    Approve,
    ArgumentsMismatch,
    Deny,
    EditRejected,
    MissingDecision,
    RunNotSuspended,
    UnknownRun,
    approve,
    deny,
    edit,
)
from pipeline.processor import ToolCallArgs, ToolCallResult, processor
from pipeline.tools import tool
from pipeline.values.chunks import ToolApprovalRequest, ToolApprovalResponse
from pipeline.values.messages import ToolResultPart
from pipeline.values.model import ModelRequest
from pipeline.values.result import PendingApproval, RunResult
from tests.helpers import unpaired_tool_calls

SENT: list[tuple[str, int]] = []
WAIT = 60.0


def send(to: str, amount: int) -> str:
    """Send money."""
    SENT.append((to, amount))
    return f"sent {amount} to {to}"


def ask_big(a: ToolCallArgs[None]) -> ToolCallResult[None]:
    if int(str(a.args["amount"])) >= 100:
        return AskApproval(f"send {a.args['amount']} to {a.args['to']}?")
    return Continue()


AGENT = Agent.create("sim/model", tools=[send],
                     input_processors=[processor("ask", process_tool_call=ask_big)])


def _model() -> ScriptedModel:
    def answer(req: ModelRequest) -> Say:
        if any(m.role == "tool" for m in req.messages):
            return Say("done")
        return Say(calls=[call("send", tool_call_id="c1", to="eve", amount=500)])

    return ScriptedModel(answer)


def _runs(tmp_path: Path, approval_timeout: float = 3600.0, agent: Agent = AGENT,
          **kw: object) -> DurableRuns:
    SENT.clear()
    return DurableRuns({"pay": agent}, _model(),
                       database_url=f"sqlite:///{tmp_path / 'runs.sqlite'}", observers=(),
                       approval_timeout=approval_timeout, takeover=None,
                       **kw)  # type: ignore[arg-type]


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[DurableRuns]:
    r = _runs(tmp_path)
    r.launch()
    try:
        yield r
    finally:
        r.shutdown()


def _waiting(runs: DurableRuns | DurableClient, run_id: str) -> PendingApproval:
    """The one call `run_id` waits on, once it waits (polled: it suspends in its thread)."""
    import time

    deadline = time.monotonic() + WAIT
    while True:
        try:
            (p,) = runs.pending(run_id)
            return p
        except RunNotSuspended:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _results(r: RunResult) -> list[ToolResultPart]:
    return [p for m in r.messages.messages for p in m.tool_results()]


def test_a_durable_run_waits_for_approval_and_runs_the_approved_call_once(
    runs: DurableRuns,
) -> None:
    runs.start("pay", "pay eve", run_id="a")
    p = _waiting(runs, "a")
    assert (p.tool_name, p.args, p.message) == ("send", {"to": "eve", "amount": 500},
                                                "send 500 to eve?")
    assert runs.status("a") == "PENDING" and SENT == []
    runs.decide("a", [approve(p)])
    r = runs.result("a", timeout=WAIT)
    assert r.status == "finished" and r.text == "done"
    assert SENT == [("eve", 500)]
    assert unpaired_tool_calls(r.messages.messages) == []
    # the run's stream carries the request and the answer (as the UI stream's parts)
    gate = [c for c in runs.chunks("a", timeout=WAIT)
            if isinstance(c, ToolApprovalRequest | ToolApprovalResponse)]
    assert gate == [
        ToolApprovalRequest("c1", "send", {"to": "eve", "amount": 500}, "send 500 to eve?",
                            p.digest),
        ToolApprovalResponse(p.digest, "c1", True, None),
    ]
    with pytest.raises(RunNotSuspended):  # taken once: a second decision is refused
        runs.decide("a", [approve(p)])
    assert SENT == [("eve", 500)]
    # the recorded run, its wait included, replays on the agent (calling nothing)
    assert replay_runs(runs.database_url, {"pay": AGENT}) == ()
    assert SENT == [("eve", 500)]


def test_a_decision_for_other_arguments_is_refused_and_the_run_still_waits(
    runs: DurableRuns,
) -> None:
    runs.start("pay", "pay eve", run_id="b")
    p = _waiting(runs, "b")
    with pytest.raises(ArgumentsMismatch):
        runs.decide("b", [Approve(p.tool_call_id, "0" * 64)])
    with pytest.raises(MissingDecision):
        runs.decide("b", [])
    assert runs.pending("b") == (p,) and SENT == []
    runs.decide("b", [edit(p, {"to": "eve", "amount": 50})])
    r = runs.result("b", timeout=WAIT)
    assert r.status == "finished" and SENT == [("eve", 50)]


def test_of_decisions_sent_at_the_same_moment_exactly_one_is_taken(
    runs: DurableRuns,
) -> None:
    runs.start("pay", "pay eve", run_id="race")
    p = _waiting(runs, "race")
    go = threading.Barrier(6)
    sent: list[int] = []

    def decide(i: int) -> None:
        go.wait()
        with contextlib.suppress(RunNotSuspended):
            runs.decide("race", [edit(p, {"to": "eve", "amount": i})])
            sent.append(i)

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    r = runs.result("race", timeout=WAIT)
    (amount,) = sent
    assert [("eve", amount)] == SENT
    assert r.status == "finished" and unpaired_tool_calls(r.messages.messages) == []


def test_a_denied_call_gets_one_error_result_and_never_runs(runs: DurableRuns) -> None:
    runs.start("pay", "pay eve", run_id="c")
    p = _waiting(runs, "c")
    client = DurableClient(runs.database_url)  # any process may decide
    try:
        client.decide("c", [deny(p, "over the limit")])
    finally:
        client.close()
    r = runs.result("c", timeout=WAIT)
    assert r.status == "finished" and SENT == []
    (res,) = _results(r)
    assert res.is_error and "over the limit" in str(res.result)
    assert unpaired_tool_calls(r.messages.messages) == []


def test_past_the_approval_timeout_the_waiting_calls_are_denied(tmp_path: Path) -> None:
    with _runs(tmp_path, approval_timeout=0.2) as runs:
        runs.start("pay", "pay eve", run_id="d")
        r = runs.result("d", timeout=WAIT)
        assert r.status == "finished" and SENT == []
        (res,) = _results(r)
        assert res.is_error and "no decision within the approval timeout" in str(res.result)
        assert replay_runs(runs.database_url, {"pay": AGENT}) == ()
        with pytest.raises(RunNotSuspended):
            runs.decide("d", [])


def test_unknown_runs_and_bad_timeouts_are_refused(runs: DurableRuns) -> None:
    with pytest.raises(UnknownRun):
        runs.pending("nope")
    for bad in (0, -1.0, float("inf"), float("nan"), True):
        with pytest.raises(ValueError, match="approval_timeout"):
            DurableRuns({"pay": AGENT}, _model(), approval_timeout=bad)


def _listed(runs: DurableRuns | DurableClient, **by: str) -> list[str]:
    """The ids of the runs listed as waiting."""
    return [w.run_id for w in runs.suspended(**by)]  # type: ignore[arg-type]


def _deny_left(runs: DurableRuns, *run_ids: str) -> None:
    """Deny what the runs still wait for: a worker shuts down once no run waits."""
    for run_id in run_ids:
        with contextlib.suppress(RunNotSuspended):
            runs.decide(run_id, [deny(p) for p in runs.pending(run_id)])
        runs.result(run_id, timeout=WAIT)


def test_the_runs_waiting_in_a_thread_or_for_a_resource_are_listed(runs: DurableRuns) -> None:
    ids = ("t1-a", "t2-a", "t1-b")
    try:
        _listing(runs)
    finally:
        _deny_left(runs, *ids)


def _listing(runs: DurableRuns) -> None:
    runs.start("pay", "pay eve", run_id="t1-a", thread_id="t1", resource_id="alice")
    runs.start("pay", "pay eve", run_id="t2-a", thread_id="t2", resource_id="alice")
    runs.start("pay", "pay eve", run_id="t1-b", thread_id="t1", resource_id="bob")
    p = {r: _waiting(runs, r) for r in ("t1-a", "t2-a", "t1-b")}
    assert sorted(_listed(runs, thread_id="t1")) == ["t1-a", "t1-b"]
    assert sorted(_listed(runs, resource_id="alice")) == ["t1-a", "t2-a"]
    assert _listed(runs, thread_id="t1", resource_id="bob") == ["t1-b"]
    assert _listed(runs, thread_id="t3") == []
    (one,) = runs.suspended(thread_id="t2")
    assert (one.run_id, one.thread_id, one.resource_id, one.pending) == (
        "t2-a", "t2", "alice", (p["t2-a"],))
    assert len(runs.suspended(thread_id="t1", limit=1)) == 1
    with pytest.raises(ValueError):
        runs.suspended(thread_id="t1", limit=0)
    client = DurableClient(runs.database_url)  # any process lists them alike
    try:
        assert sorted(_listed(client, thread_id="t1")) == ["t1-a", "t1-b"]
    finally:
        client.close()
    runs.decide("t1-a", [approve(p["t1-a"])])
    assert runs.result("t1-a", timeout=WAIT).status == "finished"
    assert _listed(runs, thread_id="t1") == ["t1-b"]  # decided: it no longer waits


def test_an_edit_its_tool_refuses_is_refused_to_the_caller_and_the_run_still_waits(
    runs: DurableRuns,
) -> None:
    runs.start("pay", "pay eve", run_id="e")
    p = _waiting(runs, "e")
    with pytest.raises(EditRejected, match="amount"):
        runs.decide("e", [edit(p, {"to": "eve", "amount": "all"})])
    client = DurableClient(runs.database_url, agents={"pay": AGENT})
    try:
        with pytest.raises(EditRejected):
            client.decide("e", [edit(p, {"to": "eve", "amount": "all"})])
    finally:
        client.close()
    assert runs.pending("e") == (p,) and SENT == []
    runs.decide("e", [edit(p, {"to": "eve", "amount": 50})])
    r = runs.result("e", timeout=WAIT)
    assert r.status == "finished" and SENT == [("eve", 50)]


def test_a_client_without_the_runs_agent_cannot_check_an_edit_and_refuses_it(
    runs: DurableRuns,
) -> None:
    runs.start("pay", "pay eve", run_id="e2")
    p = _waiting(runs, "e2")
    client = DurableClient(runs.database_url)
    try:
        with pytest.raises(EditRejected, match="agents="):
            client.decide("e2", [edit(p, {"to": "eve", "amount": 50})])
        client.decide("e2", [deny(p, "no")])  # approve and deny need no tool
    finally:
        client.close()
    assert runs.result("e2", timeout=WAIT).status == "finished" and SENT == []


def big_send(to: str, amount: Annotated[int, msgspec.Meta(ge=100)]) -> str:
    """Send money, 100 at least."""
    return send(to, amount)


def test_a_decision_that_no_longer_binds_when_the_run_takes_it_is_a_denial(
    tmp_path: Path,
) -> None:
    # decided (and bound) against the agent the run suspended on; the run is resumed
    # by a worker whose tool refuses the edit: the call is denied, the run goes on
    # (a short wait: the stopped worker's wait ends soon after; the decision, claimed in
    # time, is taken after it all the same)
    with _runs(tmp_path, approval_timeout=5.0) as runs:
        runs.start("pay", "pay eve", run_id="m")
        p = _waiting(runs, "m")
        old = runs.fingerprint("pay")
    with _runs(tmp_path, executor_id="decider") as decider:  # it resumes none of them
        decider.decide("m", [edit(p, {"to": "eve", "amount": 50})])
    bigger = Agent.create("sim/model", tools=[tool(big_send, name="send")],
                          input_processors=[processor("ask", process_tool_call=ask_big)])
    with _runs(tmp_path, agent=bigger, migrations={"pay": [old]}) as runs:
        r = runs.result("m", timeout=WAIT)
        assert runs.status("m") == "SUCCESS"
    assert r.status == "finished" and SENT == []
    (res,) = _results(r)
    assert res.is_error and "could not be taken" in str(res.result)


def test_a_message_sent_to_the_run_without_decide_is_not_taken(runs: DurableRuns) -> None:
    runs.start("pay", "pay eve", run_id="f")
    p = _waiting(runs, "f")
    forged = msgspec.json.encode((approve(p),))  # well formed, for the right arguments
    raw = DBOSClient(system_database_url=runs.database_url)
    try:
        raw.send("f", forged, "approval:0")
        raw.send("f", b"not a decision", "approval:0")
    finally:
        raw.destroy()
    assert runs.pending("f") == (p,)  # still waiting: a message is no decision
    runs.decide("f", [deny(p, "no")])
    r = runs.result("f", timeout=WAIT)
    assert r.status == "finished" and SENT == []
    (res,) = _results(r)
    assert res.is_error and "no" in str(res.result)
    assert replay_runs(runs.database_url, {"pay": AGENT}) == ()


@pytest.mark.slow
def test_past_the_deadline_with_no_worker_up_decide_is_too_late_and_the_call_is_denied(
    tmp_path: Path,
) -> None:
    with _runs(tmp_path, approval_timeout=1.0) as runs:
        runs.start("pay", "pay eve", run_id="late")
        p = _waiting(runs, "late")
        url = runs.database_url
    time.sleep(1.5)  # past the deadline while no worker runs
    client = DurableClient(url)
    raw = DBOSClient(system_database_url=url)
    try:
        with pytest.raises(ApprovalExpired):
            client.pending("late")
        with pytest.raises(ApprovalExpired):
            client.decide("late", [approve(p)])
        raw.send("late", msgspec.json.encode((approve(p),)), "approval:0")  # and a late one
    finally:
        raw.destroy()
        client.close()
    with _runs(tmp_path, approval_timeout=1.0) as runs:  # the worker comes back
        r = runs.result("late", timeout=WAIT)
    assert r.status == "finished" and SENT == []
    (res,) = _results(r)
    assert res.is_error and "no decision within the approval timeout" in str(res.result)


@pytest.mark.slow
def test_a_decision_made_in_time_wins_even_when_the_worker_takes_it_late(
    tmp_path: Path,
) -> None:
    with _runs(tmp_path, approval_timeout=5.0) as runs:
        runs.start("pay", "pay eve", run_id="kept")
        p = _waiting(runs, "kept")
        url = runs.database_url
    client = DurableClient(url, agents={"pay": AGENT})
    try:
        client.decide("kept", [edit(p, {"to": "eve", "amount": 70})])
    finally:
        client.close()
    time.sleep(5.5)  # the deadline passes before a worker takes the decision
    with _runs(tmp_path, approval_timeout=5.0) as runs:
        r = runs.result("kept", timeout=WAIT)
    assert r.status == "finished" and SENT == [("eve", 70)]


@pytest.mark.slow
def test_a_decision_sent_as_the_wait_ends_either_wins_or_is_refused_as_too_late(
    tmp_path: Path,
) -> None:
    from interpreters.durable.dbos import approval as da

    ids = [f"t{i}" for i in range(12)]
    with _runs(tmp_path, approval_timeout=10.0) as runs:  # (all suspend well within it)
        for i in ids:
            runs.start("pay", "pay eve", run_id=i)
        waits = {i: da.waiting(runs._channel(), _waited(runs, i)) for i in ids}
        # each decided at its own moment around its deadline, 250 ms before to 250 ms
        # after (the database's clock is this machine's: SQLite)
        at = {i: (waits[i].deadline or 0.0) - 0.25 + k * 0.045 for k, i in enumerate(ids)}
        accepted: dict[str, bool] = {}
        for i in sorted(ids, key=at.__getitem__):
            time.sleep(max(0.0, at[i] - time.time()))
            k = ids.index(i)
            try:
                runs.decide(i, [edit(waits[i].pending[0], {"to": "eve", "amount": 100 + k})])
                accepted[i] = True
            except ApprovalExpired:
                accepted[i] = False
        for i in ids:
            runs.result(i, timeout=WAIT)
    ran = {amount for _, amount in SENT}
    assert {i: 100 + k in ran for k, i in enumerate(ids)} == accepted
    assert len(SENT) == len(ran)  # none twice
    assert any(accepted.values()) and not all(accepted.values())  # both sides were tried


def _waited(runs: DurableRuns, run_id: str) -> str:
    _waiting(runs, run_id)
    return run_id


CHILD = Agent.create("sim/child", tools=[send],
                     input_processors=[processor("ask", process_tool_call=ask_big)])
TREE = Agent.create("sim/model", tools=[CHILD.as_tool("payer", "Pays through a child run.")])


def _tree_model() -> ScriptedModel:
    def answer(req: ModelRequest) -> Say:
        answered = any(m.role == "tool" for m in req.messages)
        if req.model == "sim/child":
            return Say("paid") if answered else Say(
                calls=[call("send", tool_call_id="c1", to="eve", amount=500)])
        return Say("done") if answered else Say(
            calls=[call("payer", tool_call_id="r1", input="pay eve")])

    return ScriptedModel(answer)


@pytest.fixture
def tree_runs(tmp_path: Path) -> Iterator[DurableRuns]:
    SENT.clear()
    r = DurableRuns({"tree": TREE}, _tree_model(),
                    database_url=f"sqlite:///{tmp_path / 'runs.sqlite'}", observers=(),
                    takeover=None)
    r.launch()
    try:
        yield r
    finally:
        r.shutdown()


def test_an_edit_of_a_call_a_child_run_waits_on_is_bound_to_the_childs_tool(
    tree_runs: DurableRuns,
) -> None:
    tree_runs.start("tree", "pay eve", run_id="tree-e")
    p = _waiting(tree_runs, "tree-e")
    assert (p.tool_call_id, p.tool_name, p.path) == ("r1/c1", "send", ("r1",))
    tree_runs.decide("tree-e", [edit(p, {"to": "eve", "amount": 60})])
    r = tree_runs.result("tree-e", timeout=WAIT)
    assert r.status == "finished" and SENT == [("eve", 60)]


def test_an_edit_a_child_runs_tool_refuses_is_refused_to_the_caller_and_the_run_waits(
    tree_runs: DurableRuns,
) -> None:
    tree_runs.start("tree", "pay eve", run_id="tree-x")
    p = _waiting(tree_runs, "tree-x")
    with pytest.raises(EditRejected, match="amount"):
        tree_runs.decide("tree-x", [edit(p, {"to": "eve", "amount": "all"})])
    assert tree_runs.pending("tree-x") == (p,)
    tree_runs.decide("tree-x", [deny(p, "no")])
    r = tree_runs.result("tree-x", timeout=WAIT)
    assert r.status == "finished" and SENT == []


def test_a_nested_edit_the_run_cannot_bind_when_it_takes_it_is_a_denial() -> None:
    from interpreters.durable.dbos import approval as da

    run = Simulator(_tree_model(), models={"sim/child": _tree_model()}).run(TREE, "pay eve")
    s = run.result.suspension
    assert s is not None
    (p,) = s.pending
    message = msgspec.json.encode((edit(p, {"to": "eve", "amount": "all"}),))
    (d,) = da.taken(s, message, TREE)
    assert isinstance(d, Deny) and "could not be taken" in d.reason
