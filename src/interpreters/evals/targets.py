"""Where an experiment runs its cases and asks its judges: a target.

- `SimulatorTarget(script)`: each case on a fresh `Simulator` scripted by `script(case)`
  (a list of `Say`, a function of the request, a `ScriptedModel`), in virtual time: CI.
- `InterpreterTarget(interp, judge=Resolver())`: a `SyncInterpreter` (real providers).
- `AsyncInterpreterTarget(interp, judge=AsyncResolver())`: an `AsyncInterpreter`.

A target runs one case (`deps`, a per-case `timeout`) and gives its result, trace and
latency; `ask` answers a judge's `AskModel` (on the simulator: the `judge` script).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Generic, NamedTuple, TypeVar

from interpreters.aio import AsyncInterpreter
from interpreters.core.trace import Trace
from interpreters.observers.observe import Observer, RunInfo
from interpreters.providers.provider import AsyncProviderResolver, ProviderResolver
from interpreters.run.common import answer_of, ask_provider
from interpreters.sim.simulator import Scripted, ScriptedModel, ScriptFn, Simulator
from interpreters.sync import SyncInterpreter
from pipeline.agent import Agent
from pipeline.processor import AskModel, ModelAnswer
from pipeline.values.chunks import ModelEvent
from pipeline.values.cost import Pricer
from pipeline.values.messages import RunInput
from pipeline.values.result import RunResult

from .cases import Case

if TYPE_CHECKING:  # (the plugin imports pytest, which evals in production do without)
    from interpreters.sim.pytest_plugin import SimulatorFactory

Script = Sequence[Scripted] | ScriptFn | ScriptedModel
"""A scripted model: its responses, a function of the request, or the model."""


class Ran(NamedTuple):
    """One case's run: its result, its trace and how long it took."""

    result: RunResult
    trace: Trace
    latency: float
    run_id: str = ""


class _RunId:
    """An observer that learns the id of the (first) run it sees start."""

    def __init__(self) -> None:
        self.run_id = ""

    def start(self, run: RunInfo) -> None:
        if not self.run_id and run.parent_run_id is None:
            self.run_id = run.run_id


def run_input(case: Case) -> RunInput:
    return case.input


def _model(script: Script) -> ScriptedModel:
    return script if isinstance(script, ScriptedModel) else ScriptedModel(script)


class SimulatorTarget:
    """Each case on a fresh `Simulator` (its own virtual clock and ids): `script(case)`
    answers the agent's model; `models` other model ids (a processor's judge); `judge`
    the experiment's judged scorers (a script, a function of the request: one model for
    every case, so give a function or enough responses)."""

    sync = True

    def __init__(
        self,
        script: Callable[[Case], Script],
        *,
        models: Callable[[Case], Mapping[str, Script]] | None = None,
        judge: Script | None = None,
        price: Pricer | None = None,
        observers: Sequence[Observer] = (),
    ) -> None:
        self.script = script
        self.models = models
        self.judge = _model(judge) if judge is not None else None
        self.price = price
        self.observers = tuple(observers)
        self._judging = threading.Lock()  # one scripted judge, cases in worker threads
        self._factory: SimulatorFactory | None = None

    def made_by(self, factory: SimulatorFactory) -> SimulatorTarget:
        """This target, its simulators made by `factory` (the pytest plugin's `simulator`
        fixture)."""
        other = SimulatorTarget(self.script, models=self.models, price=self.price,
                                observers=self.observers)
        other.judge = self.judge
        other._factory = factory
        return other

    def run(self, agent: Agent, case: Case, *, deps: object, timeout: float | None) -> Ran:
        models = dict(self.models(case)) if self.models else {}
        # A fresh simulator per case: the run it starts is the case's (a report names it,
        # and a Recorder its journal, by that id).
        learned = _RunId()
        observers = (*self.observers, learned)
        if self._factory is not None:
            sim = self._factory(self.script(case), models=models, observers=observers,
                                price=self.price)
        else:
            sim = Simulator(_model(self.script(case)),
                            models={k: _model(v) for k, v in models.items()},
                            observers=observers, price=self.price)
        start = sim.clock.now
        run = sim.run(agent, run_input(case), deps=deps, timeout=timeout)
        return Ran(run.result, run.trace, run.clock - start, learned.run_id)

    def ask(self, request: AskModel) -> ModelAnswer:
        if self.judge is None:
            raise LookupError("the simulator target has no judge script (judge=)")
        with self._judging:
            return answer_of(self.judge.stream(request.request))

    @property
    def can_ask(self) -> bool:
        return self.judge is not None

    def now(self) -> float:
        return self.judge.clock.now if self.judge is not None else 0.0


Interp = TypeVar("Interp", bound=SyncInterpreter | AsyncInterpreter)
Judges = TypeVar("Judges", bound=ProviderResolver | AsyncProviderResolver)


class _OnInterpreter(Generic[Interp, Judges]):
    """What the two interpreter targets share: the interpreter, the judge resolver, the
    pricer and the latency clock; judges ask on wall-clock time."""

    def __init__(
        self,
        interpreter: Interp,
        *,
        judge: Judges | None = None,
        price: Pricer | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interpreter: Interp = interpreter
        self.judge: Judges | None = judge
        self.price = price
        self.clock = clock

    def _judges(self) -> Judges:
        if self.judge is None:
            raise LookupError("the target has no judge resolver (judge=)")
        return self.judge

    @property
    def can_ask(self) -> bool:
        return self.judge is not None

    def now(self) -> float:
        return time.time()


class InterpreterTarget(_OnInterpreter[SyncInterpreter, ProviderResolver]):
    """Each case on a `SyncInterpreter`; judges on `judge` (a resolver of model ids to
    providers: `Resolver()`). Latency by `clock` (monotonic seconds)."""

    sync = True

    def run(self, agent: Agent, case: Case, *, deps: object, timeout: float | None) -> Ran:
        trace = Trace()
        start = self.clock()
        result = self.interpreter.run(agent, run_input(case), deps=deps, timeout=timeout,
                                      trace=trace)
        return Ran(result, trace, self.clock() - start)

    def ask(self, request: AskModel) -> ModelAnswer:
        return ask_provider(self._judges(), request)


class AsyncInterpreterTarget(_OnInterpreter[AsyncInterpreter, AsyncProviderResolver]):
    """Each case on an `AsyncInterpreter`; judges on `judge` (`AsyncResolver()`)."""

    sync = False

    async def run(
        self, agent: Agent, case: Case, *, deps: object, timeout: float | None
    ) -> Ran:
        trace = Trace()
        start = self.clock()
        result = await self.interpreter.run(agent, run_input(case), deps=deps,
                                            timeout=timeout, trace=trace)
        return Ran(result, trace, self.clock() - start)

    async def ask(self, request: AskModel) -> ModelAnswer:
        events: list[ModelEvent] = []
        stream = self._judges()(request.request.model).astream(request.request)
        try:
            async for e in stream:
                events.append(e)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return answer_of(events)


SyncTarget = SimulatorTarget | InterpreterTarget
Target = SimulatorTarget | InterpreterTarget | AsyncInterpreterTarget
"""Where an experiment runs its cases."""


__all__ = [
    "AsyncInterpreterTarget", "InterpreterTarget", "Ran", "SimulatorTarget", "SyncTarget",
    "Target",
]
