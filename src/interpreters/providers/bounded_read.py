"""The next chunk of a response within a deadline, without a cancel scope per chunk.

An async provider bounds its reads by what is left of its call's deadline. A cancel scope
around every read does that, but costs several microseconds (anyio's scope and its
timer), more than all the rest of the per-chunk work, while most reads of a fast stream
do not wait at all: the chunk is already buffered. So:

- when less than `patience` (the transport's own read timeout, which ends any single
  wait) is left, the read runs inside `anyio.move_on_after(what is left)`, as before;
- otherwise no wait of the read can outlast the deadline by itself, and the read runs
  bare, checked each time a wait ends: past the deadline, the read is failed there (a
  server trickling the bytes of one chunk's framing can thus hold a call at most one
  read timeout past its deadline, the sync provider's bound).

A cancel scope cannot be entered once the read is under way (its own scopes would then
close out of order), hence the choice at the start of each read.
"""

from __future__ import annotations

import time
import types
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator
from typing import TypeVar

import anyio

from interpreters.core.awaits import Rest, Step

_T = TypeVar("_T")


async def next_within(
    chunks: AsyncIterator[_T],
    remaining: Callable[[], float],
    expired: Callable[[], Exception],
    patience: float,
) -> _T | None:
    """The next item of `chunks`, None at its end; `expired()` is raised when the read
    would end past the deadline (`remaining()` seconds away). `patience`: the longest one
    wait of the read can last (the read timeout)."""
    if remaining() < patience:
        with anyio.move_on_after(remaining()):
            try:
                return await chunks.__anext__()
            except StopAsyncIteration:
                return None
        raise expired()
    step = chunks.__anext__().__await__()
    try:
        first = step.send(None)
    except StopIteration as done:
        value: _T = done.value  # ready without waiting
        return value
    except StopAsyncIteration:
        return None
    try:
        return await Rest(step, first, remaining, expired)
    except StopAsyncIteration:
        return None


async def within(
    chunks: AsyncIterator[_T],
    deadline: float,
    expired: Callable[[], Exception],
    patience: float,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncGenerator[_T, None]:
    """The items of `chunks`, each read as `next_within` reads it (what is left is
    `deadline - clock()`), as one generator: an item there without a wait costs no
    coroutine of its own and one clock reading (this runs once per streamed
    chunk). No cancel scope is open at its yields."""

    def remaining() -> float:
        return deadline - clock()

    bare_until = deadline - patience  # until then no one wait can outlast the deadline
    start: Callable[[], Step[_T]]
    if isinstance(chunks, AsyncGenerator):
        start = chunks.__anext__  # (a step itself: no __await__ per item)
    else:
        anext = chunks.__anext__

        def start() -> Step[_T]:
            return anext().__await__()

    while True:
        if clock() > bare_until:
            scoped = await next_within(chunks, remaining, expired, patience)
            if scoped is None:
                return
            yield scoped
            continue
        # `Rest`'s loop, inline: a read that waits costs no object of its own (this
        # runs once per streamed chunk, and nearly every read waits for the event loop).
        step = start()
        sent: object = None
        thrown: BaseException | None = None
        while True:
            try:
                out = step.send(sent) if thrown is None else step.throw(thrown)
            except StopIteration as done:
                item: _T = done.value
                break
            except StopAsyncIteration:
                return
            try:
                sent = await _handed_on(out)
            except GeneratorExit:
                step.close()
                raise
            except BaseException as e:  # a cancellation: in where the read waits
                thrown = e
            else:
                thrown = None if clock() < deadline else expired()
        yield item  # type: ignore[possibly-undefined]  # (the loop ends by `break` only)


@types.coroutine
def _handed_on(out: object) -> Generator[object, object, object]:
    """Hand what a read yielded (`out`) to the event loop, and return its answer."""
    return (yield out)
