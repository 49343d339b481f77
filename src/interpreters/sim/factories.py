"""The simulator factories the pytest fixtures hand out (`simulator`, `async_simulator`);
plain classes, no pytest needed to use them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
