"""The README's tour runs as written (its python blocks, in order, in one namespace)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_tour_runs_and_its_asserts_hold() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 3
    ns: dict[str, object] = {"__name__": "readme"}
    for block in blocks:
        exec(compile(block, str(README), "exec"), ns)
    run = ns["run"]
    assert getattr(run, "result").status == "finished"  # noqa: B009
