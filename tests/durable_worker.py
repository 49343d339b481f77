"""A durable-runs worker process for the crash tests (tests/test_durable*.py).

    python -m tests.durable_worker DIR DB_URL run RUN_ID     # run one, write its result
    python -m tests.durable_worker DIR DB_URL serve NAME     # take runs from the queue
    python -m tests.durable_worker DIR DB_URL decide RUN_ID  # deny, dying as it sends

Its model and tool count what they do in files under DIR, so a test can see what ran in
a process it killed: `model.log` gets "start KEY" when a model call opens and "done KEY"
when its stream ended, `tool.log` a line per tool call. With HANG=before-answer (or
mid-stream) in the environment, the model's answer after the tool result blocks before
its first event (or after three events), having touched DIR/hang: the test kills it there
(or stops it, and lets it go on by touching DIR/release). TAKEOVER=SECONDS makes a
serving worker take the runs of workers silent that long. APPROVAL=1 gives the agent a
tool gate that asks approval for every weather call (tool.log names its city).
STREAM=with_steps makes the runs this worker starts write their chunks with the steps'
records (`DurableRuns(stream=)`).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
from dbos import DBOSClient

from effects import AskApproval
from examples.quality_guardrail import QualityGuardrail
from interpreters.durable.dbos.runs import DurableClient, DurableRuns
from interpreters.durable.dbos.store import Takeover
from interpreters.testing import Say, call
from pipeline.agent import Agent
from pipeline.approval import deny
from pipeline.processor import ToolCallArgs, ToolCallResult, processor
from pipeline.tools import tool
from pipeline.tools.context import ToolContext
from pipeline.values.chunks import ModelEvent
from pipeline.values.messages import TextPart
from pipeline.values.model import ModelRequest

MODEL = "worker/model"
JUDGE = "worker/judge"
HANG_LIMIT = 120.0
"""How long a hanging model waits to be killed (a test that forgot it must not hang)."""


def _append(path: Path, line: str) -> None:
    with path.open("a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


class FileModel:
    """A deterministic model that logs every call it serves to DIR/model.log."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.hang = os.environ.get("HANG", "")

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]:
        first = request.messages[0].parts[0] if request.messages else None
        topic = first.text if isinstance(first, TextPart) else "?"
        key = f"{request.model}:{len(request.messages)}:{topic}"
        return self._events(request, key)

    def _events(self, request: ModelRequest, key: str) -> Iterator[ModelEvent]:
        log = self.folder / "model.log"
        _append(log, f"start {key}")
        answering = request.model == MODEL and any(m.role == "tool" for m in request.messages)
        if request.model == JUDGE:
            say = Say("0.9")
        elif answering:
            say = Say(["It is ", "sunny ", "in ", "Paris ", "today."])
        else:
            say = Say(calls=[call("get_weather", tool_call_id="call-1", city="Paris")])
        for i, event in enumerate(say.events(len(request.messages))):
            if answering and self.hang == "before-answer" and i == 0:
                self._block()
            if answering and self.hang == "mid-stream" and i == 3:
                self._block()
            yield event
        _append(log, f"done {key}")

    def _block(self) -> None:
        (self.folder / "hang").touch()
        deadline = time.monotonic() + HANG_LIMIT
        while time.monotonic() < deadline:  # DIR/release lets it go on (a zombie wakes)
            if (self.folder / "release").exists():
                return
            time.sleep(0.02)
        raise SystemExit("not killed while hanging")


def make_agent(folder: Path, variant: str = "") -> Agent:
    """The worker's agent; `variant` changes it as a new deploy might: "instructions"
    gives it instructions, "tool" another tool, "max_steps" one step at most (a resume
    must notice)."""
    def get_weather(ctx: ToolContext[None], city: str) -> str:
        """The weather in a city."""
        where = f" {city}" if os.environ.get("APPROVAL") == "1" else ""
        _append(folder / "tool.log", f"{ctx.run.run_id} {os.environ.get('WORKER', '-')}{where}")
        ctx.writer.custom("data-weather", {"city": city})
        if os.environ.get("TOOL_DELAY"):
            time.sleep(float(os.environ["TOOL_DELAY"]))
        return f"sunny in {city}"

    def get_forecast(city: str) -> str:
        """Tomorrow's weather in a city."""
        return f"rain in {city}"

    def ask(a: ToolCallArgs[None]) -> ToolCallResult[None]:
        return AskApproval(f"weather of {a.args['city']}?")

    tools = [tool(get_weather)] + ([tool(get_forecast)] if variant == "tool" else [])
    gates = (
        [processor("ask", process_tool_call=ask)] if os.environ.get("APPROVAL") == "1" else []
    )
    return Agent.create(
        MODEL, tools=tools, input_processors=gates,
        output_processors=[QualityGuardrail(JUDGE)],
        instructions="Answer in French." if variant == "instructions" else (),
        max_steps=1 if variant == "max_steps" else 10,
    )


def make_runs(
    folder: Path,
    db_url: str,
    *,
    executor_id: str | None = None,
    worker_concurrency: int = 32,
    takeover: Takeover | None = None,
    variant: str = "",
    migrations: dict[str, list[str]] | None = None,
) -> DurableRuns:
    """The worker's runs, of `make_agent(folder, variant)` (APPROVAL_TIMEOUT=SECONDS in
    the environment: its approval timeout)."""
    timeout = float(os.environ.get("APPROVAL_TIMEOUT") or 7 * 24 * 3600)
    return DurableRuns(
        {"weather": make_agent(folder, variant)}, FileModel(folder), database_url=db_url,
        observers=(), clock=lambda: 1_000.0, executor_id=executor_id,
        worker_concurrency=worker_concurrency, takeover=takeover, migrations=migrations,
        approval_timeout=timeout,
        stream="with_steps" if os.environ.get("STREAM") == "with_steps" else "live",
    )


def main(argv: list[str]) -> int:
    folder, db_url, mode, name = Path(argv[0]), argv[1], argv[2], argv[3]
    if mode == "run":
        runs = make_runs(folder, db_url)
        runs.launch()  # resumes the run a killed worker left
        runs.start("weather", f"Weather in Paris? ({name})", run_id=name)
        chunks = list(runs.chunks(name, timeout=HANG_LIMIT))
        result = runs.result(name, timeout=HANG_LIMIT)
        (folder / f"result-{name}.json").write_bytes(msgspec.json.encode(result))
        (folder / f"chunks-{name}.json").write_bytes(msgspec.json.encode(chunks))
        runs.shutdown()
        return 0
    if mode == "decide":
        # a caller that dies inside decide(), as its message is being sent
        def die(*args: object, **kwargs: object) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        DBOSClient.send = DBOSClient.send_in_transaction = die  # type: ignore[method-assign]
        client = DurableClient(db_url)
        (p,) = client.pending(name)
        client.decide(name, [deny(p, "from a caller that died")])
        return 0
    if mode == "serve":
        os.environ["WORKER"] = name
        after = os.environ.get("TAKEOVER")  # seconds of silence before a takeover
        takeover = Takeover(float(after), float(after) / 5) if after else None
        runs = make_runs(
            folder, db_url, executor_id=name, worker_concurrency=1, takeover=takeover
        )
        runs.launch()
        (folder / f"ready-{name}").touch()
        deadline = time.monotonic() + HANG_LIMIT
        while not (folder / "stop").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        runs.shutdown()
        return 0
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
