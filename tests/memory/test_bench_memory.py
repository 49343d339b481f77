"""bench.memory's quick mode runs, so its code cannot rot. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.slow
def test_quick_mode_measures_every_store_at_every_size(pgvector_url: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.memory", "--quick", "--pg-url", pgvector_url],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    rows: list[dict[str, Any]] = summary["results"]
    systems = ["SQLite (numpy scan)", "SQLite (python scan)", "SQLite (HNSW index)",
               "PostgreSQL + pgvector"]  # (usearch, the HNSW row's, is in the dev extra)
    sizes = summary["params"]["sizes"]
    assert [(r["system"], r["messages"]) for r in rows] == [
        (s, n) for n in sizes for s in systems]
    for r in rows:
        assert r["runs"] == summary["params"]["runs"]
        # medians each: the parts' need not add up to the total's
        assert all(r[k] > 0 for k in ("history_ms", "recall_ms", "save_ms", "total_ms"))
        assert r["growth_vs_smallest"] > 0
    assert summary["timer"] == "perf_counter"
    assert len(summary["loadavg_start"]) == len(summary["loadavg_end"]) == 3
