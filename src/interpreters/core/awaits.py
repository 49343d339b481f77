"""An awaitable stepped by hand, then awaited for the rest (`Rest`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Coroutine, Generator
from typing import Generic, TypeVar

_T = TypeVar("_T")

Step = Generator[object, object, _T] | Coroutine[object, object, _T]
"""An awaitable under way, stepped by hand: what `__await__` gives, or a coroutine."""


def _no_deadline() -> float:
    return math.inf


class Rest(Generic[_T]):
    """The rest of an awaitable already run up to its first wait (`step`, which handed
    the event loop `first`). Awaiting this passes the loop's answers on to it,
    cancellation included, as if it were awaited directly; when a wait ends past the
    deadline (`remaining()` seconds away; by default none), `expired()` is thrown into
    it instead (it cleans up and raises it)."""

    __slots__ = ("_expired", "_first", "_remaining", "_step")

    def __init__(
        self,
        step: Step[_T],
        first: object,
        remaining: Callable[[], float] = _no_deadline,
        expired: Callable[[], Exception] = TimeoutError,
    ) -> None:
        self._step = step
        self._first = first
        self._remaining = remaining
        self._expired = expired

    def __await__(self) -> Generator[object, object, _T]:
        step, out = self._step, self._first
        while True:
            try:
                sent = yield out
            except GeneratorExit:
                step.close()
                raise
            except BaseException as e:  # a cancellation: in where the read waits
                thrown: BaseException = e
            else:
                if self._remaining() > 0:
                    try:
                        out = step.send(sent)
                    except StopIteration as done:
                        value: _T = done.value
                        return value
                    continue
                thrown = self._expired()
            try:
                out = step.throw(thrown)
            except StopIteration as done:
                value = done.value
                return value
