"""`next_within`: the async provider's read of the next chunk within the call's deadline.

No wall clock: `remaining` is driven by the number of waits the read has finished, so
"the deadline passes during the third wait" is exact. Run on asyncio and on trio.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import anyio
import pytest

from interpreters.providers.bounded_read import next_within, within


class Expired(Exception):
    pass


class Trickle:
    """An async iterator whose item k takes `waits[k]` short waits to arrive."""

    def __init__(self, waits: list[int]) -> None:
        self.waits = waits
        self.done_waits = 0
        self.cleaned_up = False

    async def items(self) -> AsyncGenerator[int, None]:
        try:
            for k, n in enumerate(self.waits):
                for _ in range(n):
                    await anyio.sleep(0.001)
                    self.done_waits += 1
                yield k
        finally:
            self.cleaned_up = True


def budget(t: Trickle, waits: int) -> float:
    """`remaining()` for a deadline that falls at the end of the `waits`-th wait."""
    return float(waits - t.done_waits)


@pytest.mark.anyio
async def test_items_that_need_no_wait_come_without_a_scope_and_the_end_is_none() -> None:
    t = Trickle([0, 0, 2])
    it = t.items()
    got = [await next_within(it, lambda: 100.0, Expired, patience=1.0) for _ in range(4)]
    assert got == [0, 1, 2, None]


@pytest.mark.anyio
async def test_a_read_whose_wait_ends_past_the_deadline_fails_there_and_cleans_up() -> None:
    # patience 1: no single wait can outlast the deadline, so the read runs bare and is
    # checked after each wait; the deadline falls at the end of the 3rd wait of item 1.
    t = Trickle([1, 5])
    it = t.items()
    assert await next_within(it, lambda: budget(t, 3) + 0.5, Expired, patience=0.5) == 0
    with pytest.raises(Expired):
        await next_within(it, lambda: budget(t, 3), Expired, patience=0.5)
    assert t.done_waits == 3  # not one wait more
    assert t.cleaned_up


@pytest.mark.anyio
async def test_near_the_deadline_the_whole_read_is_bounded_by_what_is_left() -> None:
    # Less left than one wait may last: the read runs in a scope of what is left and is
    # cancelled mid-wait (here: at once, 0 s left), then `expired()` is raised.
    t = Trickle([4])
    it = t.items()
    with pytest.raises(Expired):
        await next_within(it, lambda: 0.0, Expired, patience=1.0)
    assert t.done_waits == 0


@pytest.mark.anyio
async def test_a_cancel_from_outside_reaches_the_waiting_read() -> None:
    t = Trickle([10**6])
    it = t.items()
    with anyio.move_on_after(0.02) as scope:
        await next_within(it, lambda: 1e9, Expired, patience=1.0)
    assert scope.cancelled_caught
    await it.aclose()
    assert t.cleaned_up


@pytest.mark.anyio
async def test_an_error_of_the_read_comes_out_as_it_is() -> None:
    async def broken() -> AsyncIterator[int]:
        await anyio.sleep(0.001)
        raise ValueError("connection reset")
        yield 0  # an async generator

    with pytest.raises(ValueError, match="connection reset"):
        await next_within(broken(), lambda: 1e9, Expired, patience=1.0)


# --- `within`: the same reads as one generator over the whole body (deadline, clock) ---


async def _all(items: AsyncIterator[int]) -> list[int]:
    return [i async for i in items]


@pytest.mark.anyio
async def test_within_hands_out_every_item_and_ends_with_the_iterator() -> None:
    t = Trickle([0, 0, 2, 0])
    got = await _all(within(t.items(), 100.0, Expired, 1.0, clock=lambda: t.done_waits))
    assert got == [0, 1, 2, 3]
    assert t.cleaned_up


@pytest.mark.anyio
async def test_within_fails_a_read_whose_wait_ends_past_the_deadline_and_cleans_up() -> None:
    # The deadline falls at the end of the 3rd wait, in the middle of item 1's five; no
    # single wait (patience 0.5) can outlast it, so the reads run bare, checked per wait.
    t = Trickle([1, 5])
    got: list[int] = []
    with pytest.raises(Expired):
        async for i in within(t.items(), 3.0, Expired, 0.5, clock=lambda: t.done_waits):
            got.append(i)
    assert got == [0]
    assert t.done_waits == 3  # not one wait more
    assert t.cleaned_up


@pytest.mark.anyio
async def test_within_bounds_a_read_near_the_deadline_by_what_is_left() -> None:
    # After item 0, less than one wait's patience is left: item 1 is read in a scope of
    # what is left (here nothing), cancelled mid-wait, and `expired()` raised.
    t = Trickle([2, 4])
    got: list[int] = []
    with pytest.raises(Expired):
        async for i in within(t.items(), 2.0, Expired, 1.0, clock=lambda: t.done_waits):
            got.append(i)
    assert (got, t.done_waits) == ([0], 2)


@pytest.mark.anyio
async def test_within_lets_a_cancel_from_outside_reach_the_waiting_read() -> None:
    t = Trickle([0, 10**6])
    reads = within(t.items(), 1e9, Expired, 1.0, clock=lambda: 0.0)
    got: list[int] = []
    with anyio.move_on_after(0.02) as scope:
        async for i in reads:
            got.append(i)
    assert scope.cancelled_caught
    assert got == [0]
    await reads.aclose()
    assert t.cleaned_up


@pytest.mark.anyio
async def test_within_passes_an_error_of_the_read_on_as_it_is() -> None:
    async def broken() -> AsyncIterator[int]:
        yield 0
        await anyio.sleep(0.001)
        raise ValueError("connection reset")

    got: list[int] = []
    with pytest.raises(ValueError, match="connection reset"):
        async for i in within(broken(), 1e9, Expired, 1.0, clock=lambda: 0.0):
            got.append(i)
    assert got == [0]


class Countdown:
    """An async iterator that is not a generator (its `__anext__` is a coroutine)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __aiter__(self) -> Countdown:
        return self

    async def __anext__(self) -> int:
        if self.n == 0:
            raise StopAsyncIteration
        if self.n % 2:
            await anyio.sleep(0.001)  # every other item waits
        self.n -= 1
        return self.n


@pytest.mark.anyio
async def test_within_reads_any_async_iterator_not_only_generators() -> None:
    got = await _all(within(Countdown(4), 1e9, Expired, 1.0, clock=lambda: 0.0))
    assert got == [3, 2, 1, 0]
