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

from collections.abc import Mapping, Sequence

import pytest

from interpreters.aio import AsyncHandler
from interpreters.observers.observe import Observer
from interpreters.sim.aio import AsyncSimulator
from interpreters.sim.simulator import Scripted, ScriptedModel, ScriptFn, Simulator
from interpreters.sync import Handler
from pipeline.values.cost import Pricer

Script = Sequence[Scripted] | ScriptFn | ScriptedModel
"""What a simulator fixture takes: responses, a function of the request, or a model."""


def _model(script: Script) -> ScriptedModel:
    return script if isinstance(script, ScriptedModel) else ScriptedModel(script)


def _models(models: Mapping[str, Script] | None) -> dict[str, ScriptedModel]:
    return {k: _model(v) for k, v in (models or {}).items()}


class SimulatorFactory:
    """`simulator(script, models=..., handlers=..., observers=..., price=...)`: a fresh
    `Simulator`."""

    def __call__(
        self,
        script: Script,
        *,
        models: Mapping[str, Script] | None = None,
        handlers: Mapping[type, Handler] | None = None,
        observers: Sequence[Observer] = (),
        price: Pricer | None = None,
    ) -> Simulator:
        return Simulator(_model(script), models=_models(models), handlers=handlers,
                         observers=observers, price=price)


class AsyncSimulatorFactory:
    """`async_simulator(script, models=..., handlers=...)`: a fresh `AsyncSimulator`."""

    def __call__(
        self,
        script: Script,
        *,
        models: Mapping[str, Script] | None = None,
        handlers: Mapping[type, AsyncHandler] | None = None,
        tools_in_threads: bool = False,
    ) -> AsyncSimulator:
        return AsyncSimulator(
            _model(script), models=_models(models), handlers=handlers,
            tools_in_threads=tools_in_threads,
        )


@pytest.fixture
def simulator() -> SimulatorFactory:
    """Make a deterministic sync simulator from a script: `simulator([Say("hi")])`
    (virtual time, `timeout=` included)."""
    return SimulatorFactory()


@pytest.fixture
def async_simulator() -> AsyncSimulatorFactory:
    """Make a deterministic async simulator (virtual time, `timeout=` included)."""
    return AsyncSimulatorFactory()
