"""The stop conditions of the run in progress, for the providers it calls.

The sync interpreter cannot be interrupted while a provider reads: it is the same
thread. So while it opens a model stream under `run(..., timeout=, signal=)` it sets
`run_stop`, and an HTTP provider cuts its own deadline (`Timeouts.total`) to the run's
and checks the cancel signal at every read. The async interpreter needs none of this (a
cancel scope ends any wait), but a provider reads it the same way under both.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol


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
