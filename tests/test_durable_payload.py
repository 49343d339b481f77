"""A durable run's stored result keeps each tool result once, and reads back exactly."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from effects import Continue, Replace
from interpreters.durable.dbos.runs import DurableClient, DurableRuns
from interpreters.durable.payload import compact, expand, recorder
from interpreters.testing import Say, ScriptedModel, call
from pipeline.processor import Processor, StreamArgs, StreamResult
from pipeline.tools import tool
from pipeline.values.chunks import ToolResult
from tests.helpers import make_agent

BIG = 200_000


def big(n: int) -> str:
    """A long text."""
    return "x" * n


def test_a_big_tool_result_is_left_to_its_tool_step_by_the_runs_result(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([Say(calls=[call("big", n=BIG)]), Say("ok")])
    with DurableRuns(
        {"a": make_agent(tools=[tool(big)])}, model, observers=(),
        database_url=f"sqlite:///{tmp_path / 'p.sqlite'}",
    ) as r:
        result = r.run("a", "hi", run_id="p", wait=60)
        from dbos import DBOS

        stored: object = DBOS.retrieve_workflow("p").get_result()
        steps = [(s["function_name"], s["output"]) for s in DBOS.list_workflow_steps("p")]
        again = r.result("p")
    assert isinstance(stored, bytes)
    assert stored.count(b"x" * 1000) == 0  # the tool step's outcome holds it
    assert [t.result for s in result.steps for t in s.tool_results] == ["x" * BIG]
    assert expand(stored, recorder(lambda: steps)) == result == again
    with pytest.raises(ValueError, match="refers to tool steps"):
        expand(stored)


def test_a_redacted_big_tool_result_is_stored_apart_from_the_raw_one(
    tmp_path: Path,
) -> None:
    class Hide(Processor):
        id = "hide"

        def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
            if isinstance(args.part, ToolResult):
                return Replace(msgspec.structs.replace(args.part, result="y" * BIG))
            return Continue()

    model = ScriptedModel([Say(calls=[call("big", n=BIG)]), Say("ok")])
    with DurableRuns(
        {"a": make_agent(tools=[tool(big)], output_processors=[Hide()])}, model,
        observers=(), database_url=f"sqlite:///{tmp_path / 'p.sqlite'}",
    ) as r:
        result = r.run("a", "hi", run_id="p", wait=60)
        streamed = list(r.chunks("p"))
        from dbos import DBOS

        stored: object = DBOS.retrieve_workflow("p").get_result()
    assert isinstance(stored, bytes)
    assert stored.count(b"y" * 1000) == BIG // 1000
    assert [t.result for s in result.steps for t in s.tool_results] == ["y" * BIG]
    assert [c.result for c in streamed if isinstance(c, ToolResult)] == ["y" * BIG]


def test_a_result_stored_whole_reads_as_it_is_and_compact_round_trips() -> None:
    from interpreters.sync import SyncInterpreter

    model = ScriptedModel([Say(calls=[call("big", n=3)]), Say("ok")])
    result = SyncInterpreter(model, observers=()).run(make_agent(tools=[tool(big)]), "hi")
    assert expand(msgspec.json.encode(result)) == result
    assert expand(compact(result)) == result


def _stored_bytes(db: Path, run_id: str) -> int:
    """The bytes of every column DBOS stores for `run_id` (outcomes, stream, result)."""
    import sqlite3

    total = 0
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            key = next((c for c in ("workflow_uuid", "workflow_id") if c in cols), None)
            if key is None:
                continue
            lengths = " + ".join(f"coalesce(length({c}), 0)" for c in cols)
            row = conn.execute(
                f"SELECT sum({lengths}) FROM {table} WHERE {key} = ?", (run_id,)
            ).fetchone()
            total += int(row[0] or 0)
    return total


def test_a_10_mb_tool_result_takes_its_size_once_in_the_store(tmp_path: Path) -> None:
    size = 10_000_000
    db = tmp_path / "p.sqlite"
    model = ScriptedModel([Say(calls=[call("big", n=size)]), Say("ok")])
    with DurableRuns(
        {"a": make_agent(tools=[tool(big)], max_tool_result_bytes=2 * size)}, model, observers=(),
        database_url=f"sqlite:///{db}",
    ) as r:
        result = r.run("a", "hi", run_id="p", wait=120)
        streamed = list(r.chunks("p"))
        again = r.result("p")
        client = DurableClient(r.database_url)
        try:
            by_client = (client.result("p"), list(client.chunks("p")))
        finally:
            client.close()
    stored = _stored_bytes(db, "p")
    print(f"stored {stored} bytes for a {size} byte tool result")
    assert stored < 1.5 * size, stored
    assert again == result
    assert [t.result for s in result.steps for t in s.tool_results] == ["x" * size]
    assert [c.result for c in streamed if isinstance(c, ToolResult)] == ["x" * size]
    assert by_client == (result, streamed)


def test_a_stream_batch_refers_only_to_a_recorded_result_that_encodes_the_same() -> None:
    from interpreters.durable.payload import compact_chunks, expand_chunks

    same = ToolResult("c1", "big", [1, "a"])
    equal_not_same = ToolResult("c2", "big", True)  # == 1, but encodes as true
    other = ToolResult("c3", "big", "redacted")
    big = {"c1": (0, b'[1,"a"]'), "c2": (1, b"1"), "c3": (2, b'"raw"')}
    values = {0: ("c1", [1, "a"]), 1: ("c2", 1), 2: ("c3", "raw")}

    def recorded(n: int, call_id: str) -> object:
        assert values[n][0] == call_id
        return values[n][1]

    data = compact_chunks((same, equal_not_same, other), big)
    assert data.count(b'"a"') == 0 and b"true" in data and b"redacted" in data
    assert expand_chunks(data, recorded) == (same, equal_not_same, other)
    plain = compact_chunks((other,), {})
    assert plain == msgspec.json.encode((other,))
    assert expand_chunks(plain, recorded) == (other,)


def test_a_run_whose_result_refers_to_its_tool_step_replays_without_a_problem(
    tmp_path: Path,
) -> None:
    from interpreters.durable.dbos.replay import replay_runs

    agent = make_agent(tools=[tool(big)])
    url = f"sqlite:///{tmp_path / 'p.sqlite'}"
    model = ScriptedModel([Say(calls=[call("big", n=BIG)]), Say("ok")])
    with DurableRuns({"a": agent}, model, observers=(), database_url=url) as r:
        r.run("a", "hi", run_id="p", wait=60)
    assert replay_runs(url, {"a": agent}) == ()
    other = make_agent(tools=[tool(big)], instructions="another")
    assert replay_runs(url, {"a": other}, migrations={"a": ()}) != ()  # replay can fail
