"""bench.recall's smoke mode runs, so its code cannot rot. No timing is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.slow
def test_smoke_mode_measures_the_scan_and_the_index_at_every_size() -> None:
    pytest.importorskip("usearch.index")
    proc = subprocess.run(
        [sys.executable, "-m", "bench.recall", "--smoke"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    rows: list[dict[str, Any]] = summary["results"]
    assert [r["vectors"] for r in rows] == summary["params"]["sizes"]
    for r in rows:
        assert all(r[k] > 0 for k in ("exact_ms", "hnsw_ms", "build_s", "index_mib"))
        assert 0.0 <= r["recall_at_5"] <= 1.0
