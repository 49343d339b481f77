"""What the docs say about the code's files holds: every source path they name exists, so
a move or a rename cannot leave the design or the layout describing another tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
_PATH = re.compile(r"(?<![\w./-])((?:src/)?(?:effects|pipeline|interpreters)(?:/[\w.]+)+/?)")


def _named(doc: Path) -> set[str]:
    return {m.rstrip(".") for m in _PATH.findall(doc.read_text())}


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_every_source_path_the_docs_name_exists(doc: Path) -> None:
    missing = []
    for path in sorted(_named(doc)):
        rel = path if path.startswith("src/") else f"src/{path}"
        if not (ROOT / rel).exists():
            missing.append(path)
    assert missing == []


def test_the_check_reads_the_paths_of_the_design() -> None:
    named = _named(ROOT / "docs" / "DESIGN.md")
    assert "pipeline/loop/hooks.py" in named
    assert len(named) >= 10
