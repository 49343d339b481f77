"""The pytest plugin (registered by the `pytest11` entry point): simulator fixtures.

Installing pipeline-agents gives every project's tests two fixtures, no conftest needed:

    def test_weather(simulator):
        sim = simulator([Say("Let me look.", calls=[call("weather", city="Paris")]),
                         Say("Sunny.")])
        run = sim.run(agent, "Weather in Paris?")
        assert run.result.text == "Let me look.Sunny."

    @pytest.mark.anyio
    async def test_slow_model(async_simulator):
        sim = async_simulator([Say("late", latency=100.0)])
        run = await sim.run(agent, "hi", timeout=1)      # virtual seconds: no waiting
        assert run.result.status == "cancelled"

Each fixture is a factory: call it with a script (a list of `Say`/`Fail`, a function of
the request, or a `ScriptedModel`), and optionally `models=` (per model id) and
`handlers=`; every call gives a fresh simulator with its own virtual clock.
"""

from __future__ import annotations

import pytest

from interpreters.sim.factories import AsyncSimulatorFactory, Script, SimulatorFactory

__all__ = ["AsyncSimulatorFactory", "Script", "SimulatorFactory", "async_simulator", "simulator"]


@pytest.fixture
def simulator() -> SimulatorFactory:
    """Make a deterministic sync simulator from a script: `simulator([Say("hi")])`
    (virtual time, `timeout=` included)."""
    return SimulatorFactory()


@pytest.fixture
def async_simulator() -> AsyncSimulatorFactory:
    """Make a deterministic async simulator (virtual time, `timeout=` included)."""
    return AsyncSimulatorFactory()
