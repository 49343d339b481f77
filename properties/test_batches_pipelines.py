"""A run on batches of events is the run on the same events one by one, with processors.

`test_batches_properties` checks the async interpreter's batch path on a bare agent. Here
the generated processor pipelines of test_equivalence (stream hooks that hold back,
replace and emit, aborts and a crash mid-stream, generator hooks doing I/O mid-stream, a
judge model, retries) run over the same generated scripts, once read event by event and
once in batches of any sizes: an abort or crash mid-batch must close the stream with the
rest of the batch unread, and every event before it must reach every hook in order; a
caller's cancel between two events of one batch ends the run there. The result, the
chunks the caller gets, the commands and the processor effects are equal.
Latency is left out of the scripts: a batched model reads its whole response before the
first batch, so time would pass at other points (what is compared here is the order).
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.lowlevel
import msgspec
from hypothesis import given
from hypothesis import strategies as st

from interpreters.aio import AsyncInterpreter
from interpreters.core.cancel import CancelSignal
from interpreters.core.trace import Trace
from interpreters.sim.simulator import Scripted
from interpreters.testing import Fail, Say, ScriptedModel, VirtualClock
from pipeline.agent import Agent
from pipeline.values.chunks import Chunk
from pipeline.values.result import RunResult
from properties.test_equivalence import (
    START,
    Check,
    Pipeline,
    check_text,
    judge_script,
    pipelines,
    prompts,
    scripts,
)
from tests.helpers import BatchedScriptedModel


def _no_latency(script: list[Scripted]) -> list[Scripted]:
    out: list[Scripted] = []
    for s in script:
        if isinstance(s, Say):
            s = msgspec.structs.replace(s, latency=0.0, chunk_latency=0.0)
        elif isinstance(s, Fail):
            s = msgspec.structs.replace(s, latency=0.0)
        out.append(s)
    return out


Outcome = tuple[RunResult, list[Chunk], object, float]


async def _run(
    agent: Agent, model: ScriptedModel, prompt: str, mode: str, cancel_at: int
) -> Outcome:
    clock = VirtualClock(START)
    model.clock = clock
    judge = ScriptedModel(judge_script, clock=clock)

    async def sleep(seconds: float) -> None:
        clock.sleep(seconds)

    async def check(request: object) -> bool:
        await anyio.lowlevel.checkpoint()
        return check_text(request)

    interp = AsyncInterpreter(
        resolve=lambda m: judge if m == "judge" else model, handlers={Check: check},
        clock=clock, sleep=sleep, run_ids=lambda: "run1", observers=(),
    )
    trace = Trace()
    if mode == "run":
        result = await interp.run(agent, prompt)
        return result, [], None, clock.now
    if mode == "traced run":
        result = await interp.run(agent, prompt, trace=trace)
        return result, list(trace.chunks), trace.comparable(), clock.now
    got: list[Chunk] = []
    signal = CancelSignal()
    async with interp.stream(agent, prompt, trace=trace, signal=signal) as stream:
        async for c in stream:
            got.append(c)
            if mode == "stream, cancelled" and len(got) == cancel_at:
                signal.cancel("stop")  # between two events of one batch, or of two
    return stream.result, got, trace.comparable(), clock.now


@given(
    pipeline=pipelines,
    script=scripts.map(_no_latency),
    prompt=prompts,
    sizes=st.lists(st.integers(0, 4), min_size=1, max_size=4).filter(any),
    mode=st.sampled_from(["run", "traced run", "stream", "stream, cancelled"]),
    cancel_at=st.integers(1, 12),
    backend=st.sampled_from(["asyncio", "trio"]),
)
def test_a_run_with_processors_on_batches_is_the_run_on_its_events(
    pipeline: Pipeline, script: list[Scripted], prompt: str, sizes: Sequence[int], mode: str,
    cancel_at: int, backend: str,
) -> None:
    async def go() -> None:
        plain = await _run(pipeline.agent(), ScriptedModel(script), prompt, mode, cancel_at)
        model = BatchedScriptedModel(script, sizes)
        batched = await _run(pipeline.agent(), model, prompt, mode, cancel_at)
        assert batched == plain
        assert model.closed == len(model.requests)  # every stream opened was closed

    anyio.run(go, backend=backend)
