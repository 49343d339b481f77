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
def test_quick_mode_measures_plain_durable_and_bare_dbos_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.durable", "--quick", "--pg-url", ""],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    systems = [r["system"] for r in summary["results"]]
    assert systems == [
        "async (plain)", "durable, SQLite", "durable (with_steps), SQLite",
        "DBOS bare, SQLite", "DBOS bare + stream, SQLite",
    ]
    assert all(r["runs"] == summary["params"]["runs"] for r in summary["results"])
    live, with_steps, *bare_rows = summary["results"][1:]
    for lib in (live, with_steps):
        for key, dbos in zip(("dbos", "dbos_stream"), bare_rows, strict=True):
            assert {"per_step_ms", "fixed_per_run_ms"} <= dbos.keys()
            assert lib[f"{key}_bare_per_step_ms"] == dbos["per_step_ms"]
            if dbos["per_step_ms"] > 0:  # a noisy quick run can measure no per-step cost
                ratio = lib["overhead_per_step_ms"] / dbos["per_step_ms"]
                assert lib[f"per_step_ratio_to_{key}"] == pytest.approx(ratio)
    # Statements and writes are counted (they do not move with the load): a live step
    # writes its chunks apart from its record, a with_steps one in the same commit.
    assert live["writes_per_step"] == 2 and with_steps["writes_per_step"] == 1
    assert bare_rows[0]["writes_per_step"] == 1 and bare_rows[1]["writes_per_step"] == 2
    assert with_steps["statements_per_run"] < live["statements_per_run"]
    # A with_steps step sends no more statements than DBOS's bare step (its lookup, the
    # owner read with it, is one; its chunks' row goes with its record), a live one fewer
    # than DBOS's step plus a stream write.
    assert with_steps["statements_per_step"] == bare_rows[0]["statements_per_step"] == 4
    assert live["statements_per_step"] < bare_rows[1]["statements_per_step"]
    # The figures can be reproduced: the timer and the machine's load are stated.
    assert summary["timer"] == "perf_counter"
    assert len(summary["loadavg_start"]) == len(summary["loadavg_end"]) == 3
    assert "load average" in proc.stdout and "timer: wall" in proc.stdout
