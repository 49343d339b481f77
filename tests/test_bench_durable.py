"""bench.durable's quick mode runs, so its code cannot rot. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_mode_measures_plain_and_durable_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.durable", "--quick", "--pg-url", ""],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    systems = [r["system"] for r in summary["results"]]
    assert systems == ["async (plain)", "durable, SQLite"]
    assert all(r["runs"] == summary["params"]["runs"] for r in summary["results"])
