"""Memory under durable runs (in this process, on SQLite): each memory request is a
checkpointed step (a run's writes one, `CommitWrites`), and a thread is kept across
durable runs."""

from __future__ import annotations

from pathlib import Path

from interpreters.durable.dbos.runs import DurableRuns
from interpreters.memory import InMemoryStore, memory_handlers
from interpreters.testing import Say, ScriptedModel
from pipeline.processors import MessageHistory
from tests.helpers import make_agent, user_texts


def test_a_thread_is_kept_across_durable_runs_each_request_a_step(tmp_path: Path) -> None:
    store = InMemoryStore()
    agent = make_agent(input_processors=[MessageHistory(last_messages=10)])
    model = ScriptedModel([Say("one"), Say("two")])
    with DurableRuns(
        {"a": agent}, model, database_url=f"sqlite:///{tmp_path / 'm.sqlite'}",
        handlers=memory_handlers(store), observers=(),
    ) as runs:
        first = runs.run("a", "first", run_id="m1", thread_id="t1", wait=60)
        second = runs.run("a", "second", run_id="m2", thread_id="t1", wait=60)
        again = runs.run("a", "second", run_id="m2", thread_id="t1", wait=60)
        from dbos import DBOS

        steps = [s["function_name"] for s in DBOS.list_workflow_steps("m2")]
    assert first.status == second.status == "finished"
    assert again.text == second.text == "two"  # the same run id: nothing runs again
    assert user_texts(model.requests[1]) == ["first", "second"]
    assert [m.text for m in store.last_messages("t1", 100)] == ["first", "one", "second", "two"]
    assert "perform:LoadHistory" in steps and "perform:CommitWrites" in steps
