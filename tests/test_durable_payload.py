"""A durable run's stored result keeps each tool result once, and reads back exactly."""

from __future__ import annotations

from pathlib import Path

import msgspec

from interpreters.durable import DurableRuns
from interpreters.durable_payload import compact, expand
from interpreters.simulator import Say, ScriptedModel, call
from pipeline.tools import tool
from tests.helpers import make_agent

BIG = 200_000


def big(n: int) -> str:
    """A long text."""
    return "x" * n


def test_a_big_tool_result_is_stored_once_in_the_runs_result(tmp_path: Path) -> None:
    model = ScriptedModel([Say(calls=[call("big", n=BIG)]), Say("ok")])
    with DurableRuns(
        {"a": make_agent(tools=[tool(big)])}, model, observers=(),
        database_url=f"sqlite:///{tmp_path / 'p.sqlite'}",
    ) as r:
        result = r.run("a", "hi", run_id="p", wait=60)
        from dbos import DBOS

        stored: object = DBOS.retrieve_workflow("p").get_result()
    assert isinstance(stored, bytes)
    assert stored.count(b"x" * 1000) == BIG // 1000  # one copy, not two
    assert [t.result for s in result.steps for t in s.tool_results] == ["x" * BIG]
    assert expand(stored) == result


def test_a_result_stored_whole_reads_as_it_is_and_compact_round_trips() -> None:
    from interpreters.sync import SyncInterpreter

    model = ScriptedModel([Say(calls=[call("big", n=3)]), Say("ok")])
    result = SyncInterpreter(model, observers=()).run(make_agent(tools=[tool(big)]), "hi")
    assert expand(msgspec.json.encode(result)) == result
    assert expand(compact(result)) == result
