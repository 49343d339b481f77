"""Started requests on virtual time (the sync simulator): `Virtual`."""

from __future__ import annotations

from collections.abc import Callable

from effects.started import Collect, Ready, Start
from interpreters.run.started import Outcome, answer_of, carry_out, unknown
from interpreters.sim.clock import VirtualClock


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
