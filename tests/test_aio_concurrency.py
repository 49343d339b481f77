"""Concurrency under the async interpreter: concurrent tools, backpressure, many runs."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
import pytest

from effects import Abort, Continue, Emit, Out
from interpreters.aio import AsyncInterpreter
from interpreters.core.trace import Trace
from interpreters.sim.clock import until_idle
from interpreters.testing import Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.processor import (
    OutputStepArgs,
    OutputStepResult,
    StatefulProcessor,
    StreamArgs,
    StreamResult,
)
from pipeline.tools import make_tool
from pipeline.values.chunks import DataChunk, Finish, TextDelta, ToolResult
from pipeline.values.model import ModelRequest
from pipeline.values.result import RunResult
from tests.helpers import AsyncTrackedModel

pytestmark = pytest.mark.anyio


async def test_tool_calls_of_one_step_run_concurrently_and_report_in_call_order() -> None:
    finished: list[str] = []
    fast_done = anyio.Event()
    mid_done = anyio.Event()

    async def slow(x: int) -> str:
        """Waits for the others: deadlocks if the calls ran one after another."""
        await fast_done.wait()
        await mid_done.wait()
        finished.append("slow")
        return f"slow {x}"

    async def fast(x: int) -> str:
        """Returns at once."""
        finished.append("fast")
        fast_done.set()
        return f"fast {x}"

    async def mid(x: int) -> str:
        """Waits for fast."""
        await fast_done.wait()
        finished.append("mid")
        mid_done.set()
        return f"mid {x}"

    agent = Agent.create("m", tools=[make_tool(slow), make_tool(fast), make_tool(mid)])
    model = ScriptedModel([
        Say(calls=[call("slow", x=1), call("fast", x=2), call("mid", x=3)]), Say("done")
    ])
    trace = Trace()
    with anyio.fail_after(10):  # a safety net: sequential calls would deadlock
        result = await AsyncInterpreter(model).run(agent, "go", trace=trace)
    assert finished == ["fast", "mid", "slow"]
    assert [r.result for r in result.steps[0].tool_results] == ["slow 1", "fast 2", "mid 3"]
    assert [c.tool_name for c in trace.chunks if isinstance(c, ToolResult)] == [
        "slow", "fast", "mid"
    ]
    tool_msg = result.messages.messages[2]
    assert [p.tool_call_id for p in tool_msg.tool_results()] == [
        "call_0_0", "call_0_1", "call_0_2"
    ]
    # the next request carries the results in call order too
    assert [p.tool_name for p in model.requests[1].messages[2].tool_results()] == [
        "slow", "fast", "mid"
    ]


async def test_sync_tools_in_worker_threads_run_concurrently() -> None:
    barrier = threading.Barrier(2, timeout=10)

    def left() -> str:
        """Meets right."""
        barrier.wait()
        return "left"

    def right() -> str:
        """Meets left."""
        barrier.wait()
        return "right"

    agent = Agent.create("m", tools=[left, right])
    model = ScriptedModel([Say(calls=[call("left"), call("right")]), Say("ok")])
    result = await AsyncInterpreter(model, tools_in_threads=True).run(agent, "go")
    assert [(r.result, r.is_error) for r in result.steps[0].tool_results] == [
        ("left", False), ("right", False)
    ]


async def test_one_failing_concurrent_tool_does_not_disturb_the_others() -> None:
    async def good(x: int) -> int:
        """Doubles."""
        await anyio.lowlevel.checkpoint()
        return 2 * x

    async def bad(x: int) -> int:
        """Fails."""
        await anyio.lowlevel.checkpoint()
        raise KeyError(x)

    agent = Agent.create("m", tools=[make_tool(good), make_tool(bad)])
    model = ScriptedModel([
        Say(calls=[call("good", x=1), call("bad", x=2), call("good", x=3)]), Say("ok")
    ])
    result = await AsyncInterpreter(model).run(agent, "go")
    assert [(r.result, r.is_error) for r in result.steps[0].tool_results] == [
        (2, False), ("KeyError: 2", True), (6, False)
    ]
    assert result.status == "finished"


LONG = [Say([f"t{i} " for i in range(2000)])]


async def test_a_slow_consumer_holds_the_model_back() -> None:
    model = AsyncTrackedModel(LONG)
    stream = AsyncInterpreter(model).stream(Agent.create("m"), "go")
    received = 0
    lead = 0
    async with stream:
        async for _ in stream:
            received += 1
            lead = max(lead, model.produced - received)
            await until_idle()  # every chance for an eager producer to run ahead
    assert lead <= 1
    assert model.produced == len(LONG[0].events(0))
    assert stream.result.text == "".join(f"t{i} " for i in range(2000))


async def test_a_consumer_that_stops_reading_stops_the_model() -> None:
    model = AsyncTrackedModel(LONG)
    stream = AsyncInterpreter(model).stream(Agent.create("m"), "go")
    async for c in stream:
        if isinstance(c, TextDelta):
            break
    produced = model.produced
    await until_idle()  # the model could go on now, were it not held back
    assert model.produced == produced == 2
    assert model.closed == 0  # still open: the consumer may come back
    assert isinstance(await stream.__anext__(), TextDelta)
    await stream.aclose()
    assert model.closed_early == 1
    assert stream.result.text == "t0 t1 "


class Counter(StatefulProcessor[int]):
    """Counts the chunks of its run and reports the count with the finish chunk."""

    id = "counter"

    def initial_state(self) -> int:
        return 0

    def process_output_stream(self, args: StreamArgs[int]) -> StreamResult[int]:
        n = args.state + 1
        if isinstance(args.part, Finish):
            return Out(Emit((DataChunk("data-count", n),)), n)
        return Out(Continue(), n)


class OnceGuard(StatefulProcessor[bool]):
    """Rejects the first response of its run, once."""

    id = "once"

    def initial_state(self) -> bool:
        return False

    def process_output_step(self, args: OutputStepArgs[bool]) -> OutputStepResult[bool]:
        if not args.state:
            return Out(Abort("again", retry=True), True)
        return Continue()


def echo(text: str) -> str:
    """Echoes."""
    return f"got {text}"


@pytest.mark.slow  # 2000 runs, twice
async def test_two_thousand_concurrent_runs_share_nothing() -> None:
    n_runs = 2000
    in_flight = 0
    peak = 0

    async def tick(_seconds: float) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await anyio.lowlevel.checkpoint()
        in_flight -= 1

    def script(request: ModelRequest) -> Say:
        prompt = request.messages[0].text
        results = [p for m in request.messages for p in m.tool_results()]
        if not results:
            return Say(calls=[call("echo", text=prompt)], latency=0.001)
        return Say(["echo: ", prompt, " / ", str(results[0].result)], latency=0.001)

    model = ScriptedModel(script, async_sleep=tick)
    agent = Agent.create("m", tools=[echo], output_processors=[Counter(), OnceGuard()])
    interp = AsyncInterpreter(model)
    results: dict[int, tuple[RunResult, Trace]] = {}

    async def one(i: int) -> None:
        trace = Trace()
        results[i] = (await interp.run(agent, f"p{i}", trace=trace), trace)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(n_runs):
                tg.start_soon(one, i)
    assert peak > 1  # the runs really interleaved
    run_ids: set[str] = set()
    counts: set[object] = set()
    for i, (r, trace) in results.items():
        assert r.status == "finished"
        assert r.text == f"echo: p{i} / got p{i}"
        assert r.retry_count == 1
        run_id = r.messages.messages[-1].id.rsplit("-", 1)[0]
        assert all(m.id.startswith(run_id) for m in r.messages.messages)
        run_ids.add(run_id)
        counts.update(c.data for c in trace.chunks if isinstance(c, DataChunk)
                      and c.name == "data-count")
    assert len(run_ids) == n_runs
    assert len(counts) == 1  # every run counted only its own chunks
    assert len(model.requests) == 3 * n_runs
