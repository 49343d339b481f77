"""Observers are told a run's end exactly once, however the run stops: to its end, by a
cancel, by closing its stream, or by dropping a stream that was started."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable

import anyio
import pytest

from interpreters.aio import AsyncInterpreter, AsyncRunStream
from interpreters.observers.observe import RunInfo, RunObserver
from interpreters.sync import SyncInterpreter
from interpreters.testing import Say, ScriptedModel
from pipeline.values.result import RunResult

from .helpers import make_agent


class Ends(RunObserver):
    def __init__(self) -> None:
        self.ends: list[str | None] = []

    def end(self, result: RunResult | None, at: float) -> None:
        self.ends.append(None if result is None else result.status)


class Watching:
    def __init__(self) -> None:
        self.runs: list[Ends] = []

    def start(self, run: RunInfo) -> RunObserver:
        o = Ends()
        self.runs.append(o)
        return o


def model() -> ScriptedModel:
    return ScriptedModel([Say(["a", "b", "c"])])


async def dropped(stream: AsyncRunStream[None]) -> None:
    await stream.__anext__()
    del stream
    gc.collect()


async def closed(stream: AsyncRunStream[None]) -> None:
    await stream.aclose()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize(("stop", "end"), [(dropped, None), (closed, "cancelled")])
def test_an_async_stream_dropped_mid_run_or_closed_at_once_tells_its_observers_the_end_once(
    backend: str, stop: Callable[[AsyncRunStream[None]], Awaitable[None]], end: str | None
) -> None:
    w = Watching()
    interp = AsyncInterpreter(model(), observers=[w])

    async def main() -> None:
        await stop(interp.stream(make_agent(), "hi"))

    anyio.run(main, backend=backend)
    assert [o.ends for o in w.runs] == [[end]]


def test_a_sync_stream_dropped_mid_run_tells_its_observers_the_end_once() -> None:
    w = Watching()
    stream = SyncInterpreter(model(), observers=[w]).stream(make_agent(), "hi")
    next(iter(stream))
    del stream
    gc.collect()
    assert [o.ends for o in w.runs] == [[None]]


def test_a_sync_stream_closed_before_its_first_chunk_tells_its_observers_the_end() -> None:
    w = Watching()
    stream = SyncInterpreter(model(), observers=[w]).stream(make_agent(), "hi")
    stream.close()
    assert [o.ends for o in w.runs] == [[None]]
