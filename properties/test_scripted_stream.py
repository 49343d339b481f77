"""`ScriptedModel.astream` gives what the async generator it replaced gave.

The simulator's async stream is a small iterator class (`ScriptedStream`) rather than an
async generator, so that the async interpreter can close it without a shielded
`aclose()` (W4 of bench/WORKLOADS.md). It is public behaviour (users iterate it in their
tests), so this property pins it to the generator it replaced, kept here as the
reference: for generated scripts (text, reasoning, data, tool calls, latency and chunk
latency, breaks with and without an error, unfinished streams, failures, a script that
runs out), read whole or closed after a few events, both give the same events, raise
the same errors at the same point, stop the same way after an error or a close, record
the request at the same moment (the first event, not `astream()`), and leave the
virtual clock at the same time, on asyncio and on trio.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Protocol

import anyio
import anyio.lowlevel
from hypothesis import given
from hypothesis import strategies as st

from interpreters.providers.provider import ProviderError
from interpreters.run.common import NoCleanupStream
from interpreters.sim.simulator import Scripted, _break_error, _cut
from interpreters.testing import Fail, Say, ScriptedModel
from pipeline.values.messages import user
from pipeline.values.model import ModelRequest
from properties.test_equivalence import fails, says

REQUEST = ModelRequest(model="m", system=(), messages=(user("hi", id="u1"),))


async def pause(model: ScriptedModel, seconds: float) -> None:
    """A pause of the scripted model: a real sleep, or a wait on the virtual clock."""
    if not seconds > 0:
        return
    if model._async_sleep is not None:
        await model._async_sleep(seconds)
    else:
        await model.clock.wait(seconds)


async def reference(model: ScriptedModel, request: ModelRequest) -> AsyncGenerator[object]:
    """`ScriptedModel.astream` as it was: an async generator."""
    n, step = model._next(request)
    if isinstance(step, Fail):
        await pause(model, step.latency)
        raise ProviderError(step.error())
    events = step.events(n)
    cut = _cut(step, events)
    await pause(model, step.latency)
    for i, e in enumerate(events[:cut]):
        if i and step.chunk_latency:
            await pause(model, step.chunk_latency)
        yield e
    if step.break_after is not None:
        raise ProviderError(_break_error(step))


class Stream(Protocol):
    def __anext__(self) -> Awaitable[object]: ...

    def aclose(self) -> Awaitable[object]: ...


Open = Callable[[ScriptedModel, ModelRequest], Stream]


async def read(
    open_: Open, script: list[Scripted], close_after: int | None, calls: int
) -> list[object]:
    """What a reader sees over `calls` model calls: per call, the requests recorded on
    opening, each event or error, what follows it, the requests and the clock."""
    model = ScriptedModel(script)
    seen: list[object] = []
    for _ in range(calls):
        stream = open_(model, REQUEST)
        seen.append(("opened", len(model.requests)))
        k = 0
        while True:
            if close_after is not None and k == close_after:
                await stream.aclose()
                seen.append("closed")
                break
            try:
                seen.append(await stream.__anext__())
            except StopAsyncIteration:
                seen.append("end")
                break
            except ProviderError as e:
                seen.append(("error", e.error))
                break
            k += 1
        try:  # after an end, an error or a close: it only stops
            seen.append(("then", await stream.__anext__()))
        except StopAsyncIteration:
            seen.append(("then", "end"))
        seen.append(("requests", len(model.requests), model.clock.now))
    return seen


@given(
    script=st.lists(st.one_of(says(), says(), fails), min_size=1, max_size=3),
    close_after=st.one_of(st.none(), st.integers(0, 5)),
    extra=st.integers(0, 1),
    backend=st.sampled_from(("asyncio", "trio")),
)
def test_the_scripted_stream_is_the_generator_it_replaced(
    script: list[Scripted], close_after: int | None, extra: int, backend: str
) -> None:
    calls = len(script) + extra  # one call past the script: it runs out

    def new(model: ScriptedModel, request: ModelRequest) -> Stream:
        return model.astream(request)

    async def both() -> tuple[list[object], list[object]]:
        return (
            await read(new, script, close_after, calls),
            await read(reference, script, close_after, calls),
        )

    got, want = anyio.run(both, backend=backend)
    assert got == want


def test_the_scripted_stream_needs_no_cleanup() -> None:
    model = ScriptedModel([Say("hi")])
    assert isinstance(model.astream(REQUEST), NoCleanupStream)
