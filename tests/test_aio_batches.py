"""The async interpreter reading a provider's batches of events (`astream_batches`).

An HTTP provider hands out the events decoded from one read as one batch; the driver
sends them to the loop one pull at a time without an await per event (W5 in bench/).
Whatever the batch sizes, a run must be the one it is with the same events one by one:
same result, same chunks, same trace. And the batch at hand is all that is buffered:
the next batch is read only once it is used up (backpressure), a consumer that stops
early closes the stream, and a cancel while the next batch is awaited ends the run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import anyio
import pytest

from interpreters.aio import AsyncInterpreter
from interpreters.core.cancel import CancelSignal
from interpreters.core.trace import Trace
from interpreters.sim.simulator import Scripted
from interpreters.testing import Fail, Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.tools import tool
from pipeline.values.chunks import Chunk, ModelEvent, ModelFinish, TextDelta, TextEnd, TextStart
from pipeline.values.result import Cancelled, RunResult
from pipeline.values.retry import RetryPolicy
from tests.helpers import BatchedScriptedModel

pytestmark = pytest.mark.anyio


@tool
def echo(x: int) -> int:
    """Echo."""
    return x


AGENT = Agent.create("m", tools=[echo], retry_policy=RetryPolicy(max_retries=1))

SCRIPTS: dict[str, list[Scripted]] = {
    "text": [Say(["Hello", " wor", "ld"])],
    "tools": [Say("Checking", calls=[call("echo", x=1), call("echo", x=2)]), Say(["Do", "ne"])],
    "break then retry": [Say(["Hal", "f"], break_after=2), Say("Whole")],
    "break after text": [Say(["Hal", "f", " more"], break_after=3)],
    "fails first": [Fail(status=503), Say("Late")],
    "unfinished": [Say(["Cut"], unfinished=True)],
}

SIZES = [(1,), (2,), (3, 0, 1), (100,)]


async def _run(model: ScriptedModel, mode: str) -> tuple[RunResult, list[Chunk], Trace]:
    interp = AsyncInterpreter(model, run_ids=lambda: "run", clock=lambda: 1.0, observers=())
    trace = Trace()
    if mode == "run":  # no trace: pull after pull answered inside one coroutine
        return await interp.run(AGENT, "hi"), [], trace
    if mode == "traced run":
        return await interp.run(AGENT, "hi", trace=trace), list(trace.chunks), trace
    got: list[Chunk] = []
    async with interp.stream(AGENT, "hi", trace=trace) as stream:
        async for c in stream:
            got.append(c)
    return stream.result, got, trace


@pytest.mark.parametrize("name", sorted(SCRIPTS))
@pytest.mark.parametrize("sizes", SIZES, ids=str)
@pytest.mark.parametrize("mode", ["run", "traced run", "stream"])
async def test_a_run_on_batches_is_the_run_on_the_same_events_one_by_one(
    name: str, sizes: Sequence[int], mode: str
) -> None:
    plain, plain_chunks, plain_trace = await _run(ScriptedModel(SCRIPTS[name]), mode)
    batched = BatchedScriptedModel(SCRIPTS[name], sizes)
    result, chunks, trace = await _run(batched, mode)
    assert result == plain
    assert chunks == plain_chunks
    assert trace.commands == plain_trace.commands
    assert batched.batches > 0 or name == "fails first"
    assert batched.closed == len(batched.requests)  # every stream closed


async def test_the_next_batch_is_read_only_once_the_one_at_hand_is_used_up() -> None:
    # Events: text-start, 'Hello', ' wor', 'ld', text-end, finish; batches of 2.
    model = BatchedScriptedModel([Say(["Hello", " wor", "ld"])], (2,))
    seen: list[tuple[str, int]] = []
    async with AsyncInterpreter(model, observers=()).stream(Agent.create("m"), "hi") as s:
        async for c in s:
            if isinstance(c, TextDelta):
                seen.append((c.text, model.batches))
    assert seen == [("Hello", 1), (" wor", 2), ("ld", 2)]


async def test_a_consumer_that_stops_mid_batch_closes_the_stream() -> None:
    model = BatchedScriptedModel([Say(["Hello", " wor", "ld"])], (100,))
    stream = AsyncInterpreter(model, observers=()).stream(Agent.create("m"), "hi")
    async with stream:
        async for c in stream:
            if isinstance(c, TextDelta):
                break
    assert (model.batches, model.closed) == (1, 1)
    assert stream.result.status == "cancelled"
    assert stream.result.error == Cancelled("the stream was closed before the run ended")
    assert stream.result.text == "Hello"  # the rest of the batch is dropped, not sent on
    assert stream.result.messages.messages[-1].incomplete


async def test_a_signal_while_the_next_batch_is_awaited_ends_the_run() -> None:
    model = BatchedScriptedModel([Say(["Hello", " wor", "ld"])], (2,), block_before=1)
    signal = CancelSignal()
    box: list[RunResult] = []

    async def go() -> None:
        box.append(await AsyncInterpreter(model, observers=()).run(
            Agent.create("m"), "hi", signal=signal))

    with anyio.fail_after(10):  # a safety net only
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            await model.blocked.wait()
            signal.cancel("stop")
    assert box[0].status == "cancelled"
    assert box[0].error == Cancelled("stop")
    assert box[0].text == "Hello"
    assert model.closed == 1


async def test_an_enclosing_cancel_while_the_next_batch_is_awaited_is_reraised() -> None:
    model = BatchedScriptedModel([Say(["Hello", " wor", "ld"])], (2,), block_before=1)
    stream = AsyncInterpreter(model, observers=()).stream(Agent.create("m"), "hi")
    got: list[Chunk] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                async with stream:
                    async for c in stream:
                        got.append(c)

            tg.start_soon(consume)
            await model.blocked.wait()
            tg.cancel_scope.cancel()
    assert stream.result.status == "cancelled"
    assert stream.result.text == "Hello"
    assert [c.text for c in got if isinstance(c, TextDelta)] == ["Hello"]
    assert model.closed == 1


async def test_a_timeout_while_the_next_batch_is_awaited_ends_the_run() -> None:
    model = BatchedScriptedModel([Say(["Hello", " wor", "ld"])], (2,), block_before=1)
    with anyio.fail_after(10):
        result = await AsyncInterpreter(model, observers=()).run(
            Agent.create("m"), "hi", timeout=0.05)
    assert result.status == "cancelled"
    assert result.text == "Hello"
    assert model.closed == 1


class NotAnIterator(ScriptedModel):
    """A provider whose astream_batches is a plain function returning a list: a bug."""

    def astream_batches(self, request: object) -> list[object]:
        return []


async def test_an_astream_batches_that_gives_no_async_iterator_fails_the_call() -> None:
    result = await AsyncInterpreter(NotAnIterator([Say("Hi")]), observers=()).run(
        Agent.create("m"), "hi")
    assert result.status == "failed"
    assert "__anext__" in str(result.error)


class _PastTheFinish:
    """A provider whose one batch goes on past the call's finish event (a server that
    writes more after its end marker, in the same read)."""

    def __init__(self) -> None:
        self.closed = False

    def astream(self, request: object) -> AsyncIterator[ModelEvent]:
        raise AssertionError("the interpreter reads the batches")

    async def astream_batches(self, request: object) -> AsyncIterator[list[ModelEvent]]:
        try:
            yield [TextStart("t"), TextDelta("t", "said"), TextEnd("t"), ModelFinish("stop"),
                   TextStart("u"), TextDelta("u", " and more")]
            yield [TextDelta("u", " and more still")]
        finally:
            self.closed = True


@pytest.mark.parametrize("mode", ["run", "traced run", "stream"])
async def test_events_after_the_finish_event_in_a_batch_go_nowhere(mode: str) -> None:
    provider = _PastTheFinish()
    interp = AsyncInterpreter(provider, run_ids=lambda: "run", clock=lambda: 1.0, observers=())
    trace = Trace()
    got: list[Chunk] = []
    if mode == "stream":
        async with interp.stream(Agent.create("m"), "hi", trace=trace) as stream:
            got = [c async for c in stream]
        result = stream.result
    else:
        result = await interp.run(Agent.create("m"), "hi", trace=trace if mode != "run" else None)
        got = list(trace.chunks)
    assert result.status == "finished" and result.text == "said"
    assert "more" not in "".join(c.text for c in got if isinstance(c, TextDelta))
    assert provider.closed
