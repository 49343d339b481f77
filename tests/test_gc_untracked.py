"""The values a run makes on every model call, and the history it keeps, are untracked.

With 1,000 concurrent runs (W4 of bench/WORKLOADS.md) the collector finds nothing to
free, yet walks every tracked object each run holds across its waits, again and again:
each one costs roughly 0.5 µs per run. These frozen values are declared `gc=False`. The
chunks and the tool-call part hold only text, numbers, JSON and values like themselves,
so they cannot be part of a reference cycle, nor can the simulator's scripted responses
(`Say`, `call`, `Fail`). A message and its parts, and a step's result, hold what the run
keeps in its history: text, JSON, and tool results and data that encode as JSON (any
other is kept as an error saying so), and a value that encodes cannot refer back to the
message that holds it. A model request (and the `CallModel` that carries it) holds the
conversation, and `Pull` and `Publish` hold chunks, either of which may carry a user's
object (a tool result, a data chunk): one could only be in a cycle if such an object were
changed afterwards to refer back to the request or the command that carries it, which the
library never does (such a cycle would stay in memory).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable

import anyio
import pytest

from effects import CallModel, Publish, Pull
from interpreters.aio import AsyncInterpreter
from interpreters.core.trace import Trace
from interpreters.observers.logs import LogObserver
from interpreters.sim.simulator import Scripted
from interpreters.testing import AsyncSimulator, Fail, Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.processors.guards.pii import PIIDetector
from pipeline.tools import tool as make_tool
from pipeline.tools.context import ToolContext
from pipeline.values.chunks import Finish, ModelFinish, StepFinish, TextDelta, ToolCall, Usage
from pipeline.values.messages import (
    DataPart,
    FilePart,
    Message,
    ReasoningPart,
    ServerToolCallPart,
    ServerToolResultPart,
    SourcePart,
    StepStartPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    user,
)
from pipeline.values.model import ModelRequest
from pipeline.values.result import StepResult
from tests.helpers import BatchedScriptedModel

ARGS = {"city": ["Paris", {"nested": True}]}  # a tracked dict: its holder would be too
REQUEST = ModelRequest(
    model="m", system=(), messages=(user("hi", id="u1"),), provider_options={"a": [1]}
)

PARTS = (
    TextPart("hi"),
    ReasoningPart("hmm", signature="s"),
    ToolCallPart("c1", "weather", ARGS),
    ToolResultPart("c1", "weather", {"temps": [1, 2]}),
    ServerToolCallPart("s1", "web_search", ARGS),
    ServerToolResultPart("s1", "web_search", [{"url": "u"}]),
    FilePart("image/png", "aGk="),
    SourcePart("src1", "https://example.com"),
    StepStartPart(0),
    DataPart("data-note", {"list": [1]}),
)

VALUES = [
    ModelFinish("stop", Usage(1, 2), "resp-1", None),
    StepFinish(0, "stop", Usage(1, 2)),
    Finish("stop", Usage(1, 2)),
    ToolCall("c1", "weather", ARGS),
    ToolCallPart("c1", "weather", ARGS),
    REQUEST,
    CallModel(REQUEST, 0, 0),
    call("weather", city=["Paris"]),  # the simulator's scripted responses
    Say("hi", calls=[call("weather", city=["Paris"])]),
    Fail(status=503, retry_after=1.0, message="x", body="{}"),
    Pull((TextDelta("t", "hi"), ToolCall("c1", "weather", ARGS))),
    Publish((TextDelta("t", "hi"), ToolCall("c1", "weather", ARGS))),
    # what a run keeps in its history: every kind of part, the message, the step
    *PARTS,
    Message(id="a1", role="assistant", parts=PARTS, metadata={"k": [1]}),
    StepResult(step_number=0, model="m", text="hi", reasoning="", tool_calls=(PARTS[2],),
               tool_results=(PARTS[3],), sources=(PARTS[7],), finish_reason="stop",
               usage=Usage(1, 2)),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_a_value_a_run_makes_or_keeps_is_not_tracked_by_the_collector(value: object) -> None:
    assert not gc.is_tracked(value)


def test_what_they_hold_is_still_collected_as_usual() -> None:
    # The dict inside stays tracked; a value holding it keeps it alive as any reference.
    args: dict[str, object] = {"x": []}
    call = ToolCall("c1", "t", args)
    assert gc.is_tracked(args)
    del args
    gc.collect()
    assert call.args == {"x": []}


def test_what_a_run_keeps_across_its_waits_is_untracked_but_its_state_and_config() -> None:
    # The small objects a waiting run holds (its ids, tool-call ids, what the stream hooks
    # saw, what leaves it, its step's tools, what it spent) are private to the run and
    # refer to nothing that refers back: untracked even holding tracked values. The run's
    # state and configuration (a user's context, processors' states) stay tracked.
    from pipeline.loop.state import CallIds, Ids, LeavingResults, RunState, SeenChunks
    from pipeline.tools import StepTools
    from pipeline.values.messages import MessageList
    from pipeline.values.result import Spending

    ml = MessageList.of([user("hi", id="u1")])
    tools = StepTools()
    tools.by_name((make_tool(_lookup, name="lookup"),))
    leaving = LeavingResults()
    leaving.calls_changed({"c1": ToolCallPart("c1", "weather", ARGS)})
    kept = [Ids("r"), CallIds(ml, {"c1"}), leaving, SeenChunks.fresh(2, True), tools,
            Spending(1, Usage(1, 2))]
    for value in kept:
        assert not gc.is_tracked(value), type(value).__name__
    st = RunState(Ids("r"), ml, [], cost_known=False, seen=SeenChunks.fresh(0, False),
                  ids_used=set())
    assert gc.is_tracked(st)


# --- no run leaves a cycle behind --------------------------------------------------------
# A cycle through an untracked value is never collected. None of the library's own
# references make one (a value refers to nothing that refers back to it: no result, trace,
# observer, traceback or stream is held by one); these runs would leak if one did: each
# kind of run many times, every tracked object counted before and after.

RUNS = 40


def _lookup(city: str) -> dict[str, object]:
    """A JSON result."""
    return {"city": city, "temps": [1, 2, 3]}


def _broken(city: str) -> str:
    """Raises: its traceback passes through the interpreter's frames."""
    raise ValueError(f"no {city}")


def _writer(city: str, ctx: ToolContext[None]) -> str:
    """Writes a data chunk through its context."""
    ctx.writer.custom("data-note", {"city": city, "list": [city]})
    return city


def _agent() -> Agent:
    return Agent.create(
        "m",
        tools=[make_tool(_lookup, name="lookup"), make_tool(_broken, name="broken"),
               make_tool(_writer, name="writer")],
        output_processors=[PIIDetector()],
        max_api_error_retries=1,
    )


def _script() -> list[Scripted]:
    return [
        Fail(status=503, retry_after=0.0),  # a retried failure
        Say("looking", calls=[call("lookup", city="Paris"), call("broken", city="X"),
                              call("writer", city="Rome")]),
        Say(["mail me at a@b.example", " thanks"], chunk_latency=0.1),
    ]


def _sync_run() -> None:
    sim = Simulator(ScriptedModel(_script()), observers=[LogObserver()])
    assert sim.run(_agent(), "hi").result.status == "finished"  # (traced)


def _sync_timeout() -> None:
    sim = Simulator(ScriptedModel([Say(["a", "b", "c"], chunk_latency=1.0)]))
    assert sim.run(_agent(), "hi", timeout=1.5).result.status == "cancelled"


def _async_run() -> None:
    async def go() -> None:
        sim = AsyncSimulator(ScriptedModel(_script()), observers=[LogObserver()])
        run = await sim.run(_agent(), "hi")
        assert run.result.status == "finished"
        # the interpreter itself, on a stream of batches, read to its end and cut short
        for stop in (False, True):
            model = BatchedScriptedModel(_script(), sizes=(2, 1))
            trace = Trace()
            async with AsyncInterpreter(model, observers=()).stream(
                _agent(), "hi", trace=trace
            ) as s:
                async for _ in s:
                    if stop:
                        break

    anyio.run(go)


@pytest.mark.parametrize("run_once", [_sync_run, _sync_timeout, _async_run],
                         ids=lambda f: f.__name__)
def test_runs_leave_no_uncollectable_cycle(
    run_once: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The runs log (LogObserver) to a handler that keeps nothing: pytest's capture would
    # keep every record, which is no leak of the library's.
    log = logging.getLogger("pipeline")
    monkeypatch.setattr(log, "propagate", False)
    monkeypatch.setattr(log, "handlers", [logging.NullHandler()])
    run_once()
    run_once()  # (caches, first-use imports)
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(RUNS):
        run_once()
    gc.collect()
    grown = len(gc.get_objects()) - before
    # One leaked run would leave dozens of tracked objects (messages, dicts, frames...).
    assert grown < RUNS, f"{grown} tracked objects more after {RUNS} runs"
