"""What the sync and async interpreters are built on, written once.

`InterpreterBase` keeps what both are made with (a provider or a resolver, the I/O
handlers, the clock, run ids, observers, a pricer) and starts a run the same way: its
options checked, its model resolved up front, its driver made. `RunOutcome` is a run
stream's `done` and `result`. The stop of a run (its signal and timeout) is
`interpreters.core.deadline.StopCheck`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar

from interpreters.core.breaker import PROCESS_BREAKER, CircuitBreaker
from interpreters.core.handlers import Handler, Handlers
from interpreters.core.options import RunOptions, check_options
from interpreters.observers.logs import LogObserver
from interpreters.observers.observe import Observer
from interpreters.run.common import check_models, resolver, start_run
from pipeline.agent import Agent
from pipeline.protocol import Driver
from pipeline.values.cost import Pricer
from pipeline.values.messages import RunInput
from pipeline.values.result import Output, RunResult

P = TypeVar("P")


def observers_or_default(observers: Sequence[Observer] | None) -> tuple[Observer, ...]:
    """The observers an interpreter gives each run; None: the default, logging to the
    `pipeline` logger (`interpreters.observers.logs`)."""
    return tuple(observers) if observers is not None else (LogObserver(),)


class InterpreterBase(Generic[P]):
    """The construction and the start of a run shared by the sync and async interpreters
    (`P`: the kind of provider they call)."""

    def __init__(
        self,
        provider: P | None,
        resolve: Callable[[str], P] | None,
        handlers: Mapping[type, Handler] | None,
        *,
        sync: bool,
        clock: Callable[[], float],
        run_ids: Callable[[], str],
        observers: Sequence[Observer] | None,
        price: Pricer | None,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self._resolve = resolver(provider, resolve)
        self.breaker = breaker if breaker is not None else PROCESS_BREAKER
        """The circuit breaker of fallback models (`interpreters.core.breaker`)."""
        self._handlers = Handlers.of(handlers, sync=sync).with_defaults(self.breaker.handlers())
        self._clock = clock
        self._run_ids = run_ids
        self._observers = observers_or_default(observers)
        self._price = price

    def _check_agent(self, agent: Agent) -> None:
        """Refuse an agent this interpreter cannot run (before its model is resolved)."""

    def _start(self, agent: Agent, messages: RunInput, options: RunOptions) -> Driver:
        """The driver of a new run; TypeError/ValueError for a bad option, the provider's
        configuration error for a model it cannot serve (`check_model`)."""
        check_options(options)
        self._check_agent(agent)
        check_models(self._resolve, agent)
        return start_run(
            agent, messages, run_id=self._run_ids(), clock=self._clock, options=options,
            observers=self._observers, price=self._price,
        )


class RunOutcome(Generic[Output]):
    """A run stream's `done` and `result`, over its `_outcome()` (None while it runs)."""

    __slots__ = ()

    def _outcome(self) -> RunResult[Output] | None:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        """Whether the run is over (`result` is there)."""
        return self._outcome() is not None

    @property
    def result(self) -> RunResult[Output]:
        result = self._outcome()
        if result is None:
            raise RuntimeError("the run has not finished: iterate the stream to its end")
        return result


class AsyncNotSupportedError(TypeError):
    """The sync interpreter was given an async hook or tool."""


def refuse_async(agent: Agent) -> None:
    parts = agent.async_parts()
    if parts:
        raise AsyncNotSupportedError(
            "the sync interpreter cannot run async code: "
            + "; ".join(parts)
            + ". Use interpreters.aio.AsyncInterpreter."
        )
