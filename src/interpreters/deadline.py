"""The deadline of the run in progress, for the providers it calls.

The sync interpreter sets it (a `time.monotonic()` value) while it opens a model stream
under `run(..., timeout=)`, so an HTTP provider never waits past the run's end: its own
deadline (`Timeouts.total`) is cut to the run's. The async interpreter needs none of
this (a cancel scope ends the wait), but a provider reads it the same way under both.
"""

from __future__ import annotations

from contextvars import ContextVar

run_deadline: ContextVar[float | None] = ContextVar("run_deadline", default=None)
"""`time.monotonic()` at which the current run ends, or None (no run timeout)."""
