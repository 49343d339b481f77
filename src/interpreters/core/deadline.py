"""The stop conditions of the run in progress, for the providers it calls.

The sync interpreter cannot be interrupted while a provider reads: it is the same
thread. So while it opens a model stream under `run(..., timeout=, signal=)` it sets
`run_stop`, and an HTTP provider cuts its own deadline (`Timeouts.total`) to the run's
and checks the cancel signal at every read. The async interpreter needs none of this (a
cancel scope ends any wait), but a provider reads it the same way under both.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from interpreters.core.cancel import CancelSignal


class RunStop(Protocol):
    """What a provider may ask of the run it serves."""

    @property
    def deadline(self) -> float | None:
        """`time.monotonic()` at which the run ends, or None (no run timeout)."""
        ...

    def reason(self) -> str | None:
        """Why the run must stop now (cancelled, timed out), or None."""
        ...


run_stop: ContextVar[RunStop | None] = ContextVar("run_stop", default=None)
"""The run the current model call belongs to, when it has a timeout or a signal."""


def timed_out(timeout: float) -> str:
    """The cancel reason of a run past its `timeout` (seconds), under every interpreter."""
    return f"timed out after {timeout:g} s"


class StopCheck:
    """A run's cancel signal and timeout, read on a clock (`now`: `time.monotonic` for
    the sync interpreter, whose `run_stop` this is; the event loop's under anyio)."""

    __slots__ = ("active", "deadline", "now", "signal", "timeout")

    def __init__(
        self,
        signal: CancelSignal | None,
        timeout: float | None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.signal = signal
        self.timeout = timeout
        self.now = now
        self.deadline: float | None = None
        """`now()` at which the run ends, once counting started (`start`)."""
        self.active = signal is not None or timeout is not None
        """Whether there is a stop to check."""

    def start(self) -> None:
        """Start counting the timeout (once: at the run's first command)."""
        if self.timeout is not None and self.deadline is None:
            self.deadline = self.now() + self.timeout

    def left(self) -> float:
        """Seconds until the deadline (inf: no timeout)."""
        return math.inf if self.deadline is None else max(0.0, self.deadline - self.now())

    def reason(self) -> str | None:
        """Why the run must stop now (its signal's reason, its timeout), or None."""
        if self.signal is not None and self.signal.cancelled:
            return self.signal.reason
        if self.deadline is not None and self.now() >= self.deadline:
            assert self.timeout is not None
            return timed_out(self.timeout)
        return None
