"""The documentation site builds with `mkdocs build --strict`: a broken link, a missing
page in the nav, an anchor that is not there or an API reference that does not resolve
fails the build (mkdocs.yml, docs/)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _needs_mkdocs() -> None:
    missing = [m for m in ("mkdocs", "material", "mkdocstrings_handlers.python")
               if importlib.util.find_spec(m.split(".")[0]) is None]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {', '.join(missing)} not installed (the docs extra)")
        pytest.skip(f"{', '.join(missing)} not installed: pip install -e '.[docs]' to "
                    "build the documentation site")


def test_the_site_builds_strict(tmp_path: Path) -> None:
    _needs_mkdocs()
    site = tmp_path / "site"
    done = subprocess.run(
        # Not --quiet: it hides the warnings, and strict mode counts only those it logs.
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Write a processor" in home  # the README's tour, included
    api = (site / "api" / "pipeline" / "index.html").read_text(encoding="utf-8")
    assert 'id="pipeline.Agent"' in api and 'id="pipeline.Processor"' in api
    # Each face's reference leads with what apps use, not with type aliases.
    for page, first in (("pipeline", "pipeline.Agent"),
                        ("interpreters", "interpreters.SyncInterpreter"),
                        ("processors", "pipeline.processors.PIIDetector")):
        text = (site / "api" / page / "index.html").read_text(encoding="utf-8")
        assert re.findall(r'<h[23] id="([\w.]+)"', text)[0] == first
    assert api.index('id="pipeline.Agent"') < api.index('id="pipeline.InputResult"')
    assert (site / "img" / "studio.png").is_file()


def test_every_page_is_in_the_nav() -> None:
    import yaml

    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = yaml.safe_load(config)["nav"]

    def pages(item: object) -> list[str]:
        if isinstance(item, str):
            return [item]
        if isinstance(item, dict):
            return [p for v in item.values() for p in pages(v)]
        if isinstance(item, list):
            return [p for v in item for p in pages(v)]
        return []

    listed = set(pages(nav))
    on_disk = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk == listed
