"""Run by test_tool_base_exceptions in a child process: two concurrent tool calls, one
raising KeyboardInterrupt or SystemExit (`argv`: backend, exception, tool kind); prints
the type of what reached the caller of `run`. A child, because on asyncio such an
exception also stops the event loop itself, which would stop the test session."""

from __future__ import annotations

import sys

import anyio

from interpreters.testing import AsyncSimulator, Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.tools import Tool, make_tool

BACKEND, NAME, KIND = sys.argv[1], sys.argv[2], sys.argv[3]
EXC: type[BaseException] = {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit}[NAME]
seen: list[str] = []


async def aboom() -> str:
    """Raises, asynchronously."""
    await anyio.sleep(0)
    raise EXC("stop")


def boom() -> str:
    """Raises."""
    raise EXC("stop")


async def fine() -> str:
    """Still running when the other tool raises (the raise cancels it)."""
    await anyio.sleep_forever()
    return "ok"


async def main() -> None:
    raising: Tool = make_tool(aboom if KIND == "async" else boom, name="boom")
    model = ScriptedModel([Say("", calls=[call("fine"), call("boom")]), Say("ok")])
    agent = Agent.create("m", tools=[raising, make_tool(fine)])
    try:
        await AsyncSimulator(model).run(agent, "go")
    except BaseException as e:
        seen.append(type(e).__name__)
        raise


try:
    anyio.run(main, backend=BACKEND)
except BaseException as e:
    seen.append(type(e).__name__)
print(" ".join(seen))
