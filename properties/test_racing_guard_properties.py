"""Input guards that race the model hold its output until they passed, under every interpreter.

For any guard latency and verdict (clean, flagged, the judge call failing) and any model
stream (words, a first-event latency, chunk latencies, a tool call or not), with a
`ModerationProcessor(concurrent=True)` input guard:

- no tool ran before the guard's verdict (in virtual time) and none ran when it tripped;
- when the guard tripped (a flag, or a judge failure: fail closed), nothing of the model's
  output reached the caller (no text, no tool call) or the result;
- when it passed, the caller got the whole stream;
- the sync `Simulator` and the `AsyncSimulator` (asyncio and trio) agree on the delivered
  text and the status.
"""

from __future__ import annotations

import anyio
import msgspec
from hypothesis import given
from hypothesis import strategies as st

from interpreters.testing import (
    AsyncSimulator,
    Fail,
    Say,
    ScriptedModel,
    Simulator,
    VirtualClock,
    call,
)
from pipeline import Agent
from pipeline.processors import ModerationProcessor
from pipeline.tools import tool
from pipeline.values.chunks import Chunk, TextDelta, ToolCall

VERDICTS = {
    "clean": msgspec.json.encode({"category_scores": {"hate": 0.0}}).decode(),
    "flagged": msgspec.json.encode({"category_scores": {"hate": 0.9}}).decode(),
}


class Case(msgspec.Struct, frozen=True):
    verdict: str
    guard_latency: float
    words: tuple[str, ...]
    latency: float
    chunk_latency: float
    with_call: bool

    def model(self) -> list[Say]:
        calls = [call("lookup", q="x")] if self.with_call else []
        first = Say(list(self.words), calls=calls, latency=self.latency,
                    chunk_latency=self.chunk_latency)
        return [first, Say("done")] if self.with_call else [first]

    def judge(self) -> ScriptedModel:
        if self.verdict == "fails":
            return ScriptedModel([Fail(status=400, latency=self.guard_latency)])
        return ScriptedModel([Say(VERDICTS[self.verdict], latency=self.guard_latency)])


cases = st.builds(
    Case,
    verdict=st.sampled_from(("clean", "flagged", "fails")),
    guard_latency=st.sampled_from((0.0, 0.05, 0.3, 1.0, 2.5)),
    words=st.lists(st.sampled_from(("ok ", "sun ", "rain ")), min_size=1, max_size=6).map(tuple),
    latency=st.sampled_from((0.0, 0.1, 0.4)),
    chunk_latency=st.sampled_from((0.0, 0.05, 0.2)),
    with_call=st.booleans(),
)


class Outcome(msgspec.Struct):
    text: str
    calls: int
    status: str
    result_text: str
    tools_at: list[float]


def agent(clock: VirtualClock, tools_at: list[float]) -> Agent:
    @tool
    def lookup(q: str) -> str:
        """Look q up."""
        tools_at.append(clock.now)
        return q

    guard = ModerationProcessor("judge", categories=("hate",), moderate_stream=False,
                                concurrent=True)
    return Agent.create("m", input_processors=[guard], tools=[lookup])


def seen(chunks: list[Chunk], status: str, result_text: str, tools_at: list[float]) -> Outcome:
    text = "".join(c.text for c in chunks if isinstance(c, TextDelta))
    calls = sum(1 for c in chunks if isinstance(c, ToolCall))
    return Outcome(text, calls, status, result_text, tools_at)


def on_sync(case: Case) -> Outcome:
    sim = Simulator(ScriptedModel(case.model()), models={"judge": case.judge()}, start=0.0)
    tools_at: list[float] = []
    with sim.stream(agent(sim.clock, tools_at), "hi") as s:
        got = list(s)
    return seen(got, s.result.status, s.result.text, tools_at)


def on_async(case: Case, backend: str) -> Outcome:
    async def go() -> Outcome:
        sim = AsyncSimulator(ScriptedModel(case.model()), models={"judge": case.judge()},
                             start=0.0)
        tools_at: list[float] = []
        async with sim.stream(agent(sim.clock, tools_at), "hi") as s:
            got = [c async for c in s]
        return seen(got, s.result.status, s.result.text, tools_at)

    return anyio.run(go, backend=backend)


@given(cases)
def test_nothing_passes_a_racing_guard_before_its_verdict(case: Case) -> None:
    runs = [on_sync(case), on_async(case, "asyncio"), on_async(case, "trio")]
    for got in runs:
        assert all(at >= case.guard_latency for at in got.tools_at)  # never before it passed
        if case.verdict == "clean":
            assert got.status == "finished"
            assert got.text.startswith("".join(case.words))
            assert len(got.tools_at) == (1 if case.with_call else 0)
        else:
            assert got.status == "tripped"
            assert got.text == got.result_text == ""
            assert got.calls == 0 and got.tools_at == []
    first = runs[0]
    for other in runs[1:]:
        assert (other.text, other.status) == (first.text, first.status)
