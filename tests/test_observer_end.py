"""Observers are told a run's end exactly once, however the run stops: to its end, by a
cancel, by closing its stream, or by dropping a stream that was started."""

from __future__ import annotations

import gc

import anyio
import pytest

from interpreters.aio import AsyncInterpreter
from interpreters.observe import RunInfo, RunObserver
from interpreters.simulator import Say, ScriptedModel
from interpreters.sync import SyncInterpreter
from pipeline.result import RunResult

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


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_async_stream_dropped_mid_run_tells_its_observers_the_end_once(
    backend: str,
) -> None:
    w = Watching()
    interp = AsyncInterpreter(model(), observers=[w])

    async def main() -> None:
        stream = interp.stream(make_agent(), "hi")
        await stream.__anext__()
        del stream
        gc.collect()

    anyio.run(main, backend=backend)
    assert [o.ends for o in w.runs] == [[None]]


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


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_async_stream_closed_before_its_first_chunk_tells_its_observers_the_end(
    backend: str,
) -> None:
    w = Watching()
    interp = AsyncInterpreter(model(), observers=[w])

    async def main() -> None:
        stream = interp.stream(make_agent(), "hi")
        await stream.aclose()

    anyio.run(main, backend=backend)
    assert [o.ends for o in w.runs] == [["cancelled"]]
