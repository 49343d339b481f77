"""A tool raising KeyboardInterrupt or SystemExit stops the run with that exception as
itself, not wrapped in an exception group by the task group running concurrent tools,
on asyncio and on trio, for async tools and sync ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from interpreters.sync import SyncInterpreter
from interpreters.testing import Say, ScriptedModel, Simulator, call
from pipeline.agent import Agent
from pipeline.tools import make_tool

CHILD = str(Path(__file__).with_name("base_exception_run.py"))


@pytest.mark.parametrize("kind", ["async", "sync"])
@pytest.mark.parametrize("exc", ["KeyboardInterrupt", "SystemExit"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_tools_keyboard_interrupt_or_system_exit_propagates_as_itself(
    backend: str, exc: str, kind: str
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, CHILD, backend, exc, kind],
        capture_output=True, text=True, timeout=60, env=env, check=True,
    )
    # what `run` raised, then what left the event loop: the exception itself, both times
    assert out.stdout.split() == [exc, exc], out.stdout + out.stderr


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_the_sync_interpreters_let_them_propagate_as_themselves(
    exc: type[BaseException],
) -> None:
    def boom() -> str:
        """Raises."""
        raise exc("stop")

    def fine() -> str:
        """Answers."""
        return "ok"

    agent = Agent.create("m", tools=[make_tool(fine), make_tool(boom)])
    for run in (
        lambda model: Simulator(model).run(agent, "go"),
        lambda model: SyncInterpreter(model).run(agent, "go"),
    ):
        model = ScriptedModel([Say("", calls=[call("fine"), call("boom")]), Say("ok")])
        with pytest.raises(exc) as caught:
            run(model)
        assert type(caught.value) is exc
