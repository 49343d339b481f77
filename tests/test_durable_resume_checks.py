"""What a resume checks before it replays a run a killed worker left: the agent it was
recorded on (a changed one ends the run with an error naming the change, unless the
worker accepts it), the recovery-attempt limit, and that the normal resume logs nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from interpreters.durable.dbos.runs import (
    MAX_RECOVERY_ATTEMPTS,
    AgentChangedError,
    RunKeptCrashingError,
)
from tests.durable_harness import WAIT, finish, kill, lines, model_log, pg_url, spawn, wait_for
from tests.durable_worker import make_runs

pytestmark = [pytest.mark.slow]

RUN = "run-1"
ANSWER = f"worker/model:3:Weather in Paris? ({RUN})"


def crashed_run(folder: Path, url: str | None = None) -> str:
    """The store (SQLite unless `url`) of a run whose worker was killed after its tool ran."""
    url = url or f"sqlite:///{folder / 'runs.sqlite'}"
    worker = spawn(folder, url, "run", RUN, HANG="before-answer")
    wait_for(folder / "hang", worker)
    kill(worker)
    assert len(lines(folder / "tool.log")) == 1
    return url


@pytest.mark.parametrize(
    ("variant", "changed"),
    [("instructions", ("instructions",)), ("tool", ("tools (get_forecast added)",)),
     ("max_steps", ("settings (max_steps 10 -> 1)",))],
)
def test_a_run_resumed_on_a_changed_agent_is_refused_naming_the_change_and_stays_resumable(
    tmp_path: Path, variant: str, changed: tuple[str, ...]
) -> None:
    url = crashed_run(tmp_path)
    with make_runs(tmp_path, url, variant=variant) as runs:  # launch resumes the run
        with pytest.raises(AgentChangedError) as raised:
            runs.result(RUN, timeout=WAIT)
        assert runs.status(RUN) == "PENDING"  # refused, not ended
    assert raised.value.changed == changed and raised.value.run_id == RUN
    assert raised.value.recorded == make_runs(tmp_path, url).fingerprint("weather")
    assert changed[0] in str(raised.value)
    # nothing was replayed on the changed agent, nothing ran again
    assert len(lines(tmp_path / "tool.log")) == 1
    assert model_log(tmp_path)[f"start {ANSWER}"] == 1
    # the remedy the error names: the agent it started on finishes it
    with make_runs(tmp_path, url) as runs:
        result = runs.result(RUN, timeout=WAIT)
        assert runs.status(RUN) == "SUCCESS"
    assert result.status == "finished" and result.text == "It is sunny in Paris today."
    assert len(lines(tmp_path / "tool.log")) == 1, "the tool ran again"


def test_a_run_refused_on_postgresql_is_finished_by_the_migration_the_error_names(
    tmp_path: Path,
) -> None:
    url = crashed_run(tmp_path, pg_url())  # skips (or fails under CI) without a server
    with (
        make_runs(tmp_path, url, variant="instructions") as runs,
        pytest.raises(AgentChangedError, match="changed: instructions") as raised,
    ):
        runs.result(RUN, timeout=WAIT)
    with make_runs(tmp_path, url, variant="instructions",
                   migrations={"weather": [raised.value.recorded]}) as runs:
        result = runs.result(RUN, timeout=WAIT)
    assert result.status == "finished" and len(lines(tmp_path / "tool.log")) == 1


def test_a_worker_that_accepts_the_recorded_agent_resumes_the_run(tmp_path: Path) -> None:
    url = crashed_run(tmp_path)
    old = make_runs(tmp_path, url).fingerprint("weather")
    with make_runs(
        tmp_path, url, variant="tool", migrations={"weather": [old]}
    ) as runs:
        result = runs.result(RUN, timeout=WAIT)
    assert result.status == "finished" and result.text == "It is sunny in Paris today."
    assert len(lines(tmp_path / "tool.log")) == 1  # the recorded tool call replayed


def test_a_run_past_the_recovery_attempt_limit_ends_with_a_typed_error(tmp_path: Path) -> None:
    url = crashed_run(tmp_path)
    # as if its worker had died on it that many times (each recovery counts one)
    with sqlite3.connect(tmp_path / "runs.sqlite") as db:
        db.execute(
            "UPDATE workflow_status SET recovery_attempts = ? WHERE workflow_uuid = ?",
            (MAX_RECOVERY_ATTEMPTS + 5, RUN),
        )
    with make_runs(tmp_path, url) as runs:
        with pytest.raises(RunKeptCrashingError, match="recovered more than 100 times"):
            runs.result(RUN, timeout=WAIT)
        assert runs.status(RUN) == "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
    assert model_log(tmp_path)[f"start {ANSWER}"] == 1


def test_the_normal_resume_logs_no_warning(tmp_path: Path) -> None:
    url = crashed_run(tmp_path)
    for log in tmp_path.glob("stderr-*.log"):
        log.unlink()
    resumed = spawn(tmp_path, url, "run", RUN)
    finish(resumed)
    logs = "".join(p.read_text() for p in tmp_path.glob("stderr-*.log"))
    assert "WARNING" not in logs, logs
    assert len(lines(tmp_path / "tool.log")) == 1
