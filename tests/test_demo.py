"""The README's main command: `pipeline demo` on the simulator."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from interpreters.cli.commands import main
from interpreters.cli.demo import demo_agent, demo_simulator, run_demo


def test_demo_streams_the_whole_run_and_exits_zero() -> None:
    out = io.StringIO()
    assert run_demo(out) == 0
    text = out.getvalue()
    assert "→ get_weather({\"city\": \"Paris\"})" in text
    assert "← get_weather: sunny, 21°C" in text
    assert "judge (process_output_step) asks for a retry" in text
    assert "── step 1, once more ──" in text
    assert "[data-word-count]" in text
    assert "finished: 2 steps, 1 retry" in text
    assert "final answer: Paris is sunny and 21°C today: a fine day for a walk." in text


def test_demo_run_is_deterministic() -> None:
    a = demo_simulator().run(demo_agent(), "What's the weather in Paris?")
    b = demo_simulator().run(demo_agent(), "What's the weather in Paris?")
    assert a.result == b.result
    assert a.trace.comparable() == b.trace.comparable()
    assert a.result.retry_count == 1


@pytest.mark.slow  # a Python subprocess
def test_cli_demo_entry_point() -> None:
    assert main(["demo"]) == 0
    proc = subprocess.run(
        [sys.executable, "-m", "interpreters.cli.commands", "demo"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "final answer:" in proc.stdout
