"""Started requests: I/O a generator hook starts without waiting, and collects later.

`job = yield from start(request)` hands `request` to the interpreter to carry out in the
background and goes on at once; `(yield from ready(job))` says, without waiting, whether
its answer is there; `answer = yield from collect(job)` waits for it (the answer typed as
the request's, or the request's failure raised into the hook). A stream hook uses them
to judge window N+1 while window N is still with the judge (`ModerationProcessor`).

They are requests like any other (`Perform` carries them), so the protocol has no new
command. Every interpreter answers them: the sync one in worker threads, the async one
in a task group, the simulators on virtual time (a started call finishes its latency
after it started), the durable loop in order (a started call is performed, as its own
checkpointed step, when it is started; `ready` is then always true), and a journal's
replay from the journal (each start, ready and collect reply was recorded).

A job is collected once. A run that ends with jobs not collected drops their answers
(the interpreter cancels or forgets them); nothing waits on them.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Generic, TypeVar, cast

import msgspec

from effects.requests import Request, WrongAnswer, answer_type

R = TypeVar("R")


class Job(msgspec.Struct, Generic[R], frozen=True):
    """A started request: its ticket (given by the interpreter, in the order of the starts
    of the run: 0, 1, 2...) and the request, whose answer (an `R`) `collect` gives."""

    ticket: int
    request: Request[R]


class Start(Request[int], Generic[R], frozen=True):
    """Start `request` in the background. Answer: its ticket, at once."""

    request: Request[R]


class Ready(Request[bool], frozen=True):
    """Whether the answer of the job with `ticket` is there (collect will not wait).
    Answer: a bool, at once."""

    ticket: int


class Collect(Request[R], Generic[R], frozen=True):
    """Wait for the answer of `job` (within the run's deadline). Answer: the answer of its
    request, or its failure raised."""

    job: Job[R]


def start(request: Request[R]) -> Generator[Start[R], object, Job[R]]:
    """In a generator hook, `job = yield from start(request)`: start it, do not wait."""
    ticket = yield Start(request)
    if type(ticket) is not int:
        raise TypeError(f"Start was answered with {ticket!r}, not a ticket (an int)")
    return Job(ticket, request)


def ready(job: Job[R]) -> Generator[Ready, object, bool]:
    """In a generator hook, `if (yield from ready(job)):` its answer is there."""
    answer = yield Ready(job.ticket)
    if type(answer) is not bool:
        raise TypeError(f"Ready was answered with {answer!r}, not a bool")
    return answer


def collect(job: Job[R]) -> Generator[Collect[R], object, R]:
    """In a generator hook, `answer = yield from collect(job)`: wait for its answer."""
    answer = yield Collect(job)
    want = answer_type(type(job.request))
    if want is not None and not isinstance(answer, want):
        raise WrongAnswer(
            f"{type(job.request).__name__} was answered with a {type(answer).__name__}, "
            f"not a {want.__name__}"
        )
    return cast("R", answer)  # checked above, as far as run time can


STARTED_REQUESTS: frozenset[type] = frozenset((Start, Ready, Collect))
"""The request classes an interpreter answers itself, for every hook (not by a handler)."""

__all__ = ["STARTED_REQUESTS", "Collect", "Job", "Ready", "Start", "collect", "ready", "start"]
