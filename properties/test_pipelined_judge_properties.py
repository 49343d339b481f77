"""Judged streaming that pipelines: windows judged while the model streams deliver exactly
the approved prefix, in order, under every interpreter.

For any model stream (words, chunk latencies), any judge (a verdict and a latency per
window: clean, flagged, or the call failing), any window size and `max_in_flight`, and
the strategies block, warn and filter of `ModerationProcessor`:

- the reference run (the sync interpreter answering started requests in order, so the
  judge is asked window after window) streams exactly the windows the judge passed, in
  order, up to the first one that stops the run (a block, a judge failure);
- the sync `Simulator` (started jobs on virtual time), the `AsyncSimulator` on asyncio
  and trio (jobs in a task group: under `run` and under `async with stream`), the sync
  interpreter with worker threads and the durable loop over in-process steps stream the
  same text and end with the same result;
- with a cancel at any virtual time, what reached the consumer (and what the result
  keeps) is a prefix of that approved text: never a window the judge had not passed.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import msgspec
from hypothesis import event, given
from hypothesis import strategies as st

from interpreters.durable.loop import drive
from interpreters.run.common import start_run
from interpreters.run.started import InOrder
from interpreters.sim.simulator import Scripted
from interpreters.sync import SyncInterpreter
from interpreters.testing import AsyncSimulator, Fail, Say, ScriptedModel, Simulator, VirtualClock
from pipeline import Agent
from pipeline.processors import ModerationProcessor
from pipeline.processors.guards.moderation import ModerationStrategy
from pipeline.values.chunks import Chunk, TextDelta
from pipeline.values.model import ModelRequest
from pipeline.values.result import RunResult
from properties.test_equivalence import _InProcessSteps

START = 1_700_000_000.0
BAD, BROKEN = "nasty", "boom"
WORDS = ("ok ", "sun ", "hello ", "rain ", "nasty ", "boom ", "longerword ", "a ")


def content_of(request: ModelRequest) -> str:
    text = request.messages[0].text
    start = text.index("<content>\n") + len("<content>\n")
    return text[start : text.rindex("\n</content>")]


class Judge:
    """Flags content with `nasty`, fails on `boom`; its latency is a function of the
    content (the same window waits as long under every interpreter)."""

    def __init__(self, latencies: tuple[float, ...]) -> None:
        self.latencies = latencies
        self.calls: list[str] = []

    def __call__(self, request: ModelRequest) -> Scripted:
        content = content_of(request)
        self.calls.append(content)
        latency = self.latencies[len(content) % len(self.latencies)]
        if BROKEN in content:
            return Fail(status=500, message="judge down", retryable=False, latency=latency)
        score = 0.9 if BAD in content else 0.0
        body = msgspec.json.encode({"category_scores": {"hate": score}}).decode()
        return Say(body, latency=latency)


class Case(msgspec.Struct, frozen=True):
    words: tuple[str, ...]
    chunk_latency: float
    latencies: tuple[float, ...]
    window: int
    in_flight: int
    strategy: ModerationStrategy

    def agent(self) -> Agent:
        return Agent.create("m", output_processors=[ModerationProcessor(
            "judge", categories=("hate",), stream_window=self.window,
            max_in_flight=self.in_flight, strategy=self.strategy,
        )])

    def script(self, *, flat: bool = False) -> list[Scripted]:
        return [Say(list(self.words), chunk_latency=0.0 if flat else self.chunk_latency)]

    def judge(self, *, flat: bool = False) -> Judge:
        return Judge((0.0,) if flat else self.latencies)


cases = st.builds(
    Case,
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=14).map(tuple),
    chunk_latency=st.sampled_from((0.0, 0.1, 0.5)),
    latencies=st.lists(st.sampled_from((0.0, 0.3, 1.0, 4.0)), min_size=1, max_size=3).map(
        tuple
    ),
    window=st.integers(4, 24),
    in_flight=st.integers(1, 5),
    strategy=st.sampled_from(("block", "warn", "filter")),
)

Ran = tuple[RunResult, str]
"""A run's result and the text its consumer got."""


def streamed(chunks: list[Chunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


def _resolver(case: Case, judge: Judge, clock: VirtualClock, *, flat: bool = False
              ) -> Callable[[str], ScriptedModel]:
    model = ScriptedModel(case.script(flat=flat), clock=clock)
    judging = ScriptedModel(judge, clock=clock)
    return lambda model_id: judging if model_id == "judge" else model


def in_order(case: Case) -> tuple[Ran, Judge]:
    """The reference: started requests answered in order, one judge call at a time."""
    clock, judge = VirtualClock(START), case.judge()
    interp = SyncInterpreter(resolve=_resolver(case, judge, clock), clock=clock,
                             sleep=clock.sleep, observers=(),
                             started=lambda perform, _stop: InOrder(perform))
    with interp.stream(case.agent(), "hi") as s:
        chunks = list(s)
    return (s.result, streamed(chunks)), judge


def on_simulator(case: Case, timeout: float | None = None) -> Ran:
    sim = Simulator(ScriptedModel(case.script()), models={"judge": ScriptedModel(case.judge())},
                    start=START)
    with sim.stream(case.agent(), "hi", timeout=timeout) as s:
        chunks = list(s)
    return s.result, streamed(chunks)


def on_async_simulator(case: Case, backend: str, timeout: float | None = None) -> list[Ran]:
    async def both() -> list[Ran]:
        sim = AsyncSimulator(ScriptedModel(case.script()),
                             models={"judge": ScriptedModel(case.judge())}, start=START)
        run = await sim.run(case.agent(), "hi", timeout=timeout)
        sim = AsyncSimulator(ScriptedModel(case.script()),
                             models={"judge": ScriptedModel(case.judge())}, start=START)
        chunks: list[Chunk] = []
        async with sim.stream(case.agent(), "hi", timeout=timeout) as s:
            async for c in s:
                chunks.append(c)
        return [(run.result, streamed(list(run.chunks))), (s.result, streamed(chunks))]

    return anyio.run(both, backend=backend)


def on_threads(case: Case) -> Ran:
    """The sync interpreter's worker threads (no latencies: the clock is not theirs)."""
    judge = case.judge(flat=True)
    model = ScriptedModel(case.script(flat=True))
    judging = ScriptedModel(judge)
    interp = SyncInterpreter(resolve=lambda m: judging if m == "judge" else model,
                             observers=())
    with interp.stream(case.agent(), "hi") as s:
        chunks = list(s)
    return s.result, streamed(chunks)


def on_durable_driver(case: Case) -> Ran:
    clock = VirtualClock(START)
    resolve = _resolver(case, case.judge(flat=True), clock, flat=True)
    got: list[Chunk] = []

    class Steps(_InProcessSteps):
        def publish(self, chunks: tuple[Chunk, ...]) -> None:
            got.extend(chunks)

    driver = start_run(case.agent(), "hi", run_id="run1", clock=clock, options={})
    return drive(driver, Steps(clock, resolve)), streamed(got)


def approved(case: Case, judge: Judge) -> str:
    """What the consumer may get: the windows the judge passed, in order, up to the first
    that stops the run; from the reference judge's calls (made in the order of the text)."""
    full = "".join(case.words)
    pos, out, stopped = 0, [], False

    def blanks() -> None:  # a window of whitespace only is not judged: it goes in turn
        nonlocal pos
        end = pos
        while end < len(full) and full[end].isspace():
            end += 1
        if not stopped:
            out.append(full[pos:end])
        pos = end

    for content in judge.calls:
        if pos < len(full) and full[pos].isspace() and not full.startswith(content, pos):
            blanks()
        if pos >= len(full) or not full.startswith(content, pos):
            break  # the step check's call on the whole answer
        pos += len(content)
        if stopped:
            continue  # started before the stop, never released
        if BROKEN in content or (BAD in content and case.strategy == "block"):
            stopped = True
        elif BAD in content and case.strategy == "filter":
            continue
        else:
            out.append(content)
    if not full[pos:].strip():
        blanks()
    return "".join(out)


def same(a: Ran, b: Ran) -> bool:
    return (a[1], a[0].status, a[0].text, a[0].tripwire) == (b[1], b[0].status, b[0].text,
                                                              b[0].tripwire)


@given(case=cases)
def test_every_interpreter_streams_exactly_the_approved_windows_in_order(case: Case) -> None:
    reference, judge = in_order(case)
    event(f"status {reference[0].status}")
    assert reference[1] == approved(case, judge)
    assert same(on_simulator(case), reference)
    for backend in ("asyncio", "trio"):
        for got in on_async_simulator(case, backend):
            assert same(got, reference), backend
    # No latencies here (the model's and the judge's are the clock's): the same text.
    flat = msgspec.structs.replace(case, chunk_latency=0.0, latencies=(0.0,))
    flat_reference, _ = in_order(flat)
    assert same(on_threads(case), flat_reference)
    assert same(on_durable_driver(case), flat_reference)


@given(case=cases, timeout=st.floats(0.0, 12.0))
def test_a_cancel_at_any_time_delivers_a_prefix_of_the_approved_text(
    case: Case, timeout: float
) -> None:
    (_, allowed), _ = in_order(case)
    runs = [on_simulator(case, timeout)]
    for backend in ("asyncio", "trio"):
        runs.extend(on_async_simulator(case, backend, timeout))
    for result, got in runs:
        event(f"status {result.status}")
        assert allowed.startswith(got)
        assert allowed.startswith(result.text) or result.status != "finished"
        for m in result.messages.messages:
            if m.role == "assistant":
                assert allowed.startswith(m.text)
