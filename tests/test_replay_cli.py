"""`pipeline replay FILE`: what it refuses to read, and what it prints (escaped)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from interpreters.cli.commands import main
from interpreters.record.journal import Journal, JournalError, Recorder
from interpreters.testing import Say, ScriptedModel, Simulator, numbered_run_ids
from pipeline import Agent

ESC = "\x1b]0;owned\x07\x1b[2J"


def refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["replay", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("pipeline replay: ")
    assert "Traceback" not in err
    return err


def test_a_device_is_refused_without_reading_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert "not a regular file" in refused(["/dev/zero"], capsys)


def test_a_fifo_is_refused_without_waiting_for_a_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "journal.ndjson"
    os.mkfifo(fifo)
    assert "not a regular file" in refused([str(fifo)], capsys)


def test_a_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "not a regular file" in refused([str(tmp_path)], capsys)


def test_a_journal_over_the_size_bound_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = Recorder(tmp_path)
    Simulator(ScriptedModel([Say("hello")]), observers=[rec], run_ids=numbered_run_ids()).run(
        Agent.create("m"), "hi")
    path = rec.path("run1")
    size = path.stat().st_size
    err = refused([str(path), "--max-bytes", str(size - 1)], capsys)
    assert "--max-bytes" in err
    assert main(["replay", str(path), "--max-bytes", str(size)]) == 0
    with pytest.raises(JournalError, match="bytes"):
        Journal.read(path, max_bytes=size - 1)
    assert Journal.read(path, max_bytes=size).header.run_id == "run1"


def escaping_agent() -> Agent:
    return Agent.create("m", name=f"evil{ESC}")


def test_terminal_escapes_from_a_journal_are_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = Recorder(tmp_path)
    Simulator(ScriptedModel([Say(f"hi{ESC}\u202eend\nline two")]), observers=[rec],
              run_ids=numbered_run_ids()).run(
        escaping_agent(), "hi"
    )
    path = str(rec.path("run1"))
    out = ""
    for args in ([path], [path, "--agent", "tests.test_replay_cli:escaping_agent"]):
        main(["replay", *args])
        out, err = capsys.readouterr()
        for text in (out, err):
            assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
        assert "evil\\x1b]0;owned\\x07" in err
    assert "hi\\x1b]0;owned\\x07\\x1b[2J\\u202eend\nline two" in out


def test_a_negative_size_bound_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["replay", "/dev/null", "--max-bytes", "-1"])
    assert done.value.code == 2
    assert "at least 0" in capsys.readouterr().err


def async_agent() -> Agent:
    from effects import Continue
    from pipeline import OutputStepArgs, OutputStepResult, Processor

    class Slow(Processor):
        id = "slow"

        async def process_output_step(
            self, args: OutputStepArgs[None]
        ) -> OutputStepResult[None]:
            return Continue()

    return Agent.create("m", output_processors=[Slow()])


def test_an_agent_with_async_hooks_is_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = Recorder(tmp_path)
    Simulator(ScriptedModel([Say("hello")]), observers=[rec], run_ids=numbered_run_ids()).run(
        Agent.create("m"), "hi")
    assert main(["replay", str(rec.path("run1")), "--agent",
                 "tests.test_replay_cli:async_agent"]) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("pipeline replay: ") and "async" in last


def test_an_agent_in_a_module_of_the_current_directory_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A console script, unlike `python -m`, does not put the current directory on the
    # import path: `--agent my_agents:support` beside the user's script must load anyway.
    (tmp_path / "user_agents_in_cwd.py").write_text(
        "from pipeline import Agent\nsupport = Agent.create('m')\n"
    )
    rec = Recorder(tmp_path / "journals")
    Simulator(ScriptedModel([Say("hello")]), observers=[rec], run_ids=numbered_run_ids()).run(
        Agent.create("m"), "hi")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "user_agents_in_cwd", raising=False)
    assert main(["replay", str(rec.path("run1")), "--agent", "user_agents_in_cwd:support"]) == 0
    assert capsys.readouterr().err.endswith("identical to the recording\n")
    sys.modules.pop("user_agents_in_cwd", None)


def test_a_journal_nested_past_the_bound_is_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = Recorder(tmp_path)
    Simulator(ScriptedModel([Say("hello")]), observers=[rec], run_ids=numbered_run_ids()).run(
        Agent.create("m"), "hi")
    path = rec.path("run1")
    lines = path.read_bytes().splitlines()
    deep = b"[" * 100_000 + b"]" * 100_000
    lines[0] = lines[0].replace(b'"values":null', b'"values":{"a":' + deep + b"}")
    path.write_bytes(b"\n".join(lines))
    err = refused([str(path)], capsys)
    assert "line 1: " in err and "nests deeper than" in err
