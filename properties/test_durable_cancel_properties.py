"""A durable run that times out at any of its steps ends as the sync interpreter's run
cancelled at that same command: the same result, the same chunks published (the cancel's
final chunks reach `steps.publish`), the same trace.

For the generated agents and scripts of test_equivalence, the durable driver is told its
run expired at its k-th step (a model call, a tool step, a processor's request or a
backoff sleep; every k the uncancelled run takes); the sync interpreter is cancelled, by
its signal, just before its k-th step: as the step's command is yielded (an observer is
told of it before the interpreter carries it out), or, for a tool call after the first
of its step (each call is a step of its own), as the call before it returns; so both
cancel at the same command with the same state.
"""

from __future__ import annotations

from collections.abc import Callable
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from effects import CallModel, Perform, RunTools, Sleep
from interpreters import sync
from interpreters.core.cancel import CancelSignal
from interpreters.core.trace import Trace
from interpreters.durable.loop import drive
from interpreters.observers.observe import RunInfo, RunObserver
from interpreters.providers.provider import Provider
from interpreters.run.common import start_run
from interpreters.sim.simulator import Scripted
from interpreters.sync import SyncInterpreter
from interpreters.testing import ScriptedModel, VirtualClock
from pipeline.agent import Agent
from pipeline.protocol import LoopCommand, ToolInvocation, ToolOutcome
from pipeline.values.chunks import Chunk
from pipeline.values.result import RunResult
from properties.test_durable_properties import LiveSteps, ReadFirst
from properties.test_equivalence import (
    START,
    Check,
    Pipeline,
    _wired,
    check_text,
    judge_script,
    pipelines,
    prompts,
    scripts,
)

REASON = "stopped at a step"
STEPS = (CallModel, RunTools, Perform, Sleep)
RUN_TOOL = sync.run_tool


class ExpiresAt(LiveSteps):
    """Live steps whose run expires at its k-th check (None: never); `checks` counts them."""

    def __init__(
        self, resolve: Callable[[str], ScriptedModel], sleep: Callable[[float], None],
        at: int | None,
    ) -> None:
        super().__init__(resolve, sleep)
        self.at = at
        self.checks = 0

    def expired(self) -> str | None:
        k = self.checks
        self.checks += 1
        return REASON if k == self.at else None


def on_durable(
    agent: Agent, script: list[Scripted], prompt: str, at: int | None
) -> tuple[RunResult, list[Chunk], Trace, int]:
    clock, resolve = _wired(script)
    steps = ExpiresAt(resolve, clock.sleep, at)
    trace = Trace()
    driver = start_run(agent, prompt, run_id="run1", clock=clock, options={"trace": trace})
    result = drive(driver, steps)
    return result, steps.published, trace, steps.checks


class CancelBeforeStep:
    """Cancels `signal` just before the sync run's step number `at` (counted as the
    durable driver checks its timeout: at each step's command, and before each tool
    call after the first of its command)."""

    def __init__(self, signal: CancelSignal, at: int) -> None:
        self.signal = signal
        self.at = at
        self.steps = 0
        self.calls_left = 0

    def _step(self) -> None:
        if self.steps == self.at:
            self.signal.cancel(REASON)
        self.steps += 1

    def start(self, run: RunInfo) -> RunObserver:
        counter = self

        class Commands(RunObserver):
            def command(self, cmd: LoopCommand, at: float) -> None:
                if isinstance(cmd, STEPS):
                    counter._step()
                    counter.calls_left = len(cmd.calls) if isinstance(cmd, RunTools) else 0

        return Commands()

    def run_tool(self, inv: ToolInvocation) -> ToolOutcome:
        outcome = RUN_TOOL(inv)
        self.calls_left -= 1
        if self.calls_left > 0:
            self._step()
        return outcome


def on_sync(
    agent: Agent, script: list[Scripted], prompt: str, at: int
) -> tuple[RunResult, list[Chunk], tuple[object, ...]]:
    clock = VirtualClock(START)
    model = ReadFirst(ScriptedModel(script, clock=clock))  # read whole, as a durable step
    judge = ScriptedModel(judge_script, clock=clock)

    def resolve(model_id: str) -> Provider:
        return judge if model_id == "judge" else model

    signal = CancelSignal()
    counter = CancelBeforeStep(signal, at)
    interp = SyncInterpreter(
        resolve=resolve, handlers={Check: check_text}, clock=clock, sleep=clock.sleep,
        run_ids=lambda: "run1", observers=[counter],
    )
    trace = Trace()
    with mock.patch.object(sync, "run_tool", counter.run_tool):
        stream = interp.stream(agent, prompt, trace=trace, signal=signal)
        chunks = list(stream)
    return stream.result, chunks, trace.comparable()


@given(pipeline=pipelines, script=scripts, prompt=prompts, data=st.data())
def test_a_durable_run_expired_at_any_step_is_the_sync_run_cancelled_there(
    pipeline: Pipeline, script: list[Scripted], prompt: str, data: st.DataObject
) -> None:
    *_, checks = on_durable(pipeline.agent(), script, prompt, None)
    if checks == 0:
        return
    at = data.draw(st.integers(0, checks - 1), label="expires at step")
    result, published, trace, _ = on_durable(pipeline.agent(), script, prompt, at)
    assert result.status == "cancelled"
    assert published == trace.chunks  # every chunk handed out reached steps.publish
    expected, chunks, sync_trace = on_sync(pipeline.agent(), script, prompt, at)
    assert result == expected
    assert published == chunks
    assert trace.comparable() == sync_trace
