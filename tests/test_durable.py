"""Durable runs in this process on SQLite: the driver gives the sync interpreter's result,
run ids are idempotent, results and chunks are read by id, retries sleep durably."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from interpreters.durable.dbos.runs import (
    DurableClient,
    DurableRunError,
    DurableRuns,
    RunConflictError,
)
from interpreters.durable.loop import ModelOutcome, ToolDone, drive
from interpreters.run.common import start_run
from interpreters.sync import SyncInterpreter, run_tool
from interpreters.testing import Fail, Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.protocol import ToolInvocation
from pipeline.tools import tool
from pipeline.tools.context import ToolContext
from pipeline.values.chunks import Chunk, DataChunk, ErrorChunk, Finish, ModelEvent, ToolCall
from pipeline.values.messages import ToolResultPart
from pipeline.values.model import ModelRequest
from pipeline.values.retry import RetryPolicy
from tests.helpers import make_agent

TOOL_RUNS: list[str] = []


def get_weather(ctx: ToolContext[None], city: str) -> str:
    """The weather in a city."""
    TOOL_RUNS.append(city)
    ctx.writer.custom("data-weather", {"city": city})
    return f"sunny in {city}"


def script() -> list[Say | Fail]:
    return [Say(calls=[call("get_weather", city="Paris")]), Say(["Sunny ", "in Paris."])]


def weather_agent() -> Agent:
    return make_agent(tools=[tool(get_weather)])


class DirectSteps:
    """`Steps` without a database: what the driver alone does with the protocol."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model_ = model
        self.published: list[Chunk] = []
        self.slept: list[float] = []

    def model(self, request: ModelRequest) -> ModelOutcome:
        events: list[ModelEvent] = []
        try:
            events.extend(self.model_.stream(request))
        except Exception as e:
            from interpreters.run.common import stream_failed

            return ModelOutcome(tuple(events), stream_failed(e, started=bool(events)))
        return ModelOutcome(tuple(events))

    def tool(self, inv: ToolInvocation) -> ToolDone:
        return ToolDone(run_tool(inv))

    def perform(self, request: object) -> object:
        raise AssertionError("no processor asks for I/O here")

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def publish(self, chunks: tuple[Chunk, ...]) -> None:
        self.published.extend(chunks)

    def expired(self) -> str | None:
        return None


def sync_run(agent: Agent, model: ScriptedModel) -> tuple[object, list[Chunk]]:
    interp = SyncInterpreter(model, clock=lambda: 5.0, run_ids=lambda: "r", observers=())
    stream = interp.stream(agent, "weather?")
    chunks = list(stream)
    return stream.result, chunks


def test_the_driver_gives_the_sync_interpreters_run() -> None:
    s = [Fail(status=503), *script()]
    expected, chunks = sync_run(weather_agent(), ScriptedModel(s))
    steps = DirectSteps(ScriptedModel(s))
    driver = start_run(
        weather_agent(), "weather?", run_id="r", clock=lambda: 5.0, options={},
    )
    assert drive(driver, steps) == expected
    assert steps.published == chunks
    assert len(steps.slept) == 1  # the 503 was retried after a backoff


def test_a_stream_that_breaks_is_fed_as_the_sync_interpreter_feeds_it() -> None:
    s: list[Say | Fail] = [Say(["a ", "b ", "c"], break_after=2)]
    expected, _ = sync_run(make_agent(), ScriptedModel(s))
    driver = start_run(
        make_agent(), "weather?", run_id="r", clock=lambda: 5.0, options={},
    )
    assert drive(driver, DirectSteps(ScriptedModel(s))) == expected


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[DurableRuns]:
    TOOL_RUNS.clear()
    r = DurableRuns(
        {"weather": weather_agent()},
        ScriptedModel(lambda req: script()[0 if len(req.messages) == 1 else 1]),
        database_url=f"sqlite:///{tmp_path / 'runs.sqlite'}",
        observers=(),
    )
    r.launch()
    try:
        yield r
    finally:
        r.shutdown()


def test_a_run_id_started_twice_runs_once_with_one_result(runs: DurableRuns) -> None:
    runs.start("weather", "weather?", run_id="a")
    first = runs.result("a", timeout=60)
    runs.start("weather", "weather?", run_id="a")
    assert runs.result("a", timeout=60) == first
    assert TOOL_RUNS == ["Paris"]
    assert first.text == "Sunny in Paris."
    assert runs.status("a") == "SUCCESS"


def test_run_waits_for_the_result_and_is_idempotent_too(runs: DurableRuns) -> None:
    first = runs.run("weather", "weather?", run_id="e", wait=60)
    assert first.text == "Sunny in Paris."
    assert runs.run("weather", "weather?", run_id="e", wait=60) == first
    assert runs.result("e", timeout=60) == first
    assert TOOL_RUNS == ["Paris"]


def test_the_chunks_of_a_run_are_read_by_id_as_the_sync_interpreter_streams_them(
    runs: DurableRuns,
) -> None:
    runs.start("weather", "weather?", run_id="b")
    got = list(runs.chunks("b", timeout=60))
    model = ScriptedModel(lambda req: script()[0 if len(req.messages) == 1 else 1])
    interp = SyncInterpreter(model, run_ids=lambda: "b", observers=())
    expected = list(interp.stream(weather_agent(), "weather?"))
    assert got == expected
    assert DataChunk("data-weather", {"city": "Paris"}) in got  # what the tool wrote


def test_a_run_id_started_again_with_other_input_or_options_is_a_conflict(
    runs: DurableRuns,
) -> None:
    runs.run("weather", "weather?", run_id="k", wait=60)
    with pytest.raises(RunConflictError, match="another messages"):
        runs.start("weather", "rain?", run_id="k")
    with pytest.raises(RunConflictError, match="another thread_id"):
        runs.run("weather", "weather?", run_id="k", thread_id="t2", wait=60)
    with pytest.raises(RunConflictError, match="another messages"):
        runs.enqueue("weather", "rain?", run_id="k")
    runs.start("weather", "weather?", run_id="k")  # the same run: its result is the answer
    assert TOOL_RUNS == ["Paris"]


def test_a_client_enqueue_of_a_taken_id_with_other_input_is_a_conflict(
    runs: DurableRuns,
) -> None:
    runs.run("weather", "weather?", run_id="q", wait=60)
    client = DurableClient(runs.database_url)
    try:
        client.enqueue("weather", "weather?", run_id="q")  # same input: fine
        with pytest.raises(RunConflictError, match="another messages"):
            client.enqueue("weather", "snow?", run_id="q")
    finally:
        client.close()


def test_a_run_for_another_app_version_says_why_this_worker_does_not_take_it(
    runs: DurableRuns, caplog: pytest.LogCaptureFixture,
) -> None:
    client = DurableClient(runs.database_url, app_version="agents-v1")
    try:
        client.enqueue("weather", "weather?", run_id="w")
    finally:
        client.close()
    with pytest.raises(TimeoutError, match="it is for app_version 'agents-v1'"):
        runs.result("w", timeout=0.3)
    runs.shutdown()
    with caplog.at_level("WARNING", logger="interpreters.durable"):
        runs.launch()  # a worker that starts says which runs it leaves
    assert "1 run(s) on queue 'pipeline-agents' wait for app_version 'agents-v1'" in caplog.text
    assert TOOL_RUNS == []


def test_unknown_agents_and_runs_are_clear_errors(runs: DurableRuns) -> None:
    with pytest.raises(DurableRunError, match="unknown agent 'nope'"):
        runs.start("nope", "hi", run_id="c")
    with pytest.raises(DurableRunError, match="no run 'missing'"):
        runs.result("missing", timeout=1)


def test_run_options_are_checked_as_on_every_interpreter(runs: DurableRuns) -> None:
    with pytest.raises(TypeError, match="unexpected run option"):
        runs.start("weather", "hi", run_id="o1", thred_id="t1")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="timeout must be"):
        runs.start("weather", "hi", run_id="o2", timeout=-1)
    assert runs.run("weather", "hi", run_id="o3", thread_id="t1").status == "finished"


def test_starting_before_launch_is_a_clear_error() -> None:
    r = DurableRuns({"a": make_agent()}, ScriptedModel([]))
    with pytest.raises(DurableRunError, match="launch"):
        r.start("a", "hi", run_id="x")


def test_async_tools_hooks_and_handlers_are_awaited(tmp_path: Path) -> None:
    from effects import Continue, Replace
    from pipeline.processor import Processor, StreamArgs, StreamResult
    from pipeline.values.chunks import TextDelta

    async def slow(city: str) -> str:
        """Async."""
        await asyncio.sleep(0)
        return f"slow {city}"

    class Shout(Processor):
        id = "shout"

        async def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
            await asyncio.sleep(0)
            if isinstance(args.part, TextDelta):
                return Replace(TextDelta(args.part.id, args.part.text.upper()))
            return Continue()

    agent = make_agent(tools=[tool(slow)], output_processors=[Shout()])
    model = ScriptedModel([Say(calls=[call("slow", city="Paris")]), Say("done")])
    with DurableRuns(
        {"a": agent}, model, database_url=f"sqlite:///{tmp_path / 'a.sqlite'}", observers=()
    ) as r:
        result = r.run("a", "hi", run_id="as", wait=60)
    assert result.status == "finished" and result.text == "DONE"
    assert [t.result for s in result.steps for t in s.tool_results] == ["slow Paris"]


def test_retry_backoff_is_a_durable_sleep(tmp_path: Path) -> None:
    agent = make_agent(retry_policy=RetryPolicy(base_delay=0.01, max_delay=0.02))
    model = ScriptedModel([Fail(status=503), Say("ok")])
    with DurableRuns(
        {"a": agent}, model, database_url=f"sqlite:///{tmp_path / 'r.sqlite'}", observers=()
    ) as r:
        r.start("a", "hi", run_id="d")
        result = r.result("d", timeout=60)
        from dbos import DBOS

        steps = [s["function_name"] for s in DBOS.list_workflow_steps("d")]
    assert result.text == "ok" and len(model.requests) == 2
    assert "DBOS.sleep" in steps and steps.count("model") == 2


def test_runs_carry_the_app_version_workers_resume_them_under(tmp_path: Path) -> None:
    with DurableRuns(
        {"a": make_agent()}, ScriptedModel([Say("ok")]), app_version="agents-v7",
        database_url=f"sqlite:///{tmp_path / 'v.sqlite'}", observers=(),
    ) as r:
        r.run("a", "hi", run_id="v", wait=60)
        from dbos import DBOS

        status = DBOS.get_workflow_status("v")
    assert status is not None and status.app_version == "agents-v7"


def test_a_run_past_its_timeout_ends_cancelled_between_steps_keeping_tool_results(
    tmp_path: Path,
) -> None:
    TOOL_RUNS.clear()
    ticks = iter(range(0, 1000, 10))  # every reading of the clock is 10 s later
    model = ScriptedModel(script())
    with DurableRuns(
        {"weather": weather_agent()}, model, clock=lambda: float(next(ticks)),
        database_url=f"sqlite:///{tmp_path / 't.sqlite'}", observers=(),
    ) as r:
        result = r.run("weather", "weather?", run_id="t", wait=60, timeout=15)
        with pytest.raises(ValueError, match="timeout must be"):
            r.start("weather", "weather?", run_id="bad", timeout=-1)
    # started at 0, the model call ended at 10, the tool at 20: past 15, no second call
    assert result.status == "cancelled"
    assert result.error is not None and "timed out after 15 s" in str(result.error)
    assert TOOL_RUNS == ["Paris"] and len(model.requests) == 1
    assert any(s.tool_results for s in result.steps)


def test_chunks_reach_the_reader_while_the_run_is_still_running(tmp_path: Path) -> None:
    import threading

    release = threading.Event()

    def slow_lookup(city: str) -> str:
        """Blocks until the reader has seen the first step's chunks."""
        assert release.wait(60), "the reader never saw the first chunks"
        return f"sunny in {city}"

    agent = make_agent(tools=[tool(slow_lookup, name="get_weather")])
    with DurableRuns(
        {"a": agent}, ScriptedModel(script()),
        database_url=f"sqlite:///{tmp_path / 's.sqlite'}", observers=(),
    ) as r:
        r.start("a", "weather?", run_id="s")
        reader = r.chunks("s", timeout=60)
        seen = [next(reader)]
        while not isinstance(seen[-1], ToolCall):
            seen.append(next(reader))
        assert r.status("s") == "PENDING"  # the tool is still waiting: the run is live
        release.set()
        seen.extend(reader)
        assert r.result("s", timeout=60).text == "Sunny in Paris."
    assert isinstance(seen[-1], Finish)


class Units(msgspec.Struct, frozen=True):
    unit: str


class Pool:
    """A live dependency: not storable, built by each worker."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_stored_deps_reach_the_tools_decoded_as_the_type_they_ask_for(tmp_path: Path) -> None:
    seen: list[object] = []

    def temperature(ctx: ToolContext[Units], city: str) -> str:
        """The temperature in a city."""
        seen.append(ctx.deps)
        return f"20 {ctx.deps.unit}"

    agent = make_agent(tools=[tool(temperature)])
    model = ScriptedModel([Say(calls=[call("temperature", city="Paris")]), Say("warm")])
    with DurableRuns(
        {"a": agent}, model, database_url=f"sqlite:///{tmp_path / 'd.sqlite'}", observers=()
    ) as r:
        assert r.run("a", "hi", run_id="d1", deps=Units("C"), wait=60).text == "warm"
        with pytest.raises(TypeError, match="needs deps of type Units"):
            r.start("a", "hi", run_id="d2", deps={"unit": "C"})
        with pytest.raises(RunConflictError, match="another deps"):
            r.start("a", "hi", run_id="d1", deps=Units("F"))
    assert seen == [Units("C")]


def test_live_deps_are_built_per_worker_by_its_factory(tmp_path: Path) -> None:
    seen: list[object] = []

    def query(ctx: ToolContext[Pool], city: str) -> str:
        """Looks a city up in the pool."""
        seen.append(ctx.deps)
        return city

    agent = make_agent(tools=[tool(query)])
    model = ScriptedModel([Say(calls=[call("query", city="Paris")]), Say("found")])
    built: list[str] = []

    def factory(name: str) -> Pool:
        built.append(name)
        return Pool(name)

    with DurableRuns(
        {"a": agent}, model, deps=factory, observers=(),
        database_url=f"sqlite:///{tmp_path / 'f.sqlite'}",
    ) as r:
        assert r.run("a", "hi", run_id="f1", wait=60).text == "found"
        with pytest.raises(TypeError, match="must be msgspec-encodable"):
            r.start("a", "hi", run_id="f2", deps=Pool("mine"))
    assert built == ["a"] and isinstance(seen[0], Pool) and seen[0].name == "a"


def test_migrations_are_checked_when_the_worker_is_built() -> None:
    with pytest.raises(ValueError, match="agents this worker does not run: \\['b'\\]"):
        DurableRuns({"a": make_agent()}, ScriptedModel([]), migrations={"b": ["0" * 16]})
    with pytest.raises(TypeError, match="collection of digests"):
        DurableRuns({"a": make_agent()}, ScriptedModel([]), migrations={"a": "0" * 16})


def test_a_deps_factory_that_is_not_a_function_is_refused_when_the_worker_is_built() -> None:
    with pytest.raises(TypeError, match="deps must be a function"):
        DurableRuns({"a": make_agent()}, ScriptedModel([]), deps={"db": "x"})  # type: ignore[arg-type]


class ExpiresAfterOneTool(DirectSteps):
    """The run's time passes its timeout with its first tool step."""

    def __init__(self, model: ScriptedModel) -> None:
        super().__init__(model)
        self.tools = 0

    def tool(self, inv: ToolInvocation) -> ToolDone:
        self.tools += 1
        return super().tool(inv)

    def expired(self) -> str | None:
        return "timed out after 15 s" if self.tools else None


def test_a_run_past_its_timeout_between_two_tool_steps_runs_no_further_tool() -> None:
    TOOL_RUNS.clear()
    s: list[Say | Fail] = [
        Say(calls=[call("get_weather", city="Paris"), call("get_weather", city="Rome")]),
        Say("never"),
    ]
    steps = ExpiresAfterOneTool(ScriptedModel(s))
    driver = start_run(weather_agent(), "weather?", run_id="r", clock=lambda: 5.0, options={})
    result = drive(driver, steps)
    assert result.status == "cancelled"
    assert TOOL_RUNS == ["Paris"]  # each tool is a step: the timeout is checked before it
    results = [
        p for m in result.messages.all for p in m.parts if isinstance(p, ToolResultPart)
    ]
    assert (results[0].result, results[0].is_error) == ("sunny in Paris", False)
    assert results[1].is_error
    assert isinstance(steps.published[-1], ErrorChunk)  # the cancel's chunks are published


def test_a_worker_takes_a_bounded_number_of_queued_runs_by_default(tmp_path: Path) -> None:
    from dbos import DBOS

    from interpreters.durable.dbos.runs import DEFAULT_WORKER_CONCURRENCY

    with DurableRuns({"a": make_agent()}, ScriptedModel([]), observers=(), takeover=None,
                     database_url=f"sqlite:///{tmp_path / 'c.sqlite'}") as r:
        queue = DBOS.retrieve_queue(r.queue)
        assert queue is not None and queue.worker_concurrency == DEFAULT_WORKER_CONCURRENCY
    assert 16 <= DEFAULT_WORKER_CONCURRENCY <= 64


@pytest.mark.parametrize("bad", [0, -1, 1.5, None, True])
def test_a_worker_concurrency_not_understood_is_refused(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="worker_concurrency"):
        DurableRuns({"a": make_agent()}, ScriptedModel([]),
                    worker_concurrency=bad)  # type: ignore[arg-type]
