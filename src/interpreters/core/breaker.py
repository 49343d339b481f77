"""The circuit breaker of fallback models: a model that keeps failing is skipped for a
while, so a step goes straight to its next fallback model instead of waiting out the
failing one's retries and timeouts.

The loop asks it (`pipeline.values.fallback`): `CircuitCheck` before a step's first
attempt (which models of the chain to skip now), `CircuitReport` after its last (how
each attempt went). Every interpreter answers both with its breaker, by default the one
of the process (`PROCESS_BREAKER`): runs in one process learn from each other's
failures. The simulators have one each, on their virtual clock. The answers are
recorded like any request's (a journal, a durable run's steps), so a replay or a
recovery skips what the run skipped.

Per model id: `failures` failures in a row (of the kinds in `counts`) open its circuit
for `cooldown` seconds; once they passed it is half-open: the next call goes through, an
answer closes the circuit, a failure opens it again for another cooldown.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Literal

import msgspec

from pipeline.values.fallback import (
    DEFAULT_FAIL_OVER,
    FAILURE_KINDS,
    CircuitCheck,
    CircuitReport,
    CircuitStates,
    FailureKind,
)

CircuitState = Literal["closed", "open", "half-open"]


class ModelCircuit(msgspec.Struct, frozen=True):
    """One model's circuit as the breaker sees it now (`CircuitBreaker.circuit`)."""

    model: str
    state: CircuitState
    failures: int
    """Failures in a row."""
    open_until: float | None = None
    """When an open circuit becomes half-open (the breaker's clock)."""


class _Entry:
    __slots__ = ("failures", "until")

    def __init__(self) -> None:
        self.failures = 0
        self.until: float | None = None


class CircuitBreaker:
    """Which models to skip for now, from how their calls went (see the module doc).

    Thread-safe: the sync interpreter's runs may share one from many threads."""

    def __init__(
        self,
        *,
        failures: int = 3,
        cooldown: float = 30.0,
        counts: Iterable[FailureKind] = DEFAULT_FAIL_OVER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if type(failures) is not int or failures < 1:
            raise ValueError(f"CircuitBreaker(failures=) must be an int >= 1, got {failures!r}")
        if type(cooldown) not in (int, float) or not cooldown > 0:
            raise ValueError(f"CircuitBreaker(cooldown=) must be seconds > 0, got {cooldown!r}")
        kinds = frozenset(counts)
        bad = sorted(kinds - FAILURE_KINDS)
        if bad:
            raise ValueError(f"CircuitBreaker(counts=): unknown failure kinds {bad}")
        self.failures = failures
        self.cooldown = float(cooldown)
        self.counts = kinds
        self._clock = clock
        self._lock = threading.Lock()
        self._models: dict[str, _Entry] = {}

    def check(self, request: CircuitCheck) -> CircuitStates:
        """The answer to `CircuitCheck`: the models of the chain open now, and those
        with failures (their next outcome is reported)."""
        now = self._clock()
        opened: list[str] = []
        watched: list[str] = []
        with self._lock:
            for model in request.models:
                e = self._models.get(model)
                if e is None:
                    continue
                watched.append(model)
                if e.until is not None and now < e.until:
                    opened.append(model)
        return CircuitStates(tuple(opened), tuple(watched))

    def report(self, request: CircuitReport) -> bool:
        """The answer to `CircuitReport`: each outcome noted (True)."""
        now = self._clock()
        with self._lock:
            for o in request.outcomes:
                if o.failed is None:
                    self._models.pop(o.model, None)  # it answered: closed
                    continue
                if o.failed not in self.counts:
                    continue
                e = self._models.get(o.model)
                if e is None:
                    e = self._models[o.model] = _Entry()
                e.failures += 1
                if e.failures >= self.failures:
                    e.until = now + self.cooldown
        return True

    def circuit(self, model: str) -> ModelCircuit:
        """`model`'s circuit now (for a health page, or a test)."""
        now = self._clock()
        with self._lock:
            e = self._models.get(model)
            if e is None:
                return ModelCircuit(model, "closed", 0)
            if e.until is None:
                return ModelCircuit(model, "closed", e.failures)
            state: CircuitState = "open" if now < e.until else "half-open"
            return ModelCircuit(model, state, e.failures, e.until)

    def reset(self) -> None:
        """Forget every model's failures."""
        with self._lock:
            self._models.clear()

    def handlers(self) -> dict[type, Callable[[object], object]]:
        """The request handlers an interpreter answers the loop's requests with."""

        def check(request: object) -> object:
            assert isinstance(request, CircuitCheck)
            return self.check(request)

        def report(request: object) -> object:
            assert isinstance(request, CircuitReport)
            return self.report(request)

        return {CircuitCheck: check, CircuitReport: report}


PROCESS_BREAKER = CircuitBreaker()
"""The breaker of every interpreter made without one (on `time.monotonic`)."""


__all__ = ["PROCESS_BREAKER", "CircuitBreaker", "CircuitState", "ModelCircuit"]
