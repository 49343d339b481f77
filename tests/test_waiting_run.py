"""What an async run keeps alive while it waits (W4 of bench/WORKLOADS.md).

Thousands of runs wait at once on their models and tools; whatever each one keeps across
a wait costs memory, and every full collection walks it. A run waiting on its next model
call or on a tool keeps nothing of the model streams before (an HTTP stream holds its
response and decoder), on one call or several, on a run's own stream or under `run`, read
event by event or in batches.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import AsyncIterator, Sequence

import anyio
import pytest

from interpreters.aio import AsyncInterpreter
from interpreters.sim.simulator import Scripted
from interpreters.testing import Say, call
from pipeline.agent import Agent
from pipeline.values.chunks import ModelEvent
from pipeline.values.model import ModelRequest
from tests.helpers import AsyncTrackedModel, BatchedScriptedModel

pytestmark = pytest.mark.anyio


class RememberedStreams(AsyncTrackedModel):
    """An `AsyncTrackedModel` that keeps a weak reference to every stream it opened."""

    def __init__(self, script: Sequence[Scripted], *, block: tuple[int, int] | None = None):
        super().__init__(script, block=block)
        self.streams: list[weakref.ref[AsyncIterator[ModelEvent]]] = []

    def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        stream = super().astream(request)
        self.streams.append(weakref.ref(stream))
        return stream


class RememberedBatches(BatchedScriptedModel):
    """A `BatchedScriptedModel` (read in batches, as an HTTP provider is) that keeps a
    weak reference to every stream of batches it opened."""

    def __init__(self, script: Sequence[Scripted]) -> None:
        super().__init__(script, sizes=(2,))
        self.streams: list[weakref.ref[AsyncIterator[list[ModelEvent]]]] = []

    def astream_batches(self, request: ModelRequest) -> AsyncIterator[list[ModelEvent]]:
        stream = super().astream_batches(request)
        self.streams.append(weakref.ref(stream))
        return stream


def echo(text: str) -> str:
    """Echo the text."""
    return text


tool_waits = anyio.Event()


async def waits(text: str) -> str:
    """A tool that waits until the test's run is cancelled."""
    tool_waits.set()
    await anyio.sleep_forever()
    return text


def _alive(model: RememberedStreams | RememberedBatches) -> list[bool]:
    gc.collect()
    return [ref() is not None for ref in model.streams]


@pytest.mark.parametrize("calls", [1, 2], ids=["one call", "two calls"])
@pytest.mark.parametrize("drive", ["run", "stream"])
async def test_a_run_waiting_on_its_next_model_call_keeps_no_earlier_stream(
    calls: int, drive: str
) -> None:
    script = [Say(calls=[call("echo", text=str(i)) for i in range(calls)]), Say("done")]
    model = RememberedStreams(script, block=(1, 0))  # the second call waits forever
    interp = AsyncInterpreter(model, observers=())
    agent = Agent.create("m", tools=[echo])

    async def go() -> None:
        if drive == "run":
            await interp.run(agent, "go")
            return
        async with interp.stream(agent, "go") as s:
            async for _ in s:
                pass

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await model.blocked.wait()
            assert _alive(model) == [False, True]  # the first stream is gone, the second not
            tg.cancel_scope.cancel()


@pytest.mark.parametrize("read", ["by event", "in batches"])
async def test_a_run_waiting_on_a_tool_keeps_no_model_stream(read: str) -> None:
    global tool_waits
    tool_waits = anyio.Event()
    script = [Say(calls=[call("waits", text="x")]), Say("done")]
    model = RememberedStreams(script) if read == "by event" else RememberedBatches(script)
    interp = AsyncInterpreter(model, observers=())
    agent = Agent.create("m", tools=[waits])
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(interp.run, agent, "go")
            await tool_waits.wait()
            assert model.closed == 1
            assert _alive(model) == [False]
            tg.cancel_scope.cancel()
