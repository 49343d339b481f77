"""Starting, killing and reading the worker processes of tests/durable_worker.py, and the
PostgreSQL server the PostgreSQL tests need (PIPELINE_TEST_PG_URL; required when CI=true).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec
import pytest

from pipeline.values.chunks import Chunk
from pipeline.values.result import RunResult

ROOT = Path(__file__).resolve().parent.parent
WAIT = 90.0
"""Deadline of any one wait on a worker (they finish in about a second)."""

PG_ENV = "PIPELINE_TEST_PG_URL"


def spawn(folder: Path, db_url: str, mode: str, name: str, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.durable_worker", str(folder), db_url, mode, name],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=(folder / f"stderr-{mode}-{name}-{uuid.uuid4().hex[:6]}.log").open("wb"),
    )


def wait_until(what: str, happened: Callable[[], bool],
               proc: subprocess.Popen[bytes] | None = None) -> None:
    """Until `happened()` (something a worker process wrote); fails if the worker exited
    first or the deadline (a cap only) passed. Another process's files have no event to
    wait on here, so this looks again every 20 ms."""
    deadline = time.monotonic() + WAIT
    while not happened():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the worker exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            if proc is not None:
                proc.kill()
            pytest.fail(f"no {what} within {WAIT:g} s")
        time.sleep(0.02)


def wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    """Until `path` exists (see `wait_until`)."""
    wait_until(path.name, path.exists, proc)


def kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(WAIT)


def finish(proc: subprocess.Popen[bytes]) -> None:
    try:
        code = proc.wait(WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the worker did not finish within {WAIT:g} s")
    assert code == 0, f"the worker failed with {code}"


def result_of(folder: Path, run_id: str) -> RunResult:
    return msgspec.json.decode((folder / f"result-{run_id}.json").read_bytes(), type=RunResult)


def chunks_of(folder: Path, run_id: str) -> list[Chunk]:
    return msgspec.json.decode((folder / f"chunks-{run_id}.json").read_bytes(), type=list[Chunk])


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def model_log(folder: Path) -> Counter[str]:
    return Counter(lines(folder / "model.log"))


def sqlite_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'runs.sqlite'}"


def databases(kind: str) -> Callable[[Path], str]:
    """A database URL per test folder: SQLite, or PostgreSQL when a server is given (a
    `database` fixture's, parametrized by `kind`)."""
    if kind == "sqlite":
        return sqlite_url
    url = pg_url()  # skips (or fails under CI) without a server
    urls: dict[Path, str] = {}

    def fresh(folder: Path) -> str:
        # one database per folder: an uninterrupted run and a crashed one apart
        if folder not in urls:
            urls[folder] = url if not urls else pg_url()
        return urls[folder]

    return fresh


def pg_url() -> str:
    """A fresh database on the test server: skips (fails under CI) when there is none."""
    base = os.environ.get(PG_ENV)
    ci = os.environ.get("CI") == "true"
    if not base:
        if ci:
            pytest.fail(f"CI=true but {PG_ENV} is not set: .ci/run starts PostgreSQL")
        pytest.skip(
            f"no PostgreSQL: set {PG_ENV} (eval \"$(scripts/pg-test-server start)\" starts one)"
        )
    import sqlalchemy as sa

    name = f"pa_test_{uuid.uuid4().hex[:10]}"
    try:
        url = sa.make_url(base).set(drivername="postgresql+psycopg")
        engine = sa.create_engine(url, isolation_level="AUTOCOMMIT", connect_args={
            "connect_timeout": 5,
        })
        with engine.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
    except Exception as e:
        if ci:
            pytest.fail(f"CI=true but PostgreSQL at {PG_ENV} is not reachable: {e}")
        pytest.skip(f"PostgreSQL at {PG_ENV} is not reachable: {e}")
    return sa.make_url(base).set(database=name).render_as_string(hide_password=False)


@contextlib.contextmanager
def small_filesystem(path: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of `size` mounted at `path`, to fill for real: skips where mounting is
    impossible (not root), but fails under CI=true, which runs as root."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
            check=True, capture_output=True, timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but a tmpfs cannot be mounted at {path}: {e}")
        pytest.skip(f"cannot mount a tmpfs (needs root): {e}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True,
                       timeout=30)


def fill(path: Path) -> None:
    """Write `path` until its file system is full."""
    block = b"\0" * 65536
    with path.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
