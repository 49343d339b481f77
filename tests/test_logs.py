"""The `pipeline` logger (interpreters.observers.logs): debug per command, warnings for retries and
fail-closed events, never a key, and no message content unless asked."""

from __future__ import annotations

import logging

import pytest

from effects import Continue
from interpreters import SyncInterpreter
from interpreters.observers.logs import LogObserver
from interpreters.testing import Fail, Say, ScriptedModel, Simulator, call, numbered_run_ids
from pipeline import Agent, OutputStepArgs, OutputStepResult, Processor, abort

SECRET_TEXT = "my-private-words"
KEY = "sk-test-0123456789abcdefSECRET"


class Picky(Processor):
    id = "picky"

    def process_output_step(self, args: OutputStepArgs[None]) -> OutputStepResult[None]:
        if args.text.startswith("short"):
            abort("Too short, please elaborate.", retry=True)
        if "forbidden" in args.text:
            abort("Blocked: forbidden topic.")
        return Continue()


def tool(city: str) -> str:
    """A tool."""
    return "ok"


def run(script: list[Say | Fail], caplog: pytest.LogCaptureFixture, level: int,
        observer: LogObserver | None = None) -> list[logging.LogRecord]:
    caplog.set_level(level, logger="pipeline")
    agent = Agent.create("openai/m", tools=[tool], output_processors=[Picky()])
    Simulator(ScriptedModel(script), observers=[observer or LogObserver()],
              run_ids=numbered_run_ids()).run(
        agent, f"{SECRET_TEXT} {KEY}")
    return [r for r in caplog.records if r.name == "pipeline"]


def test_one_debug_line_per_command(caplog: pytest.LogCaptureFixture) -> None:
    records = run([Say(calls=[call("tool", city="x")]), Say(["long ", "enough"])],
                  caplog, logging.DEBUG)
    debug = [r.getMessage() for r in records if r.levelno == logging.DEBUG]
    kinds = [m.split(": ", 1)[1].split(" ", 1)[0] for m in debug]
    assert "call" in kinds and "run" in kinds and "pull," in kinds and "finish:" in kinds
    assert all(m.startswith("run run1: ") for m in debug)
    assert not [r for r in records if r.levelno >= logging.WARNING]


def test_retries_and_fail_closed_events_are_warnings(caplog: pytest.LogCaptureFixture) -> None:
    records = run([Fail(status=503), Say("short one"), Say("forbidden stuff")],
                  caplog, logging.WARNING)
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 3, warnings
    assert "transient failure" in warnings[0] and "HTTP 503" in warnings[0]
    assert "picky" in warnings[1] and "retry 1 of 3" in warnings[1]
    assert "tripped" in warnings[2] and "picky" in warnings[2]
    assert "Blocked: forbidden topic." in warnings[2]


def test_no_content_and_no_key_by_default(caplog: pytest.LogCaptureFixture) -> None:
    records = run([Say(["long ", "enough"])], caplog, logging.DEBUG)
    text = "\n".join(r.getMessage() for r in records)
    assert SECRET_TEXT not in text and KEY not in text and "enough" not in text


def test_content_when_asked_but_never_a_key(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    records = run([Say(["long ", "enough"])], caplog, logging.DEBUG, LogObserver(content=True))
    text = "\n".join(r.getMessage() for r in records)
    assert "enough" in text
    assert KEY not in text


def test_real_interpreters_log_by_default(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="pipeline")
    model = ScriptedModel([Fail(status=503), Say("fine answer")])
    SyncInterpreter(model, sleep=lambda s: None).run(Agent.create("m"), "hi")
    assert any("transient failure" in r.getMessage() for r in caplog.records)


def test_without_a_configured_handler_runs_are_not_watched() -> None:
    from interpreters.observers.observe import RunInfo
    from pipeline import MessageList
    from pipeline.values.context import RunContext

    quiet = logging.getLogger("pipeline-test-unconfigured")
    quiet.propagate = False
    info = RunInfo(Agent.create("m"), MessageList(), RunContext(run_id="r"), lambda: 0.0, 0.0)
    assert LogObserver(logger=quiet).start(info) is None
    quiet.addHandler(logging.NullHandler())
    assert LogObserver(logger=quiet).start(info) is not None
