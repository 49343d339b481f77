"""The simulators' run ids: unique across simulators by default, as every interpreter's
are (a second simulator over the same memory store, a restart, never reuses a message
id), and what `run_ids=` makes them, on both simulators."""

from __future__ import annotations

import anyio
import pytest

from interpreters.testing import (
    AsyncSimulator,
    Say,
    ScriptedModel,
    Simulator,
    numbered_run_ids,
)
from pipeline.values.result import RunResult
from tests.helpers import make_agent


def run_id(result: RunResult) -> str:
    first = result.messages.messages[0].id
    assert first.endswith("-input")
    return first.removesuffix("-input")


def sync_ids(sim: Simulator, runs: int = 2) -> list[str]:
    return [run_id(sim.run(make_agent(), "hi").result) for _ in range(runs)]


def async_ids(sim: AsyncSimulator, runs: int = 2) -> list[str]:
    async def main() -> list[str]:
        return [run_id((await sim.run(make_agent(), "hi")).result) for _ in range(runs)]

    return anyio.run(main)


def test_no_two_simulators_give_a_run_the_same_id() -> None:
    ids = [
        *sync_ids(Simulator(ScriptedModel([Say("a")] * 2))),
        *sync_ids(Simulator(ScriptedModel([Say("b")] * 2))),
        *async_ids(AsyncSimulator(ScriptedModel([Say("c")] * 2))),
        *async_ids(AsyncSimulator(ScriptedModel([Say("d")] * 2))),
    ]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith(("run1-", "run2-")) for i in ids)


def test_both_simulators_take_run_ids() -> None:
    assert sync_ids(Simulator(ScriptedModel([Say("a")] * 2), run_ids=numbered_run_ids())) == [
        "run1", "run2"]
    asim = AsyncSimulator(ScriptedModel([Say("a")] * 2), run_ids=numbered_run_ids("turn"))
    assert async_ids(asim) == ["turn1", "turn2"]
    fixed = Simulator(ScriptedModel([Say("a")]), run_ids=lambda: "chosen")
    assert sync_ids(fixed, 1) == ["chosen"]


def test_run_ids_that_are_not_a_function_are_refused() -> None:
    with pytest.raises(TypeError, match="run_ids"):
        Simulator(ScriptedModel([]), run_ids="run1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="run_ids"):
        AsyncSimulator(ScriptedModel([]), run_ids=7)  # type: ignore[arg-type]
