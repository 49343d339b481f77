"""What a `Recorder` keeps: by default what the agent's PII guards let out (personal
data as the run saw it only when asked), and a directory pruned by age and by size."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from interpreters.record.journal import MAX_AGE_DAYS, MAX_TOTAL_BYTES, Recorder
from interpreters.testing import Say, ScriptedModel, Simulator
from pipeline import Agent
from pipeline.processors import PIIDetector

MAIL = "ada.lovelace@example.com"


def _record(directory: Path, **options: object) -> bytes:
    agent = Agent.create("m", input_processors=[PIIDetector()])
    recorder = Recorder(directory, **options)  # type: ignore[arg-type]
    Simulator(ScriptedModel([Say(f"Noted: {MAIL}.")]), observers=[recorder]).run(
        agent, f"my mail is {MAIL}")
    [journal] = directory.glob("*.ndjson")
    return journal.read_bytes()


def test_a_journal_stores_what_the_agents_pii_guard_lets_out_by_default(tmp_path: Path) -> None:
    stored = _record(tmp_path)
    assert MAIL.encode() not in stored
    assert b"[EMAIL]" in stored or b"REDACTED" in stored


def test_personal_data_is_stored_as_the_run_saw_it_only_when_asked(tmp_path: Path) -> None:
    assert MAIL.encode() in _record(tmp_path, pii="keep")


def _journal(directory: Path, name: str, size: int, age_days: float) -> Path:
    path = directory / f"{name}.ndjson"
    path.write_bytes(b"x" * size)
    then = time.time() - age_days * 86400
    os.utime(path, (then, then))
    return path


def test_journals_past_the_age_bound_are_removed(tmp_path: Path) -> None:
    old = _journal(tmp_path, "old", 10, MAX_AGE_DAYS + 1)
    recent = _journal(tmp_path, "recent", 10, MAX_AGE_DAYS - 1)
    other = tmp_path / "notes.txt"
    other.write_text("not a journal")
    os.utime(other, (0, 0))
    Recorder(tmp_path)
    assert not old.exists() and recent.exists() and other.exists()


def test_the_oldest_journals_go_until_the_rest_fit_the_size_bound(tmp_path: Path) -> None:
    paths = [_journal(tmp_path, f"run{i}", 100, age_days=i) for i in range(5)]  # run0 newest
    recorder = Recorder(tmp_path, max_total_bytes=250)  # pruned as it is made
    assert [p.exists() for p in paths] == [True, True, False, False, False]
    _journal(tmp_path, "run5", 100, age_days=5)
    assert recorder.prune() == ["run5.ndjson"]


def test_no_bound_keeps_every_journal(tmp_path: Path) -> None:
    old = _journal(tmp_path, "old", 10, 10_000)
    Recorder(tmp_path, max_age_days=None, max_total_bytes=None)
    assert old.exists()


def test_a_journal_being_written_is_not_pruned(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path, max_total_bytes=1)
    agent = Agent.create("m")
    with Simulator(ScriptedModel([Say("hello there")]), observers=[recorder]).stream(
            agent, "hi") as stream:
        for _ in stream:
            assert recorder.prune() == []  # the run's own journal, open, stays
    assert len(recorder.prune()) == 1  # written: over the bound, it goes


@pytest.mark.parametrize("options", [{"max_age_days": 0}, {"max_total_bytes": 0},
                                     {"max_total_bytes": 1.5}])
def test_bounds_that_make_no_sense_are_refused(tmp_path: Path, options: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        Recorder(tmp_path, **options)  # type: ignore[arg-type]


def test_the_defaults_are_a_month_and_a_gibibyte() -> None:
    assert (MAX_AGE_DAYS, MAX_TOTAL_BYTES) == (30.0, 1 << 30)
