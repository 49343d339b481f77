"""The tutorial runs as written: its python blocks, in order, as one script, in a fresh
directory (HTTP on loopback, the model scripted); every other block is marked shell
(`sh`) or output (`text`); what the blocks import, the install line brings. And the
topic pages each open with a short example, every docs block fits 88 columns."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TUTORIAL = DOCS / "tutorial.md"
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.S | re.M)
KINDS = {"python": "run", "sh": "shell", "text": "output"}
"""How a block is marked: `python` runs, `sh` is a shell command, `text` is output."""
WIDTH = 88


def blocks(path: Path) -> list[tuple[str, str]]:
    """Each fenced block of a page: its language and its body, in order."""
    return [(m[1], m[2]) for m in FENCE.finditer(path.read_text(encoding="utf-8"))]


def python_blocks(path: Path) -> list[str]:
    return [body for lang, body in blocks(path) if lang == "python"]


def test_every_block_of_the_tutorial_is_marked_as_code_shell_or_output() -> None:
    found = blocks(TUTORIAL)
    assert [lang for lang, _ in found if lang not in KINDS] == []
    assert sum(lang == "python" for lang, _ in found) >= 10


def test_the_tutorial_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvicorn")
    monkeypatch.chdir(tmp_path)  # shop.db, journals/: where a user runs the script
    monkeypatch.syspath_prepend(str(ROOT))  # the clone's root: `examples` imports
    # As a script of its own would (no `from __future__` of this file), not as __main__:
    # the last block's server is not started.
    ns: dict[str, object] = {"__name__": "tutorial"}
    for i, block in enumerate(python_blocks(TUTORIAL)):
        code = compile(block, f"{TUTORIAL}:block{i + 1}", "exec", dont_inherit=True)
        exec(code, ns)
    assert (tmp_path / "shop.db").is_file()
    assert (tmp_path / "journals" / "support-tutorial.json").is_file()
    # The production app is built (not served: its model is a real provider's).
    production_app = ns["production_app"]
    assert callable(production_app)
    app, kept = production_app()
    assert callable(app)
    kept.close()


def _imported(block: str) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(block)):
        if isinstance(node, ast.Import):
            out.update(a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.partition(".")[0])
    return out


def _dist(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("-", "_")


def test_the_install_line_brings_what_the_blocks_import() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installs = [line for lang, body in blocks(TUTORIAL) if lang == "sh"
                for line in body.splitlines() if line.startswith("pip install")]
    assert installs, "the tutorial says what to install"
    brought = {_dist(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    for line in installs:
        for word in line.split()[2:]:
            word = word.strip("\"'")
            if word.startswith("-"):
                continue
            named = re.fullmatch(r"\.\[([\w,-]+)\]", word)
            if named:
                for extra in named[1].split(","):
                    assert extra in extras, f"no extra {extra!r}"
                    brought |= {_dist(r) for r in extras[extra]}
            else:
                brought.add(_dist(word))
    ours = {"effects", "pipeline", "interpreters", "examples"}
    used = set().union(*(_imported(b) for b in python_blocks(TUTORIAL)))
    third_party = used - ours - set(sys.stdlib_module_names)
    assert third_party - brought == set()


def test_the_tutorial_has_no_top_level_await_outside_asyncio_run() -> None:
    for block in python_blocks(TUTORIAL):
        ast.parse(block)  # a top-level await is a SyntaxError in a script


TOPICS = [p for p in re.findall(r"^\s+- [^:]+: (\S+\.md)$",
                                (ROOT / "mkdocs.yml").read_text(), re.M)
          if not p.startswith("api/")
          and p not in ("index.md", "tutorial.md", "benchmarks.md")]
"""The topic pages of the site (the nav's Topics and Project sections, not the home
page, the API reference, the tutorial or the benchmarks' figures)."""


@pytest.mark.parametrize("page", [p for p in TOPICS if p not in ("DESIGN.md", "layout.md")])
def test_a_topic_page_opens_with_a_short_example_before_the_prose(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    head = text.split("\n## ", 1)[0]  # the page's opening, before its first section
    opening = FENCE.search(head)
    assert opening is not None and opening[1] in ("python", "sh"), (
        f"{page} opens with no example")
    assert len(opening[2].splitlines()) <= 40, f"{page}'s opening example is not short"
    prose_before = head[:opening.start()].split("\n", 1)[1].strip()
    assert len(prose_before) <= 700, f"{page} says too much before its example"


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix()
                                        for p in DOCS.rglob("*.md")))
def test_code_in_the_docs_fits_the_page(page: str) -> None:
    wide = [line for lang, body in blocks(DOCS / page) if lang != "text"
            for line in body.splitlines() if len(line) > WIDTH]
    assert wide == []


@pytest.mark.slow
def test_the_tutorial_type_checks_as_a_users_script_would(tmp_path: Path) -> None:
    # A user types the tutorial into a file of their own and runs mypy --strict on it.
    from mypy import api

    script = tmp_path / "support_assistant.py"
    script.write_text("\n".join(python_blocks(TUTORIAL)), encoding="utf-8")
    out, err, status = api.run(["--strict", "--no-error-summary", str(script)])
    assert (out, err, status) == ("", "", 0)
