"""Crash and resume: a worker is SIGKILLed after its tool ran and again mid-stream; a
restarted worker finishes the run, no completed model call or tool runs again, and the
result equals an uninterrupted run's. On SQLite always, on PostgreSQL when a server is
given (PIPELINE_TEST_PG_URL; .ci/run starts one), with two workers sharing a queue."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.durable_harness import (
    WAIT,
    chunks_of,
    databases,
    finish,
    kill,
    lines,
    model_log,
    pg_url,
    result_of,
    spawn,
    sqlite_url,
    wait_for,
)

pytestmark = [pytest.mark.slow]

RUN = "run-1"
FIRST = f"worker/model:1:Weather in Paris? ({RUN})"
ANSWER = f"worker/model:3:Weather in Paris? ({RUN})"
JUDGE = "worker/judge:1:It is sunny in Paris today."


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> Callable[[Path], str]:
    return databases(request.param)


@pytest.mark.parametrize("stream", ["live", "with_steps"])
def test_a_killed_run_resumes_and_no_completed_call_runs_again(
    tmp_path: Path, database: Callable[[Path], str], stream: str
) -> None:
    clean, crashed = tmp_path / "clean", tmp_path / "crashed"
    clean.mkdir()
    crashed.mkdir()

    w = spawn(clean, database(clean), "run", RUN)
    finish(w)
    expected = result_of(clean, RUN)
    assert expected.status == "finished" and expected.text == "It is sunny in Paris today."

    db = database(crashed)
    # 1. killed after the tool ran: the model call that follows blocks before its answer
    # (the run keeps the stream mode it started with; the later workers are on "live")
    w = spawn(crashed, db, "run", RUN, HANG="before-answer", STREAM=stream)
    wait_for(crashed / "hang", w)
    kill(w)
    assert len(lines(crashed / "tool.log")) == 1
    (crashed / "hang").unlink()
    # 2. restarted: the run resumes at the answer, which is killed mid-stream
    w = spawn(crashed, db, "run", RUN, HANG="mid-stream")
    wait_for(crashed / "hang", w)
    kill(w)
    # 3. restarted again: it finishes
    w = spawn(crashed, db, "run", RUN)
    finish(w)

    assert result_of(crashed, RUN) == expected
    assert chunks_of(crashed, RUN) == chunks_of(clean, RUN)  # each chunk once, in order
    assert len(lines(crashed / "tool.log")) == 1, "the tool ran again"
    calls = model_log(crashed)
    assert calls[f"start {FIRST}"] == 1, "the completed first model call ran again"
    assert calls[f"start {ANSWER}"] == 3  # cut twice before it completed, then once whole
    assert calls[f"done {ANSWER}"] == 1
    assert calls[f"start {JUDGE}"] == calls[f"done {JUDGE}"] == 1


def test_starting_a_run_id_twice_runs_it_once(tmp_path: Path) -> None:
    w = spawn(tmp_path, sqlite_url(tmp_path), "run", RUN)
    finish(w)
    first = result_of(tmp_path, RUN)
    w = spawn(tmp_path, sqlite_url(tmp_path), "run", RUN)  # the same id again
    finish(w)
    assert result_of(tmp_path, RUN) == first
    assert len(lines(tmp_path / "tool.log")) == 1
    assert sum(1 for line in lines(tmp_path / "model.log") if line.startswith("start")) == 3


def test_two_workers_share_one_queue_and_each_run_finishes_once(tmp_path: Path) -> None:
    from interpreters.durable.dbos.runs import DurableClient

    db = pg_url()
    workers = [spawn(tmp_path, db, "serve", name, TOOL_DELAY="0.2") for name in ("w1", "w2")]
    for name, w in zip(("w1", "w2"), workers, strict=True):
        wait_for(tmp_path / f"ready-{name}", w)
    client = DurableClient(db)
    try:
        ids = [f"q-{i}" for i in range(8)]
        for i in ids:
            client.enqueue("weather", f"Weather in Paris? ({i})", run_id=i)
        client.enqueue("weather", "Weather in Paris? (q-0)", run_id="q-0")  # a repeat
        results = {i: client.result(i, timeout=WAIT) for i in ids}
    finally:
        client.close()
        (tmp_path / "stop").touch()
        for w in workers:
            finish(w)
    assert all(r.status == "finished" for r in results.values())
    assert len({r.text for r in results.values()}) == 1
    ran = Counter(line.split()[0] for line in lines(tmp_path / "tool.log"))
    assert ran == Counter(ids), "a run's tool ran more than once, or never"
    by_worker = Counter(line.split()[1] for line in lines(tmp_path / "tool.log"))
    assert set(by_worker) == {"w1", "w2"}, f"one worker took every run: {by_worker}"
    starts = [line for line in lines(tmp_path / "model.log") if line.startswith("start")]
    assert len(starts) == 3 * len(ids)  # two model calls and a judge call per run
