"""A worker that never comes back: its pending runs go to the live workers, by
`DurableClient.recover` or by the automatic takeover after its heartbeat goes silent, and
a worker that wakes up after its run was taken over completes nothing of it: the tool ran
once, the judge once, one result. On PostgreSQL (PIPELINE_TEST_PG_URL; CI starts one),
and `DurableRuns.recover` on SQLite too."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from interpreters.durable.dbos.runs import DurableClient
from tests.durable_harness import (
    WAIT,
    finish,
    kill,
    lines,
    model_log,
    pg_url,
    spawn,
    wait_for,
    wait_until,
)

pytestmark = [pytest.mark.slow]

RUN = "t-1"
ANSWER = f"worker/model:3:Weather in Paris? ({RUN})"
JUDGE = "worker/judge:1:It is sunny in Paris today."


def first_worker_hangs_after_the_tool(folder: Path, db: str, client: DurableClient,
                                      **env: str) -> subprocess.Popen[bytes]:
    w1 = spawn(folder, db, "serve", "w1", HANG="before-answer", **env)
    wait_for(folder / "ready-w1", w1)
    client.enqueue("weather", f"Weather in Paris? ({RUN})", run_id=RUN)
    wait_for(folder / "hang", w1)
    assert lines(folder / "tool.log") == [f"{RUN} w1"]
    return w1


def test_recover_hands_a_dead_workers_run_to_a_live_one(tmp_path: Path) -> None:
    db = pg_url()
    client = DurableClient(db)
    try:
        w1 = first_worker_hangs_after_the_tool(tmp_path, db, client)
        kill(w1)  # for good: no worker w1 comes back
        w2 = spawn(tmp_path, db, "serve", "w2")
        wait_for(tmp_path / "ready-w2", w2)
        assert client.status(RUN) == "PENDING"
        assert client.recover(["w1"]) == [RUN]
        result = client.result(RUN, timeout=WAIT)
        assert client.recover(["w1"]) == []  # repeated: w2 owns it now
    finally:
        client.close()
        (tmp_path / "stop").touch()
    finish(w2)
    assert result.status == "finished" and result.text == "It is sunny in Paris today."
    assert lines(tmp_path / "tool.log") == [f"{RUN} w1"], "the tool ran again"
    assert model_log(tmp_path)[f"done {JUDGE}"] == 1


def test_a_silent_worker_is_taken_over_and_a_zombie_completes_nothing(
    tmp_path: Path,
) -> None:
    db = pg_url()
    client = DurableClient(db)
    try:
        w1 = first_worker_hangs_after_the_tool(tmp_path, db, client, TAKEOVER="1")
        w1.send_signal(signal.SIGSTOP)  # silent: no heartbeat, but not dead
        w2 = spawn(tmp_path, db, "serve", "w2", TAKEOVER="1")
        wait_for(tmp_path / "ready-w2", w2)
        result = client.result(RUN, timeout=WAIT)  # w2 took it over and finished it
        # the zombie wakes in the middle of the answer w2 has already recorded
        (tmp_path / "release").touch()
        w1.send_signal(signal.SIGCONT)
        wait_until("zombie's answer", lambda: model_log(tmp_path)[f"done {ANSWER}"] >= 2, w1)
        # the zombie's end: refused when it records what it did (were it not stopped, it
        # would go on to the judge before this)
        wait_until("refusal of the zombie", lambda: any(
            "another worker owns this run" in p.read_text()
            for p in tmp_path.glob("stderr-serve-w1-*.log")), w1)
        assert model_log(tmp_path)[f"done {ANSWER}"] == 2
        final = client.result(RUN, timeout=WAIT)
        status = client.status(RUN)
    finally:
        client.close()
        (tmp_path / "stop").touch()
    finish(w2)
    finish(w1)
    assert result.status == "finished" and final == result and status == "SUCCESS"
    assert lines(tmp_path / "tool.log") == [f"{RUN} w1"], "the tool ran again"
    calls = model_log(tmp_path)
    assert calls[f"start {JUDGE}"] == 1, "the zombie went on to the judge"
    assert any("another worker owns this run" in p.read_text()
               for p in tmp_path.glob("stderr-serve-w1-*.log")), "the zombie said nothing"


def test_a_live_worker_recovers_a_dead_ones_run_on_sqlite(tmp_path: Path) -> None:
    from tests.durable_worker import make_runs

    db = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    dead = spawn(tmp_path, db, "run", RUN, HANG="before-answer")  # executor "local"
    wait_for(tmp_path / "hang", dead)
    kill(dead)
    with make_runs(tmp_path, db, executor_id="live") as runs:
        assert runs.status(RUN) == "PENDING"
        assert runs.recover(["local"]) == [RUN]
        result = runs.result(RUN, timeout=WAIT)
        assert runs.recover(["local"]) == []
    assert result.status == "finished" and result.text == "It is sunny in Paris today."
    assert len(lines(tmp_path / "tool.log")) == 1, "the tool ran again"
    assert model_log(tmp_path)[f"done {JUDGE}"] == 1
