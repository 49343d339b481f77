"""The README's tour runs as written (its python blocks, in order, in one namespace), and so
does every page of the documentation site: each page's python blocks, in order, in a
copy of the tour's namespace (a page may use the tour's `agent`, `Redact`, `Simulator`...)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), re.S | re.M)


def tour() -> dict[str, object]:
    # dont_inherit: a block runs as a script of its own would, without this file's
    # `from __future__ import annotations` (so msgspec reads its annotations at once).
    ns: dict[str, object] = {"__name__": "readme"}
    for block in python_blocks(README):
        exec(compile(block, str(README), "exec", dont_inherit=True), ns)
    return ns


def test_readme_tour_runs_and_its_asserts_hold() -> None:
    assert len(python_blocks(README)) >= 3
    run = tour()["run"]
    assert getattr(run, "result").status == "finished"  # noqa: B009


def test_the_pages_hold_the_code_that_left_the_readme() -> None:
    # typed output, tools, web streaming, MCP, async, tracing, cost, replay, the tutorial
    assert sum(len(python_blocks(DOCS / p)) for p in PAGES) >= 10


def tour_definitions() -> dict[str, object]:
    """What the tour defines (its `agent`, `get_weather`, `Redact`...), not what it imports:
    a page imports the names it uses, as a reader's own file would."""
    defined: set[str] = set()
    for block in python_blocks(README):
        for node in ast.parse(block).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign):
                defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
    ns = tour()
    return {"__name__": "page", **{n: ns[n] for n in defined}}


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(DOCS / p)
                                  and p != "tutorial.md"])  # tests/test_tutorial.py
def test_a_docs_page_runs_as_written(page: str) -> None:
    ns = tour_definitions()
    path = DOCS / page
    used: set[str] = set()
    bound: set[str] = set()
    for block in python_blocks(path):
        for n in ast.walk(ast.parse(block)):
            if isinstance(n, ast.Name):
                (bound if isinstance(n.ctx, ast.Store) else used).add(n.id)
            elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(n.name)
            elif isinstance(n, ast.arg):
                bound.add(n.arg)
            elif isinstance(n, ast.MatchAs) and n.name is not None:
                bound.add(n.name)
        exec(compile(block, str(path), "exec", dont_inherit=True), ns)
    # A page that goes on from the tour's code says so, where a reader starts.
    if (used - bound) & (set(tour_definitions()) - {"__name__"}):
        assert "(index.md#a-short-tour)" in path.read_text(encoding="utf-8").split("```")[0]
