"""Run options are written once (interpreters.core.options) and taken as keywords by every
interpreter; a misspelt one is a TypeError, not silently dropped."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator
from pipeline.agent import Agent


def _agent() -> Agent:
    return Agent.create("sim/model")


def test_keyword_options_reach_the_run_context() -> None:
    sim = Simulator(ScriptedModel([Say("hi")]))
    run = sim.run(_agent(), "hello", thread_id="t1", resource_id="u1", values={"k": 1})
    assert run.result.status == "finished"
    msg = run.result.messages.messages[-1]
    assert (msg.thread_id, msg.resource_id) == ("t1", "u1")


@pytest.mark.parametrize("how", ["run", "stream"])
def test_a_misspelt_option_is_a_type_error(how: str) -> None:
    sim = Simulator(ScriptedModel([Say("hi")]))
    bad: dict[str, Any] = {"thred_id": "t1"}
    with pytest.raises(TypeError, match="thred_id"):
        getattr(sim, how)(_agent(), "hello", **bad)


def test_the_async_simulator_refuses_a_misspelt_option_too() -> None:
    sim = AsyncSimulator(ScriptedModel([Say("hi")]))
    bad: dict[str, Any] = {"timout": 3}

    async def main() -> None:
        with pytest.raises(TypeError, match="timout"):
            await sim.run(_agent(), "hello", **bad)

    anyio.run(main)
