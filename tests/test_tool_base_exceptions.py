"""A tool raising KeyboardInterrupt or SystemExit stops the run with that exception as
itself, not wrapped in an exception group by the task group running concurrent tools,
on asyncio and on trio, for async tools and sync ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
