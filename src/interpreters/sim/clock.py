"""Virtual time for the simulators: the clock (`VirtualClock`), a run's `timeout=` as an
alarm on it (`VirtualDeadline`, `Deadlines`), and started requests carried out on it
(`Virtual`, the sync simulator's).

A timeout in virtual seconds is an alarm on the clock: when latency or retry backoff
brings the clock to it, the clock stops there and the alarm cancels the run's signal
(linked to the caller's own), so the run ends cancelled ("timed out after N s") as a real
run past its timeout does. A started job is carried out when started, with the clock set
aside (`VirtualClock.aside`), and is ready once the clock reaches its start plus the
virtual time it took.
"""

from __future__ import annotations

import asyncio
import heapq
import weakref
from collections.abc import Callable, Sized
from typing import TypeVar

import anyio
import anyio.lowlevel

from effects.started import Collect, Ready, Start
from interpreters.core.cancel import CancelSignal
from interpreters.core.deadline import timed_out
from interpreters.run.started import Outcome, answer_of, carry_out, unknown

T = TypeVar("T")


class VirtualClock:
    """Time that moves only when told to, or, for tasks, when they all wait on it.

    `sleep`/`advance` move it at once (the sync simulator). Under anyio, `wait(seconds)`
    blocks the calling task until virtual time reaches its wake time, and the clock jumps
    there as soon as no task can run (every one waits on something): a wait of a minute
    ends at once in real time, and concurrent waits end in virtual-time order (equal
    times in the order they began, one at a time, each woken task running until it
    waits again). This is trio's `MockClock` autojump, for the waits made through the
    clock: an `anyio.sleep` elsewhere is real time, and the clock may jump while a task
    waits on real I/O or a thread.

    An alarm (`alarm(at, ring)`) is how a virtual timeout works: a sleep, or a jump, that
    reaches it calls `ring()`, and if `ring` says it acted (returns True) the sleep ends
    there, at `at`, as a real sleep is cut short by its timeout (a jump stops there: the
    waits the alarm cancelled end cancelled, later ones wait on). Each alarm rings once.
    """

    __slots__ = ("_alarms", "_driver", "_next_alarm", "_seq", "_sleepers", "now")

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self._alarms: dict[int, tuple[float, Callable[[], bool]]] = {}
        self._next_alarm = 0
        self._sleepers: list[tuple[float, int, _Sleeper]] = []
        """The waits in progress (a heap by wake time, then arrival); ended ones are
        dropped when they come to the top."""
        self._seq = 0
        self._driver: _Sleeper | None = None
        """The wait whose task watches for the moment nobody can run, and jumps."""

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> bool:
        """Sleep `seconds`; True when an alarm rang and cut the sleep short."""
        target = self.now + max(0.0, seconds)
        if self._alarms:
            due = sorted((at, h) for h, (at, _) in self._alarms.items() if at <= target)
            for at, h in due:
                _, ring = self._alarms.pop(h)
                self.now = max(self.now, at)
                if ring():
                    return True
        self.now = target
        return False

    def aside(self, fn: Callable[[], T]) -> tuple[T, float]:
        """`fn()` and the virtual time it took, with the clock put back where it was and
        no alarm rung meanwhile: how the sync simulator runs a started job (a judge call
        in flight) whose time passes beside the run's (`interpreters.run.started.Virtual`)."""
        now, alarms = self.now, self._alarms
        self._alarms = {}
        try:
            value = fn()
        finally:
            took = self.now - now
            self.now = now
            alarms.update(self._alarms)
            self._alarms = alarms
        return value, took

    def alarm(self, at: float, ring: Callable[[], bool]) -> int:
        """Call `ring` when a sleep reaches virtual time `at`; a handle to cancel it."""
        self._next_alarm += 1
        self._alarms[self._next_alarm] = (at, ring)
        return self._next_alarm

    def cancel_alarm(self, handle: int) -> None:
        self._alarms.pop(handle, None)

    @property
    def pending_alarms(self) -> int:
        """Alarms set that have neither rung nor been cancelled."""
        return len(self._alarms)

    @property
    def waiting(self) -> int:
        """Tasks in `wait` now."""
        return sum(1 for _, _, s in self._sleepers if not s.ended)

    async def wait(self, seconds: float) -> None:
        """Wait `seconds` of virtual time (see the class); 0 or less is a checkpoint."""
        if not seconds > 0:
            await anyio.lowlevel.checkpoint()
            return
        me = _Sleeper()
        self._seq += 1
        heapq.heappush(self._sleepers, (self.now + seconds, self._seq, me))
        try:
            while not me.woken:
                if self._driver is not None:
                    await me.event.wait()  # woken, or asked to drive (`_hand_over`)
                    continue
                self._driver = me
                try:
                    await until_idle()
                    self._jump()
                finally:
                    self._driver = None
        finally:
            me.ended = True
            if self._driver is None:
                self._hand_over()

    def _jump(self) -> None:
        """Nobody can run: move to the earliest wake time and wake that one wait (or stop
        at an alarm on the way that acted: the waits it cancelled end first)."""
        heap = self._sleepers
        while heap and heap[0][2].ended:
            heapq.heappop(heap)
        if not heap:
            return
        at = heap[0][0]
        if at > self.now and self.advance(at - self.now):
            return
        woken = heapq.heappop(heap)[2]
        woken.woken = True
        woken.event.set()

    def _hand_over(self) -> None:
        """The driver left: the earliest wait still on takes over (if any)."""
        live = [k for k in self._sleepers if not k[2].ended]
        if live:
            s = min(live)[2]
            s.event.set()
            s.event = anyio.Event()  # (its waiter holds the one set)


class _Sleeper:
    """One task in `VirtualClock.wait`."""

    __slots__ = ("ended", "event", "woken")

    def __init__(self) -> None:
        self.woken = False
        self.ended = False
        self.event = anyio.Event()


async def until_idle() -> None:
    """Return once no other task can run: each one waits on something (what the virtual
    clock waits for before it jumps; tests use it to let every task go as far as it can).
    Tasks that call it together return together, as trio's `wait_all_tasks_blocked`."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: trio
        import trio.testing

        await trio.testing.wait_all_tasks_blocked()
        return
    ready: Sized | None = getattr(loop, "_ready", None)  # the handles due this turn
    if ready is None:  # an event loop without it: anyio's polling check
        await anyio.wait_all_tasks_blocked()
        return
    while True:
        check = _idle_checks.get(loop)
        if check is None:
            break
        await check.event.wait()  # another task looks, for all (two would keep each other busy)
        if check.reached:
            return
    check = _idle_checks[loop] = _IdleCheck()
    try:
        await anyio.lowlevel.checkpoint()
        while len(ready):
            await anyio.lowlevel.checkpoint()
        check.reached = True
    finally:
        del _idle_checks[loop]
        check.event.set()


class _IdleCheck:
    """One task's look for idleness on an asyncio loop, which others wait for."""

    __slots__ = ("event", "reached")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.reached = False


_idle_checks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _IdleCheck] = (
    weakref.WeakKeyDictionary()
)


# gc=False: untracked by the collector (no cycle goes through it; tests/test_gc_untracked.py)


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


class Virtual:
    """Each job carried out when started, with the virtual clock set aside: ready once
    the clock reaches its start plus the virtual time it took."""

    __slots__ = ("_clock", "_jobs", "_next", "_perform")

    def __init__(self, perform: Callable[[object], object], clock: VirtualClock) -> None:
        self._perform = perform
        self._clock = clock
        self._jobs: dict[int, tuple[float, Outcome]] = {}
        self._next = 0

    def answer(self, request: object) -> object:
        t = type(request)
        clock = self._clock
        if t is Start:
            assert isinstance(request, Start)
            ticket, self._next = self._next, self._next + 1
            outcome, took = clock.aside(lambda: carry_out(self._perform, request.request))
            self._jobs[ticket] = (clock.now + took, outcome)
            return ticket
        if t is Ready:
            assert isinstance(request, Ready)
            job = self._jobs.get(request.ticket)
            return job is not None and clock.now >= job[0]
        assert isinstance(request, Collect)
        ticket = request.job.ticket
        if ticket not in self._jobs:
            raise unknown(ticket)
        at, outcome = self._jobs.pop(ticket)
        if at > clock.now and clock.advance(at - clock.now):
            raise TimeoutError(f"the run's deadline came while job {ticket} ran")
        return answer_of(outcome)

    def close(self) -> None:
        self._jobs.clear()
