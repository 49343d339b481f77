"""Durable approvals across killed workers: a run suspends, its worker is SIGKILLed while
it waits, the decision is sent while no worker runs, a restarted worker takes it; killed
again after the approved tool ran, the next one finishes. The approved tool ran exactly
once with the approved arguments, a denied one never, and every call has one result.
Past the wait's deadline with no worker up a decision is refused and the call denied;
a caller killed inside `decide` blocks no other. On SQLite always, on PostgreSQL when a
server is given (PIPELINE_TEST_PG_URL)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from dbos import DBOSClient
from sqlalchemy.exc import DBAPIError

from interpreters.durable.dbos.runs import DurableClient
from pipeline.approval import (
    ApprovalExpired,
    Decision,
    RunNotSuspended,
    UnknownRun,
    approve,
    deny,
    edit,
)
from pipeline.values.result import PendingApproval
from tests.durable_harness import (
    WAIT,
    databases,
    finish,
    kill,
    lines,
    result_of,
    spawn,
    wait_for,
    wait_until,
)
from tests.durable_worker import make_agent
from tests.helpers import unpaired_tool_calls

pytestmark = [pytest.mark.slow]

RUN = "run-1"


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> Callable[[Path], str]:
    return databases(request.param)


def _client(folder: Path, db: str) -> DurableClient:
    """A client that binds edits to the workers' agent."""
    return DurableClient(db, agents={"weather": make_agent(folder)})


def _suspend_and_kill(folder: Path, db: str, client: DurableClient,
                      **env: str) -> PendingApproval:
    """Start the run in a worker, wait until it waits for approval, kill the worker."""
    w = spawn(folder, db, "run", RUN, APPROVAL="1", **env)
    got: list[PendingApproval] = []

    def waits() -> bool:
        try:
            got[:] = client.pending(RUN)
        except (UnknownRun, RunNotSuspended, DBAPIError):  # (the worker is starting)
            return False
        return True

    wait_until("the run waiting for approval", waits, w)
    kill(w)
    (p,) = got
    assert (p.tool_name, p.args) == ("get_weather", {"city": "Paris"})
    assert lines(folder / "tool.log") == []
    return p


def _decide_while_down(folder: Path, db: str,
                      decision: Callable[[PendingApproval], Decision]) -> PendingApproval:
    """Suspend the run, kill its worker, and send `decision` while no worker runs (it
    is stored for the worker that recovers the run)."""
    client = _client(folder, db)
    try:
        p = _suspend_and_kill(folder, db, client)
        client.decide(RUN, [decision(p)])
    finally:
        client.close()
    return p


def test_a_run_waiting_for_approval_survives_its_worker_and_runs_the_edit_once(
    tmp_path: Path, database: Callable[[Path], str]
) -> None:
    db = database(tmp_path)
    p = _decide_while_down(tmp_path, db, lambda p: edit(p, {"city": "Lyon"}))
    # a restarted worker takes the decision; killed after the approved tool ran
    w = spawn(tmp_path, db, "run", RUN, APPROVAL="1", HANG="before-answer")
    wait_for(tmp_path / "hang", w)
    kill(w)
    assert len(lines(tmp_path / "tool.log")) == 1
    (tmp_path / "hang").unlink()
    w = spawn(tmp_path, db, "run", RUN, APPROVAL="1")
    finish(w)
    client = _client(tmp_path, db)
    try:
        with pytest.raises(RunNotSuspended):
            client.decide(RUN, [edit(p, {"city": "Rome"})])
    finally:
        client.close()
    r = result_of(tmp_path, RUN)
    assert r.status == "finished" and r.text == "It is sunny in Paris today."
    assert [line.split()[-1] for line in lines(tmp_path / "tool.log")] == ["Lyon"]
    results = [part for m in r.messages.messages for part in m.tool_results()]
    assert [(x.result, x.is_error) for x in results] == [("sunny in Lyon", False)]
    assert unpaired_tool_calls(r.messages.messages) == []


def test_a_call_denied_while_no_worker_runs_gets_one_error_result_and_never_runs(
    tmp_path: Path, database: Callable[[Path], str]
) -> None:
    db = database(tmp_path)
    _decide_while_down(tmp_path, db, lambda p: deny(p, "not today"))
    w = spawn(tmp_path, db, "run", RUN, APPROVAL="1")
    finish(w)
    r = result_of(tmp_path, RUN)
    assert r.status == "finished" and lines(tmp_path / "tool.log") == []
    results = [part for m in r.messages.messages for part in m.tool_results()]
    assert len(results) == 1 and results[0].is_error and "not today" in str(results[0].result)
    assert unpaired_tool_calls(r.messages.messages) == []


def test_of_decisions_sent_at_the_same_moment_exactly_one_is_taken(
    tmp_path: Path, database: Callable[[Path], str]
) -> None:
    db = database(tmp_path)
    setup = DurableClient(db)
    try:
        p = _suspend_and_kill(tmp_path, db, setup)
    finally:
        setup.close()
    # eight callers, each its own client, decide at once, each a different decision
    callers = [_client(tmp_path, db) for _ in range(8)]
    go = threading.Barrier(len(callers))
    outcomes: list[str] = [""] * len(callers)

    def decide(i: int) -> None:
        d = edit(p, {"city": "Lyon"}) if i == 0 else deny(p, f"no ({i})")
        go.wait()
        try:
            callers[i].decide(RUN, [d])
            outcomes[i] = "sent"
        except RunNotSuspended:
            outcomes[i] = "refused"

    threads = [threading.Thread(target=decide, args=(i,)) for i in range(len(callers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for c in callers:
        c.close()
    assert sorted(outcomes) == ["refused"] * 7 + ["sent"]
    winner = outcomes.index("sent")
    # the winner's call again (a caller that crashed after sending) is taken as sent
    again = _client(tmp_path, db)
    try:
        again.decide(RUN, [edit(p, {"city": "Lyon"}) if winner == 0 else deny(p, f"no ({winner})")])
    finally:
        again.close()
    w = spawn(tmp_path, db, "run", RUN, APPROVAL="1")
    finish(w)
    r = result_of(tmp_path, RUN)
    results = [part for m in r.messages.messages for part in m.tool_results()]
    assert len(results) == 1 and unpaired_tool_calls(r.messages.messages) == []
    if winner == 0:
        assert [line.split()[-1] for line in lines(tmp_path / "tool.log")] == ["Lyon"]
        assert results[0].result == "sunny in Lyon"
    else:
        assert lines(tmp_path / "tool.log") == [] and results[0].is_error
        assert f"no ({winner})" in str(results[0].result)


def test_past_the_deadline_with_no_worker_up_a_decision_is_refused_and_the_call_denied(
    tmp_path: Path, database: Callable[[Path], str]
) -> None:
    db = database(tmp_path)
    client = _client(tmp_path, db)
    try:
        p = _suspend_and_kill(tmp_path, db, client, APPROVAL_TIMEOUT="2")

        def expired() -> bool:
            try:
                client.pending(RUN)
            except ApprovalExpired:
                return True
            return False

        wait_until("the wait's deadline, with no worker up", expired)
        with pytest.raises(ApprovalExpired):
            client.decide(RUN, [approve(p)])
        raw = DBOSClient(system_database_url=db)  # a message sent past decide, late too
        try:
            raw.send(RUN, msgspec.json.encode((approve(p),)), "approval:0")
        finally:
            raw.destroy()
    finally:
        client.close()
    w = spawn(tmp_path, db, "run", RUN, APPROVAL="1", APPROVAL_TIMEOUT="2")
    finish(w)
    r = result_of(tmp_path, RUN)
    assert r.status == "finished" and lines(tmp_path / "tool.log") == []
    results = [part for m in r.messages.messages for part in m.tool_results()]
    assert len(results) == 1 and results[0].is_error
    assert "no decision within the approval timeout" in str(results[0].result)


def test_a_caller_killed_inside_decide_blocks_no_other_decision(
    tmp_path: Path, database: Callable[[Path], str]
) -> None:
    db = database(tmp_path)
    client = _client(tmp_path, db)
    try:
        p = _suspend_and_kill(tmp_path, db, client)
        dying = spawn(tmp_path, db, "decide", RUN)
        assert dying.wait(WAIT) == -9  # killed as it sent its denial
        client.decide(RUN, [edit(p, {"city": "Lyon"})])  # another caller decides
    finally:
        client.close()
    w = spawn(tmp_path, db, "run", RUN, APPROVAL="1")
    finish(w)
    r = result_of(tmp_path, RUN)
    assert r.status == "finished"
    assert [line.split()[-1] for line in lines(tmp_path / "tool.log")] == ["Lyon"]
    results = [part for m in r.messages.messages for part in m.tool_results()]
    assert [(x.result, x.is_error) for x in results] == [("sunny in Lyon", False)]
