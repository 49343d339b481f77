"""A run on a model's batches of events is the run on the same events one by one.

The async interpreter reads a provider's `astream_batches` (the events of one read, W5
in bench/) and hands a batch's events to the loop without an await per event; under
`run` with no trace it answers pull after pull inside one coroutine. For generated
scripts (text pieces, tool calls over several steps, streams that break and are
retried, streams that break for good) and any batch sizes (empty batches included),
on asyncio and trio: the result, the chunks and the commands are those of the same
scripted model read event by event, and every stream opened is closed.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from interpreters.aio import AsyncInterpreter
from interpreters.core.trace import Trace
from interpreters.sim.simulator import Scripted
from interpreters.testing import Say, ScriptedModel, call
from pipeline.agent import Agent
from pipeline.tools import tool
from pipeline.values.chunks import Chunk
from pipeline.values.result import RunResult
from pipeline.values.retry import RetryPolicy
from tests.helpers import BatchedScriptedModel


@tool
def echo(x: int) -> int:
    """Echo."""
    return x


AGENT = Agent.create("m", tools=[echo], retry_policy=RetryPolicy(max_retries=1))

pieces = st.lists(st.sampled_from(["a", "b c", "", "d"]), max_size=4)
steps = st.lists(st.tuples(pieces, st.integers(0, 2)), max_size=2)
breaks = st.one_of(st.none(), st.integers(0, 6))


@st.composite
def scripts(draw: st.DrawFn) -> list[Scripted]:
    out: list[Scripted] = []
    for text, n in draw(steps):
        out.append(Say(text, calls=[call("echo", x=i) for i in range(n)]))
    last = draw(pieces)
    cut = draw(breaks)
    if cut is not None:
        out.append(Say(last, break_after=cut))  # broken; retried once, then for good
        if draw(st.booleans()):
            out.append(Say(last))
    else:
        out.append(Say(last))
    return out


async def _run(model: ScriptedModel, mode: str) -> tuple[RunResult, list[Chunk], Trace]:
    interp = AsyncInterpreter(model, run_ids=lambda: "run", clock=lambda: 1.0, observers=())
    trace = Trace()
    if mode == "run":
        return await interp.run(AGENT, "hi"), [], trace
    if mode == "traced run":
        return await interp.run(AGENT, "hi", trace=trace), list(trace.chunks), trace
    got: list[Chunk] = []
    async with interp.stream(AGENT, "hi", trace=trace) as stream:
        async for c in stream:
            got.append(c)
    return stream.result, got, trace


@settings(max_examples=100)
@given(
    scripts(),
    st.lists(st.integers(0, 4), min_size=1, max_size=4).filter(any),
    st.sampled_from(["run", "traced run", "stream"]),
    st.sampled_from(["asyncio", "trio"]),
)
def test_a_run_on_batches_is_the_run_on_its_events(
    script: list[Scripted], sizes: Sequence[int], mode: str, backend: str
) -> None:
    async def go() -> None:
        plain, plain_chunks, plain_trace = await _run(ScriptedModel(script), mode)
        model = BatchedScriptedModel(script, sizes)
        result, chunks, trace = await _run(model, mode)
        assert result == plain
        assert chunks == plain_chunks
        assert trace.commands == plain_trace.commands
        assert model.closed == len(model.requests)

    anyio.run(go, backend=backend)
