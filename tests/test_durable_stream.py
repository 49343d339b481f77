"""How a durable run writes its chunks (`DurableRuns(stream=)`), on SQLite and PostgreSQL:
"live" (the default) before the next step's work, "with_steps" in the transaction of the
next step's record. Either way a consumer reads the same chunks, each once, and nothing
an output processor stopped. (Crash and resume in both modes: test_durable_crash.py.)"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from pathlib import Path

import msgspec
import pytest
import sqlalchemy as sa

from effects import Abort, Continue, Request, ask
from interpreters.durable.dbos.internals import SystemStore
from interpreters.durable.dbos.runs import STREAM_MODES, DurableRuns, StreamMode
from interpreters.sync import SyncInterpreter
from interpreters.testing import Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.processor import (
    BaseProcessor,
    StreamArgs,
    StreamResult,
    ToolCallArgs,
    ToolCallResult,
    abort,
    processor,
)
from pipeline.tools import tool
from pipeline.tools.context import ToolContext
from pipeline.values.chunks import Chunk, DataChunk, TextDelta, ToolCall
from tests.durable_harness import databases
from tests.helpers import make_agent


def get_weather(ctx: ToolContext[None], city: str) -> str:
    """The weather in a city."""
    ctx.writer.custom("data-weather", {"city": city})
    return f"sunny in {city}"


def weather_model() -> ScriptedModel:
    return ScriptedModel(lambda req: (
        Say("Looking.", calls=[call("get_weather", city="Paris")]) if len(req.messages) == 1
        else Say(["Sunny ", "in Paris."])
    ))


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> Callable[[Path], str]:
    return databases(request.param)


def stream_rows(run_id: str) -> int:
    """The rows of `run_id`'s chunk stream in the store now."""
    from dbos import DBOS

    store = SystemStore.of(DBOS)
    table = f"{store.schema}.streams" if store.schema else "streams"
    with store.engine.connect() as c:
        found = c.execute(sa.text(f"SELECT count(*) FROM {table} WHERE workflow_uuid = :r"),
                          {"r": run_id}).scalar()
    return int(found or 0)


def test_a_stream_mode_not_understood_is_refused_at_construction() -> None:
    assert {"live", "with_steps"} == STREAM_MODES
    for bad in ("folded", "LIVE", "", None, 1):
        with pytest.raises(ValueError, match="stream must be one of"):
            DurableRuns({"a": make_agent()}, ScriptedModel([Say("hi")]),
                        stream=bad)  # type: ignore[arg-type]


def test_both_modes_stream_what_the_sync_interpreter_streams(
    tmp_path: Path, database: Callable[[Path], str]
) -> None:
    agent = make_agent(tools=[tool(get_weather)])
    got: dict[str, list[Chunk]] = {}
    modes: tuple[StreamMode, ...] = ("live", "with_steps")
    for mode in modes:
        folder = tmp_path / mode
        folder.mkdir()
        with DurableRuns({"weather": agent}, weather_model(), database_url=database(folder),
                         observers=(), stream=mode) as runs:
            runs.start("weather", "weather?", run_id="w")
            got[mode] = list(runs.chunks("w", timeout=60))
            assert runs.result("w", timeout=60).text == "Looking.Sunny in Paris."
    interp = SyncInterpreter(weather_model(), run_ids=lambda: "w", observers=())
    expected = list(interp.stream(agent, "weather?"))
    assert got["live"] == expected
    assert got["with_steps"] == expected
    assert DataChunk("data-weather", {"city": "Paris"}) in expected


@pytest.mark.parametrize("mode", ["live", "with_steps"])
def test_a_steps_chunks_are_stored_before_it_runs_live_and_with_its_record_with_steps(
    tmp_path: Path, database: Callable[[Path], str], mode: StreamMode
) -> None:
    stored_while_the_tool_ran: list[int] = []
    release = threading.Event()

    def slow_weather(city: str) -> str:
        """Waits until the reader was given its chance at the chunks before this call."""
        stored_while_the_tool_ran.append(stream_rows("s"))
        assert release.wait(60)
        return f"sunny in {city}"

    agent = make_agent(tools=[tool(slow_weather, name="get_weather")])
    with DurableRuns({"a": agent}, weather_model(), database_url=database(tmp_path),
                     observers=(), stream=mode) as runs:
        runs.start("a", "weather?", run_id="s")
        reader = runs.chunks("s", timeout=60)
        if mode == "live":  # the model's text and the call reach the reader meanwhile
            seen = [next(reader)]
            while not isinstance(seen[-1], ToolCall):
                seen.append(next(reader))
            assert runs.status("s") == "PENDING"
        release.set()
        rest = list(reader)
        assert runs.result("s", timeout=60).status == "finished"
    # Stored while the tool ran: the batch before the model call (with_steps: with its
    # record) and, live only, the batch between the model call and the tool call.
    assert stored_while_the_tool_ran == ([2] if mode == "live" else [1])
    assert rest


class StopOn(BaseProcessor):
    """Stops the run when a text chunk says `word`."""

    id = "stop-word"

    def __init__(self, word: str) -> None:
        self.word = word

    def process_output_stream(self, args: StreamArgs[object]) -> StreamResult[object]:
        if type(args.part) is TextDelta and self.word in args.part.text:
            return Abort("a word it stops on")
        return Continue()


@pytest.mark.parametrize("mode", ["live", "with_steps"])
def test_a_run_an_output_processor_stops_stores_and_streams_nothing_it_stopped(
    tmp_path: Path, database: Callable[[Path], str], mode: StreamMode
) -> None:
    agent = Agent.create("m/model", tools=[tool(get_weather)],
                         output_processors=[StopOn("secret")])
    def model() -> ScriptedModel:
        return ScriptedModel(lambda req: (
            Say("Looking.", calls=[call("get_weather", city="Paris")])
            if len(req.messages) == 1 else Say(["Sunny, ", "the secret ", "is out."])
        ))

    with DurableRuns({"a": agent}, model(), database_url=database(tmp_path), observers=(),
                     stream=mode) as runs:
        result = runs.run("a", "weather?", run_id="x", wait=60)
        chunks = list(runs.chunks("x", timeout=60))
    assert result.status != "finished"
    said = "".join(c.text for c in chunks if isinstance(c, TextDelta))
    assert "Looking." in said and "secret" not in said and "is out" not in said
    assert "secret" not in (result.text or "")
    assert "secret" not in repr(result.messages)
    interp = SyncInterpreter(model(), run_ids=lambda: "x", observers=())
    assert chunks == list(interp.stream(agent, "weather?"))


class Allowed(Request[bool], frozen=True):
    """May this user go on?"""

    user: str


class Unstorable(Exception):
    """An error DBOS cannot store as a step's outcome (it holds a lock)."""

    def __init__(self) -> None:
        super().__init__("no")
        self.lock = threading.Lock()


def _gate(args: ToolCallArgs[None]) -> Generator[object, object, ToolCallResult[None]]:
    if not (yield from ask(Allowed("u"))):
        abort("may not")
    return Continue()


def _refuse(req: object) -> bool:
    raise Unstorable()


def test_chunks_before_a_step_whose_outcome_could_not_be_stored_still_reach_the_reader(
    tmp_path: Path,
) -> None:
    # The gate's request, after the model's chunks, fails with an error DBOS does not
    # record: with_steps, the chunks that were to go with its record go with the next
    # write.
    agent = make_agent(tools=[tool(get_weather)],
                       input_processors=[processor("gate", process_tool_call=_gate)])
    got: dict[str, list[Chunk]] = {}
    modes: tuple[StreamMode, ...] = ("live", "with_steps")
    for mode in modes:
        with DurableRuns({"a": agent}, weather_model(), observers=(),
                         handlers={Allowed: _refuse}, stream=mode,
                         database_url=f"sqlite:///{tmp_path / (mode + '.sqlite')}") as runs:
            result = runs.run("a", "hi", run_id="g", wait=60)
            got[mode] = list(runs.chunks("g", timeout=60))
        assert result.status != "finished"
    assert any(isinstance(c, ToolCall) for c in got["live"])  # streamed before the gate
    assert got["with_steps"] == got["live"]


def test_a_stored_start_with_a_stream_mode_this_version_does_not_know_is_refused() -> None:
    # Replayed as "live", a run recorded in another mode would not match its records.
    from interpreters.durable.dbos import runs

    stored = runs._start_payload("hi", 0.0, {}, None, "with_steps")
    assert runs._START.decode(stored).stream == "with_steps"
    with pytest.raises(msgspec.ValidationError, match="stream"):
        runs._START.decode(stored.replace(b'"with_steps"', b'"with_chunks"'))
