"""Tools with a context: the run's deps, the run context, a writer for data-* chunks;
tools returning `returns` Results; `RunResult.to_result()`."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.lowlevel
import msgspec
import pytest
from returns.future import future_safe
from returns.result import Failure, Result, Success, safe

from effects import Continue, Replace
from interpreters.testing import (
    AsyncSimulator,
    Say,
    ScriptedModel,
    Simulator,
    call,
    numbered_run_ids,
)
from pipeline.processor import InputArgs, InputResult, StreamArgs, StreamResult, processor
from pipeline.tools.context import ToolContext, ToolWriterFull
from pipeline.values.chunks import DataChunk, ToolError, ToolResult
from pipeline.values.context import RunContext
from pipeline.values.messages import DataPart
from pipeline.values.result import RunFailedError
from tests.helpers import data_chunks, make_agent


class Deps(msgspec.Struct, frozen=True):
    user: str
    db: dict[str, int]


def lookup(key: str, ctx: ToolContext[Deps]) -> int:
    """Look a key up in the caller's database."""
    ctx.writer.custom("data-progress", {"key": key, "user": ctx.deps.user}, transient=True)
    ctx.writer.custom("data-found", {"key": key, "run": ctx.run.run_id})
    return ctx.deps.db[key]


SCRIPT = [Say(calls=[call("lookup", key="a")]), Say("done")]


def _sim(script: list[Say] | None = None) -> Simulator:
    return Simulator(ScriptedModel(script or SCRIPT), run_ids=numbered_run_ids())


def test_the_context_parameter_is_not_in_the_schema() -> None:
    agent = make_agent(tools=[lookup])
    props = agent.tools[0].spec.parameters["properties"]
    assert isinstance(props, dict)
    assert set(props) == {"key"}
    assert agent.tools[0].spec.parameters["required"] == ["key"]


def test_a_tool_gets_the_runs_deps_and_context() -> None:
    agent = make_agent(tools=[lookup])
    sim = _sim()
    ran = sim.run(agent, "hi", deps=Deps("ann", {"a": 7}))
    (res,) = [p for m in ran.result.messages.messages for p in m.tool_results()]
    assert res.result == 7 and not res.is_error


def test_one_agent_serves_runs_with_different_deps() -> None:
    agent = make_agent(tools=[lookup])
    for value in (1, 2):
        ran = _sim().run(agent, "hi", deps=Deps("ann", {"a": value}))
        (res,) = [p for m in ran.result.messages.messages for p in m.tool_results()]
        assert res.result == value


def test_deps_of_the_wrong_type_are_refused_before_the_run() -> None:
    agent = make_agent(tools=[lookup])
    with pytest.raises(TypeError, match="Deps"):
        _sim().run(agent, "hi", deps="not deps")


def test_hooks_see_the_same_deps() -> None:
    seen: list[Deps] = []

    def remember(args: InputArgs[None]) -> InputResult[None]:
        seen.append(args.context.deps_as(Deps))
        return Continue()

    agent = make_agent(tools=[lookup], input_processors=[processor("r", process_input=remember)])
    deps = Deps("ann", {"a": 1})
    _sim().run(agent, "hi", deps=deps)
    assert seen == [deps]
    with pytest.raises(TypeError, match="int"):
        RunContext(run_id="r", deps=deps).deps_as(int)


def test_written_chunks_reach_the_consumer_in_order_before_the_result() -> None:
    agent = make_agent(tools=[lookup])
    ran = _sim().run(agent, "hi", deps=Deps("ann", {"a": 7}))
    tool_chunks = [
        c for c in ran.trace.chunks if isinstance(c, DataChunk | ToolResult | ToolError)
    ]
    assert [type(c).__name__ + ":" + getattr(c, "name", "") for c in tool_chunks] == [
        "DataChunk:data-progress",
        "DataChunk:data-found",
        "ToolResult:",
    ]


def test_non_transient_chunks_are_kept_with_the_tool_result() -> None:
    agent = make_agent(tools=[lookup])
    ran = _sim().run(agent, "hi", deps=Deps("ann", {"a": 7}))
    tool_msg = next(m for m in ran.result.messages.messages if m.role == "tool")
    data = [p for p in tool_msg.parts if isinstance(p, DataPart)]
    assert data == [DataPart("data-found", {"key": "a", "run": "run1"})]
    # the next request still pairs every call with its result
    assert ran.result.status == "finished"


def test_written_chunks_pass_through_opted_in_stream_processors_in_list_order() -> None:
    order: list[str] = []

    def tag(label: str) -> Callable[[StreamArgs[None]], StreamResult[None]]:
        def hook(args: StreamArgs[None]) -> StreamResult[None]:
            part = args.part
            if isinstance(part, DataChunk) and part.name == "data-found":
                order.append(label)
                assert isinstance(part.data, dict)
                return Replace(DataChunk(part.name, {**part.data, label: True}))
            return Continue()

        return hook

    agent = make_agent(
        tools=[lookup],
        output_processors=[
            processor("first", process_output_stream=tag("first"), process_data_parts=True),
            processor("blind", process_output_stream=tag("blind")),
            processor("second", process_output_stream=tag("second"), process_data_parts=True),
        ],
    )
    ran = _sim().run(agent, "hi", deps=Deps("ann", {"a": 7}))
    assert order == ["first", "second"]
    (found,) = [c for c in data_chunks(ran.trace.chunks) if c.name == "data-found"]
    assert found.data == {"key": "a", "run": "run1", "first": True, "second": True}
    tool_msg = next(m for m in ran.result.messages.messages if m.role == "tool")
    assert [p.data for p in tool_msg.parts if isinstance(p, DataPart)] == [found.data]


def test_a_writer_is_capped_and_closed_after_the_call() -> None:
    kept: list[ToolContext[None]] = []

    def chatty(n: int, ctx: ToolContext[None]) -> str:
        """Write n chunks."""
        kept.append(ctx)
        for i in range(n):
            ctx.writer.custom("data-n", i)
        return "ok"

    agent = make_agent(tools=[chatty])
    ran = Simulator(ScriptedModel([Say(calls=[call("chatty", n=5000)]), Say("done")])).run(
        agent, "hi"
    )
    (res,) = [p for m in ran.result.messages.messages for p in m.tool_results()]
    assert res.is_error and ToolWriterFull.__name__ in str(res.result)
    with pytest.raises(RuntimeError, match="over"):
        kept[0].writer.custom("data-late", 1)
    with pytest.raises(ValueError, match="data-"):
        ToolContext(deps=None, run=kept[0].run, tool_call_id="x", tool_name="x",
                    writer=type(kept[0].writer)()).writer.custom("progress", 1)


@pytest.mark.anyio
async def test_async_concurrent_tools_write_in_a_deterministic_order() -> None:
    async def slow(label: str, delay: int, ctx: ToolContext[None]) -> str:
        """Write, wait, write."""
        ctx.writer.custom("data-step", f"{label}-1")
        for _ in range(delay):
            await anyio.lowlevel.checkpoint()
        ctx.writer.custom("data-step", f"{label}-2")
        return label

    agent = make_agent(tools=[slow])
    script = [
        Say(calls=[call("slow", label="a", delay=5), call("slow", label="b", delay=0)]),
        Say("done"),
    ]
    ran = await AsyncSimulator(ScriptedModel(script)).run(agent, "hi")
    got = [
        c.data if isinstance(c, DataChunk) else f"result {c.result}"
        for c in ran.trace.chunks
        if isinstance(c, DataChunk | ToolResult)
    ]
    # b finished first, yet a's chunks come first: per call in call order, then results.
    assert got == ["a-1", "a-2", "b-1", "b-2", "result a", "result b"]


@pytest.mark.anyio
async def test_async_runs_take_deps() -> None:
    agent = make_agent(tools=[lookup])
    ran = await AsyncSimulator(ScriptedModel(SCRIPT)).run(agent, "hi", deps=Deps("b", {"a": 3}))
    (res,) = [p for m in ran.result.messages.messages for p in m.tool_results()]
    assert res.result == 3


# --- returns Results ------------------------------------------------------------------


def divide(a: int, b: int) -> Result[float, str]:
    """Divide a by b."""
    return Failure("division by zero") if b == 0 else Success(a / b)


@safe
def parse(text: str) -> int:
    """Parse an integer."""
    return int(text)


def _results(script: list[Say], *tools: object) -> list[tuple[object, bool]]:
    agent = make_agent(tools=list(tools))
    ran = Simulator(ScriptedModel(script)).run(agent, "hi")
    return [(p.result, p.is_error) for m in ran.result.messages.messages for p in m.tool_results()]


def test_success_is_the_result_and_failure_an_error_result() -> None:
    got = _results(
        [Say(calls=[call("divide", a=1, b=2), call("divide", a=1, b=0)]), Say("ok")], divide
    )
    assert got == [(0.5, False), ("division by zero", True)]


def test_safe_works_at_the_tool_boundary() -> None:
    got = _results([Say(calls=[call("parse", text="12"), call("parse", text="x")]), Say("ok")],
                   parse)
    assert got[0] == (12, False)
    assert got[1][1] is True and "ValueError" in str(got[1][0])
    assert "invalid literal" in str(got[1][0])


def test_run_result_to_result() -> None:
    agent = make_agent()
    ok = Simulator(ScriptedModel([Say("fine")])).run(agent, "hi").result
    assert ok.to_result() == Success(ok)
    failed = Simulator(ScriptedModel([Say("x")])).run(
        make_agent(input_processors=[processor("no", process_input=_boom)]), "hi"
    ).result
    res = failed.to_result()
    assert isinstance(res, Failure)
    err = res.failure()
    assert isinstance(err, RunFailedError) and err.result is failed


def _boom(args: InputArgs[None]) -> InputResult[None]:
    raise RuntimeError("boom")


@future_safe
async def fetch(url: str) -> str:
    """Fetch a page."""
    await anyio.lowlevel.checkpoint()
    if not url.startswith("https://"):
        raise ValueError(f"not https: {url}")
    return "<html>"


@pytest.mark.anyio
async def test_future_safe_works_at_the_async_tool_boundary() -> None:
    agent = make_agent(tools=[fetch])
    script = [
        Say(calls=[call("fetch", url="https://a"), call("fetch", url="http://b")]),
        Say("ok"),
    ]
    ran = await AsyncSimulator(ScriptedModel(script)).run(agent, "hi")
    got = [(p.result, p.is_error) for m in ran.result.messages.messages for p in m.tool_results()]
    assert got == [("<html>", False), ("ValueError: not https: http://b", True)]


def test_streams_take_deps_too() -> None:
    agent = make_agent(tools=[lookup])
    with _sim().stream(agent, "hi", deps=Deps("ann", {"a": 5})) as stream:
        names = [c.name for c in stream if isinstance(c, DataChunk)]
    assert names == ["data-progress", "data-found"]
    (res,) = [p for m in stream.result.messages.messages for p in m.tool_results()]
    assert res.result == 5


@pytest.mark.anyio
async def test_async_streams_take_deps_too() -> None:
    agent = make_agent(tools=[lookup])
    sim = AsyncSimulator(ScriptedModel(SCRIPT))
    async with sim.stream(agent, "hi", deps=Deps("ann", {"a": 6})) as stream:
        names = [c.name async for c in stream if isinstance(c, DataChunk)]
    assert names == ["data-progress", "data-found"]
    (res,) = [p for m in stream.result.messages.messages for p in m.tool_results()]
    assert res.result == 6


def test_an_agent_refuses_a_tool_that_needs_deps_of_another_class_than_its_deps_type() -> None:
    with pytest.raises(TypeError, match="tool 'lookup' needs deps of type Deps, the agent's "
                       "deps_type is str"):
        make_agent(tools=[lookup], deps_type=str)
    with pytest.raises(TypeError, match="deps_type must be a class"):
        make_agent(deps_type="Deps")


def test_an_agent_takes_a_tool_whose_deps_its_deps_type_is_or_extends() -> None:
    class MoreDeps(Deps, frozen=True):
        extra: int = 0

    assert make_agent(tools=[lookup], deps_type=MoreDeps).deps_type is MoreDeps
    assert make_agent(tools=[lookup]).deps_type is None
