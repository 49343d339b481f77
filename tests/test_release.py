"""The release: `python -m build` makes a wheel and an sdist holding everything the code
reads at run time (every module, every `py.typed`, the injection classifier's weights,
the studio's page), `twine check` passes them, and the version has one source: the
distribution's metadata, which `pipeline.__version__` and `pipeline --version` read."""

from __future__ import annotations

import importlib.metadata
import io
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from contextlib import redirect_stdout
from pathlib import Path

import pytest

import pipeline
from interpreters.cli import main

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGES = ("effects", "pipeline", "interpreters")


def _runtime_files() -> set[str]:
    """What the installed code reads: its modules and the data files beside them."""
    found: set[str] = set()
    for package in PACKAGES:
        for path in (SRC / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                found.add(path.relative_to(SRC).as_posix())
    return found


def test_the_version_is_the_metadatas_everywhere() -> None:
    meta = importlib.metadata.version("pipeline-agents")
    assert pipeline.__version__ == meta
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert out.getvalue().strip() == f"pipeline {meta}"


def test_what_the_code_reads_at_run_time_is_in_the_source_tree() -> None:
    files = _runtime_files()
    for package in PACKAGES:
        assert f"{package}/py.typed" in files
    assert "pipeline/processors/guards/injection_model.json.gz" in files
    assert {"interpreters/cli/studio_static/index.html",
            "interpreters/cli/studio_static/studio.js"} <= files


@pytest.mark.slow
def test_the_wheel_and_the_sdist_hold_everything_the_code_reads(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    [wheel] = tmp_path.glob("*.whl")
    [sdist] = tmp_path.glob("*.tar.gz")
    assert wheel.name == f"pipeline_agents-{version}-py3-none-any.whl"
    wanted = _runtime_files()
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = f"pipeline_agents-{version}.dist-info"
        metadata = z.read(f"{info}/METADATA").decode()
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    assert wanted - names == set()
    # Nothing but the three packages and the distribution's metadata.
    assert {n.split("/")[0] for n in names} == {*PACKAGES, info}
    assert f"\nVersion: {version}\n" in metadata
    assert "Provides-Extra: agui" in metadata
    assert "pipeline = interpreters.cli:main" in entry_points
    assert "pipeline_agents = interpreters.sim.pytest_plugin" in entry_points
    with tarfile.open(sdist) as t:
        top = f"pipeline_agents-{version}"
        in_sdist = {n.removeprefix(f"{top}/") for n in t.getnames()}
    assert {f"src/{f}" for f in wanted} - in_sdist == set()
    assert {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md"} <= in_sdist
    checked = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
        capture_output=True, text=True, timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_simulators_import_without_pytest() -> None:
    # pytest is no dependency: a user's script on the simulator must not need it.
    code = ("import sys; sys.modules['pytest'] = None\n"
            "from interpreters.testing import Say, ScriptedModel, Simulator, SimulatorFactory\n"
            "from pipeline import Agent\n"
            "run = Simulator(ScriptedModel([Say('hi')])).run(Agent.create('x/y'), 'hi')\n"
            "print(run.text)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=_env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hi"


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join((str(SRC), str(ROOT)))}
