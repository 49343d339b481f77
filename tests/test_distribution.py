"""This library's `pipeline` and `effects` are also names on PyPI: another distribution's
package of either name, found first, fails `import interpreters` with a message that
names it and the fix, instead of a puzzling "cannot import name"."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def _foreign(site: Path, name: str, dist: str) -> None:
    """Another distribution `dist` (1.0) providing a top-level package `name` in `site`."""
    (site / name).mkdir()
    (site / name / "__init__.py").write_text('VERSION = "1.0"\n')
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "top_level.txt").write_text(f"{name}\n")
    (info / "RECORD").write_text(f"{name}/__init__.py,,\n{info.name}/METADATA,,\n")


def _import(code: str, *path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (*path, SRC))}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
    )


@pytest.mark.slow
@pytest.mark.parametrize(("name", "dist"), [("pipeline", "pipeline"), ("effects", "effects")])
def test_another_distributions_package_first_on_the_path_fails_the_import_clearly(
    tmp_path: Path, name: str, dist: str
) -> None:
    _foreign(tmp_path, name, dist)
    done = _import("import interpreters", tmp_path)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("interpreters.core.distribution.ShadowedPackageError: ")
    assert f"`import {name}` loads {tmp_path / name / '__init__.py'}" in last
    assert f"the distribution '{dist}'" in last
    assert f"pip uninstall {dist}" in last
    assert "pip install --force-reinstall pipeline-agents" in last


@pytest.mark.slow
def test_an_already_imported_foreign_package_is_refused_too(tmp_path: Path) -> None:
    _foreign(tmp_path, "effects", "effects")
    done = _import("import effects\nimport interpreters", tmp_path)
    assert done.returncode != 0
    assert "ShadowedPackageError: `import effects` loads" in done.stderr


@pytest.mark.slow
def test_our_own_packages_import_beside_an_unrelated_one(tmp_path: Path) -> None:
    _foreign(tmp_path, "unrelated", "unrelated")
    done = _import("import interpreters, pipeline, effects; print(pipeline.__distribution__)",
                   tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pipeline-agents"


def test_the_command_is_declared_under_both_names() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["pipeline"] == "interpreters.cli:main"
    assert scripts["pipeline-agents"] == scripts["pipeline"]
