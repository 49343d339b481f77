"""examples/durable_run.py as docs/durable.md runs it: crash after the refund, run again, the
run finishes and the refund is not made twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def example(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    return subprocess.run(
        [sys.executable, "-m", "examples.durable_run", "--db", db, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.slow
def test_the_example_resumes_after_a_crash_without_refunding_twice(tmp_path: Path) -> None:
    crashed = example(tmp_path, "--crash")
    assert crashed.returncode == 9, crashed.stderr[-2000:]
    assert crashed.stderr.count("REFUNDING 1042") == 1
    resumed = example(tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert resumed.stdout.strip() == "Done: order 1042 is refunded."
    assert "REFUNDING" not in resumed.stderr
    again = example(tmp_path)  # the same run id: nothing runs, the same answer
    assert again.stdout == resumed.stdout and "REFUNDING" not in again.stderr
