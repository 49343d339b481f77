"""The per-chunk fast paths give the run the watched and traced paths give.

With nothing watching or recording a run, the interpreters answer pull after pull on a
fast path (the sync interpreter's inner pull loop on the loop's own send, the async one's
`_from_batches` under `run`); with observers or a trace they take the driver's full
path. For generated scripts (text, tool calls over several steps, broken and retried
streams) on the sync interpreter and on the async one (batches of any size, asyncio and
trio): the quiet, the watched and the traced runs end with the same result and hand out
the same chunks, and the observers see the commands the trace records, then one end.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from interpreters.aio import AsyncInterpreter
from interpreters.core.trace import Trace
from interpreters.observers.observe import Observer, RunInfo, RunObserver
from interpreters.sim.simulator import Scripted
from interpreters.sync import SyncInterpreter
from interpreters.testing import ScriptedModel
from pipeline.protocol import LoopCommand
from pipeline.values.chunks import Chunk
from pipeline.values.result import RunResult
from properties.test_batches_properties import AGENT, scripts
from tests.helpers import BatchedScriptedModel


class Seen(RunObserver):
    def __init__(self) -> None:
        self.commands: list[LoopCommand] = []
        self.ends: list[RunResult | None] = []

    def command(self, cmd: LoopCommand, at: float) -> None:
        self.commands.append(cmd)

    def end(self, result: RunResult | None, at: float) -> None:
        self.ends.append(result)


class Watch:
    def __init__(self) -> None:
        self.runs: list[Seen] = []

    def start(self, run: RunInfo) -> RunObserver:
        self.runs.append(Seen())
        return self.runs[-1]


def on_sync(
    script: list[Scripted], observers: Sequence[Observer], trace: Trace | None, stream: bool
) -> tuple[RunResult, list[Chunk]]:
    interp = SyncInterpreter(
        ScriptedModel(script), run_ids=lambda: "run", clock=lambda: 1.0, observers=observers
    )
    if not stream:
        return interp.run(AGENT, "hi", trace=trace), []
    s = interp.stream(AGENT, "hi", trace=trace)
    chunks = list(s)
    return s.result, chunks


async def on_async(
    script: list[Scripted], sizes: Sequence[int], observers: Sequence[Observer],
    trace: Trace | None, stream: bool,
) -> tuple[RunResult, list[Chunk]]:
    model = BatchedScriptedModel(script, sizes)
    interp = AsyncInterpreter(
        model, run_ids=lambda: "run", clock=lambda: 1.0, observers=observers
    )
    got: list[Chunk] = []
    if not stream:
        result = await interp.run(AGENT, "hi", trace=trace)
    else:
        async with interp.stream(AGENT, "hi", trace=trace) as s:
            async for c in s:
                got.append(c)
        result = s.result
    assert model.closed == len(model.requests)  # every stream opened was closed
    return result, got


@settings(max_examples=100)
@given(
    scripts(),
    st.lists(st.integers(0, 4), min_size=1, max_size=4).filter(any),
    st.sampled_from(["sync", "asyncio", "trio"]),
    st.booleans(),
)
def test_the_quiet_the_watched_and_the_traced_runs_are_one_run(
    script: list[Scripted], sizes: Sequence[int], backend: str, stream: bool
) -> None:
    watch, trace = Watch(), Trace()
    if backend == "sync":
        quiet = on_sync(script, (), None, stream)
        watched = on_sync(script, [watch], None, stream)
        traced = on_sync(script, (), trace, stream)
    else:
        async def go() -> tuple[tuple[RunResult, list[Chunk]], ...]:
            return (
                await on_async(script, sizes, (), None, stream),
                await on_async(script, sizes, [watch], None, stream),
                await on_async(script, sizes, (), trace, stream),
            )

        quiet, watched, traced = anyio.run(go, backend=backend)
    assert quiet == watched == traced
    if stream:
        assert quiet[1] == trace.chunks
    (seen,) = watch.runs
    assert seen.commands == trace.commands
    assert seen.ends == [quiet[0]]
