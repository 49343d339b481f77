"""Fault matrix, loop side: a retryable error (503, 429) raised by a provider after the
first stream event is not retried (bytes already went out), and the sync and async
interpreters agree; raised before the first event, it is retried."""

from __future__ import annotations

import anyio
import pytest

from interpreters.testing import (
    AsyncSimulator,
    Fail,
    Say,
    ScriptedModel,
    Simulator,
    numbered_run_ids,
)
from pipeline.agent import Agent
from pipeline.values.pairing import is_paired
from pipeline.values.result import RunResult, StreamFailed


def _runs(script: list[Say]) -> list[tuple[RunResult, int]]:
    """The run on the sync simulator and on the async one (asyncio, trio), with the
    number of model calls each made."""
    out: list[tuple[RunResult, int]] = []
    model = ScriptedModel(script)
    out.append((Simulator(model, run_ids=numbered_run_ids()).run(Agent.create("m"), "hi").result,
                len(model.requests)))
    for backend in ("asyncio", "trio"):
        amodel = ScriptedModel(script)

        async def go(m: ScriptedModel = amodel) -> RunResult:
            sim = AsyncSimulator(m, run_ids=numbered_run_ids())
            return (await sim.run(Agent.create("m"), "hi")).result

        out.append((anyio.run(go, backend=backend), len(amodel.requests)))
    return out


@pytest.mark.parametrize("status", [503, 429])
def test_a_retryable_error_after_the_first_event_is_not_retried(status: int) -> None:
    script = [Say(["one ", "two"], break_after=2, break_with=Fail(status=status)), Say("again")]
    runs = _runs(script)
    for result, calls in runs:
        assert calls == 1  # not retried
        assert result.status == "failed"
        assert isinstance(result.error, StreamFailed)
        assert result.error.error is not None and result.error.error.status == status
        assert result.error.error.retryable is False
        assert result.text == "one " and result.messages.messages[-1].incomplete
        assert is_paired(result.messages.messages)
    assert runs[0][0] == runs[1][0] == runs[2][0]


def test_the_same_error_before_the_first_event_is_retried() -> None:
    script = [Say("x", break_after=0, break_with=Fail(status=503)), Say("fine")]
    for result, calls in _runs(script):
        assert calls == 2 and result.status == "finished" and result.text == "fine"
