"""MCP toolsets: the tools of a real MCP server process (stdio, and streamable HTTP on
127.0.0.1) as tools an agent takes: their schemas, their errors as error results the
model sees, and the server's lifecycle tied to the toolset's `async with`."""

from __future__ import annotations

import inspect
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from interpreters.mcp_tools import MCPToolset, MCPToolsetError
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.tools import Tool

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # slow: each test starts a server process
SERVER = str(Path(__file__).with_name("mcp_server.py"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # trio works too; each test starts a server process, so one is enough


def _stdio() -> MCPToolset:
    return MCPToolset.stdio(sys.executable, [SERVER])


async def _call(tool: Tool, **args: object) -> object:
    """Call an MCP tool's function directly, as the async interpreter does."""
    pending = tool.fn(**args)
    assert inspect.isawaitable(pending)
    return await pending


async def _exited(pid: int) -> None:
    """Return when process `pid` has exited (its pidfd turns readable then)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # gone (and reaped) already
    try:
        await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_stdio_tools_carry_the_servers_schemas() -> None:
    async with _stdio() as toolset:
        tools = {t.name: t for t in toolset.tools}
    assert set(tools) == {"add", "refuse", "slow", "big", "pid"}
    add = tools["add"].spec
    assert add.description == "Add two integers."
    assert add.parameters["type"] == "object"
    props = add.parameters["properties"]
    assert isinstance(props, dict)
    assert {k: v["type"] for k, v in props.items()} == {"a": "integer", "b": "integer"}
    required = add.parameters["required"]
    assert isinstance(required, list) and sorted(required) == ["a", "b"]
    assert all(t.is_async for t in tools.values())


async def test_an_agent_calls_mcp_tools_and_sees_their_errors() -> None:
    model = ScriptedModel([
        Say("Working.", calls=[call("add", a=2, b=3), call("refuse", reason="no"),
                               call("add", a="two", b=3)]),
        Say("Done."),
    ])
    async with _stdio() as toolset:
        run = await AsyncSimulator(model).run(Agent.create("m", tools=toolset.tools), "go")
    assert run.result.status == "finished"
    [ok, refused, invalid] = run.result.steps[0].tool_results
    assert ok.result == 5 and not ok.is_error
    assert refused.is_error and "refused: no" in str(refused.result)
    assert invalid.is_error  # the server validated the arguments
    assert model.requests[1].messages[-1].role == "tool"  # the model saw all three


async def test_a_result_over_the_toolsets_cap_is_an_error_result_the_model_sees() -> None:
    model = ScriptedModel([
        Say("", calls=[call("big", n=50_000), call("big", n=10)]), Say("Done."),
    ])
    async with MCPToolset.stdio(sys.executable, [SERVER], max_result_bytes=1000) as toolset:
        assert {t.max_result_bytes for t in toolset.tools} == {1000}
        agent = Agent.create("m", tools=toolset.tools)
        run = await AsyncSimulator(model).run(agent, "go")
    [over, fine] = run.result.steps[0].tool_results
    assert over.is_error and "50002 bytes" in str(over.result)
    assert "49002 bytes over" in str(over.result) and "x" * 100 not in str(over.result)
    assert fine.result == "x" * 10 and not fine.is_error
    assert [p.is_error for p in model.requests[1].messages[-1].tool_results()] == [True, False]


async def test_the_default_cap_holds_mcp_results_too() -> None:
    model = ScriptedModel([Say("", calls=[call("big", n=2 << 20)]), Say("Done.")])
    async with _stdio() as toolset:
        run = await AsyncSimulator(model).run(Agent.create("m", tools=toolset.tools), "go")
    [over] = run.result.steps[0].tool_results
    assert over.is_error and f"cap of {1 << 20}" in str(over.result)


async def test_a_description_or_schema_over_its_cap_is_a_typed_error_naming_the_tool() -> None:
    with pytest.raises(MCPToolsetError, match=r"'add'.*description of 17 bytes.*cap of 10"):
        async with MCPToolset.stdio(sys.executable, [SERVER], include=["add"],
                                    max_description_bytes=10):
            pass
    with pytest.raises(MCPToolsetError, match=r"'add'.*schema of \d+ bytes.*cap of 20"):
        async with MCPToolset.stdio(sys.executable, [SERVER], include=["add"],
                                    max_schema_bytes=20):
            pass
    for bad in ({"max_result_bytes": 0}, {"max_description_bytes": -1},
                {"max_schema_bytes": 1.5}):
        with pytest.raises((ValueError, TypeError), match=next(iter(bad))):
            MCPToolset.stdio(sys.executable, [SERVER], **bad)


async def test_a_call_past_its_timeout_is_an_error_result() -> None:
    model = ScriptedModel([Say("", calls=[call("slow", seconds=60)]), Say("Gave up.")])
    async with MCPToolset.stdio(sys.executable, [SERVER], call_timeout=0.5) as toolset:
        with anyio.fail_after(30):  # a guard only: the call timeout ends it
            run = await AsyncSimulator(model).run(Agent.create("m", tools=toolset.tools), "go")
    assert run.result.status == "finished"
    [slow] = run.result.steps[0].tool_results
    assert slow.is_error


async def test_prefix_and_include_select_and_rename_tools() -> None:
    async with MCPToolset.stdio(sys.executable, [SERVER], prefix="calc",
                                include=["add"]) as toolset:
        [tool] = toolset.tools
        assert tool.name == "calc_add"
        assert await _call(tool, a=1, b=1) == 2  # the server still gets its own name


async def test_the_server_process_lives_as_long_as_the_toolset() -> None:
    async with _stdio() as toolset:
        [pid_tool] = [t for t in toolset.tools if t.name == "pid"]
        pid = await _call(pid_tool)
        assert isinstance(pid, int) and _alive(pid)
        # the app's lifetime: many runs share the one server
        model = ScriptedModel([Say("a", calls=[call("pid")]), Say("b"),
                               Say("c", calls=[call("pid")]), Say("d")])
        sim = AsyncSimulator(model)
        agent = Agent.create("m", tools=toolset.tools)
        first, second = await sim.run(agent, "1"), await sim.run(agent, "2")
        assert first.result.steps[0].tool_results[0].result == pid
        assert second.result.steps[0].tool_results[0].result == pid
    with anyio.fail_after(10):  # a cap only
        await _exited(pid)
    # a tool of a closed toolset is an error result, not a hang
    with pytest.raises(MCPToolsetError, match="closed"):
        await _call(pid_tool)


async def test_a_server_that_cannot_start_is_a_typed_error() -> None:
    with pytest.raises(MCPToolsetError, match="could not connect"):
        async with MCPToolset.stdio(sys.executable, ["-c", "import sys; sys.exit(3)"],
                                    connect_timeout=10):
            pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    # Bound and listening here, served by the child: a client connects at once (its
    # connection waits in the backlog until the server accepts it).
    listening = socket.create_server(("127.0.0.1", 0))
    port = int(listening.getsockname()[1])
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(listening.fileno())],
                            pass_fds=(listening.fileno(),),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    listening.close()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


async def test_streamable_http_tools(http_server: str) -> None:
    model = ScriptedModel([Say("", calls=[call("add", a=40, b=2)]), Say("42.")])
    async with MCPToolset.http(http_server) as toolset:
        assert {t.name for t in toolset.tools} == {"add", "refuse", "slow", "big", "pid"}
        run = await AsyncSimulator(model).run(Agent.create("m", tools=toolset.tools), "go")
    assert run.result.steps[0].tool_results[0].result == 42


async def test_an_http_server_that_is_not_there_is_a_typed_error() -> None:
    url = f"http://127.0.0.1:{_free_port()}/mcp"
    with pytest.raises(MCPToolsetError, match="could not connect"):
        async with MCPToolset.http(url, connect_timeout=5):
            pass
