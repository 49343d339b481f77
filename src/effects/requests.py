"""Requests: the I/O a processor's generator hook asks for (the twin of `Command[R]`).

A hook that is a generator yields a `Request[R]` and is sent its answer, an `R`: an
`AskModel` (a judge's model call) is answered with a `ModelAnswer`; a request of your own
is answered by the handler an interpreter was given for it (`interpreters.Handlers`,
which checks with mypy that the handler gives an `R`). `answer = yield from ask(request)`
gives the hook the answer typed, and checked at run time.
"""

from __future__ import annotations

from collections.abc import Generator
from functools import cache
from typing import Any, Generic, Protocol, TypeVar, cast, get_args, get_origin

import msgspec

R = TypeVar("R")
Q_co = TypeVar("Q_co", covariant=True)


class Request(msgspec.Struct, Generic[R], frozen=True):
    """What a generator hook may yield; its answer is an `R`.

    Invariant in R (unlike `Command`), so that the request's class fixes its handler's
    answer type exactly (`Handlers.add`)."""

    def _answer(self, answer: R, /) -> R:
        """Typing only: ties this request's class to its answer type (`RequestClass`)."""
        return answer


class RequestClass(Protocol[Q_co, R]):
    """A request class (`AskModel`) as a type: the requests it makes (Q_co) and their
    answer (R), both read off the class by mypy."""

    def __call__(self, *args: Any, **kwargs: Any) -> Q_co: ...

    def _answer(self, request: Request[R], answer: R, /) -> R: ...


@cache
def answer_type(request_type: type[Request[Any]]) -> type | None:
    """The class a request class's answers must be (`AskModel` -> `ModelAnswer`), when
    its `Request[...]` base names a plain class; None when it cannot be checked."""
    for klass in request_type.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            if get_origin(base) is Request:
                (answer,) = get_args(base)
                ok = isinstance(answer, type) and get_origin(answer) is None
                return answer if ok and answer is not object else None
    return None


@cache
def declared_answer(request_type: type[Request[Any]]) -> object | None:
    """The answer type a request class declares, whole (`tuple[Message, ...]`), for
    rebuilding an answer read back as plain JSON (a journal's replay); None when its
    base does not name one."""
    for klass in request_type.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            if get_origin(base) is Request:
                (answer,) = get_args(base)
                return None if answer is object or isinstance(answer, TypeVar) else answer
    return None


class WrongAnswer(TypeError):
    """A request was answered with a value of another type than its class declares."""


def ask(request: Request[R]) -> Generator[Request[R], object, R]:
    """In a generator hook, `answer = yield from ask(request)`: the interpreter's answer,
    typed as the request's; WrongAnswer when it is not of the declared class."""
    answer = yield request
    want = answer_type(type(request))
    if want is not None and not isinstance(answer, want):
        raise WrongAnswer(
            f"{type(request).__name__} was answered with a {type(answer).__name__}, "
            f"not a {want.__name__}"
        )
    return cast("R", answer)  # checked above, as far as run time can


class Write(Request[None], frozen=True):
    """Base of the requests that write what a run approved (memory's saves). Asked in
    `process_approved`, a write is not carried out at once: the loop answers it None and
    keeps it, and once every `process_approved` hook returned it asks for the run's
    writes together (`CommitWrites`), so they are kept all or none: a hook that fails, or
    a cancel before the commit began, leaves nothing written. Asked in another hook, it
    goes to its handler like any request."""


class CommitWrites(Request[None], frozen=True):
    """The writes a run's `process_approved` hooks asked for, in the order they asked:
    carry them out in one transaction per store, all or none. Answer: None.

    The last I/O of a run: once it began, a cancel is too late and the run finishes with
    its answer (every interpreter lets it complete; the async ones shield it)."""

    writes: tuple[Write, ...]
