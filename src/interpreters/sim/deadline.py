"""A simulated run's `timeout=` on the virtual clock, shared by both simulators.

A timeout in virtual seconds is an alarm on the `VirtualClock`: when latency or retry
backoff brings the clock to it, the clock stops there and the alarm cancels the run's
signal (linked to the caller's own), so the run ends cancelled ("timed out after N s")
as a real run past its timeout does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from interpreters.core.cancel import CancelSignal
from interpreters.core.deadline import timed_out

if TYPE_CHECKING:
    from interpreters.sim.clock import VirtualClock


class _LinkedSignal(CancelSignal):
    """Cancelled by its own `cancel()` (the deadline) or by the caller's signal."""

    __slots__ = ("_parent",)

    def __init__(self, parent: CancelSignal | None) -> None:
        super().__init__()
        self._parent = parent

    @property
    def cancelled(self) -> bool:
        return super().cancelled or (self._parent is not None and self._parent.cancelled)

    @property
    def reason(self) -> str | None:
        own = super().reason
        return own if own is not None or self._parent is None else self._parent.reason

    def watch(self, scope: anyio.CancelScope) -> None:
        super().watch(scope)
        if self._parent is not None:
            self._parent.watch(scope)

    def unwatch(self, scope: anyio.CancelScope) -> None:
        super().unwatch(scope)
        if self._parent is not None:
            self._parent.unwatch(scope)


class VirtualDeadline:
    """A run's timeout on the virtual clock: an alarm that cancels the run's signal."""

    def __init__(self, clock: VirtualClock, timeout: float, parent: CancelSignal | None):
        self.signal = _LinkedSignal(parent)
        self.done: Callable[[], bool] = lambda: False
        self._clock = clock
        self.at = clock.now + timeout
        """The virtual instant it rings."""
        self._reason = timed_out(timeout)
        if timeout <= 0:
            self.signal.cancel(self._reason)
            self._handle: int | None = None
        else:
            self._handle = clock.alarm(self.at, self._ring)

    def _ring(self) -> bool:
        if self.done() or self.signal.cancelled:
            return False  # over already, or cancelled for another reason: time goes on
        self.signal.cancel(self._reason)
        return True

    def disarm(self) -> None:
        if self._handle is not None:
            self._clock.cancel_alarm(self._handle)


class Deadlines:
    """The virtual deadlines of one simulator's runs; those of streams handed out are
    disarmed once their run is over, so alarms do not pile up on a long-lived simulator."""

    def __init__(self, clock: VirtualClock) -> None:
        self._clock = clock
        self._streaming: list[VirtualDeadline] = []

    def start(self, signal: CancelSignal | None, timeout: float | None) -> VirtualDeadline | None:
        """The deadline of a run starting now, or None without a timeout.

        Raises ValueError for a timeout that is not a number of seconds >= 0."""
        if timeout is None:
            return None
        if not timeout >= 0:
            raise ValueError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
        live = []
        for d in self._streaming:
            if d.done():
                d.disarm()
            else:
                live.append(d)
        self._streaming = live
        return VirtualDeadline(self._clock, timeout, signal)

    def streaming(self, deadline: VirtualDeadline, done: Callable[[], bool]) -> None:
        """`deadline` belongs to a stream handed out; `done` says when its run is over."""
        deadline.done = done
        self._streaming.append(deadline)


__all__ = ["Deadlines", "VirtualDeadline"]
