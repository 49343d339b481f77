"""ModerationProcessor on the stream never lets flagged text through, however the stream
is cut, on the Simulator and the AsyncSimulator.

For prose holding one flagged word (the scripted judge flags any window containing it)
and any chunking of it (hypothesis chooses the cut points and the window size), run
through an agent whose output processors hold a `ModerationProcessor` with `block` or
`filter`: the word is in none of the chunks the caller receives, not in `result.text` and
not in `result.messages`; with `filter` the run finishes and the caller got exactly
`result.text`. A word shorter than half the window is never cut across windows (they end
at a space in their second half), which is what lets the judge see it whole."""

from __future__ import annotations

import itertools

import anyio
import msgspec
from hypothesis import given
from hypothesis import strategies as st

from interpreters.sim.simulator import Scripted
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, SimRun, Simulator
from pipeline.agent import Agent
from pipeline.processors import ModerationProcessor
from pipeline.values.chunks import TextDelta
from pipeline.values.model import ModelRequest

CATS = ("hate", "violence")
WORD = "nasty"


def judge(request: ModelRequest) -> Scripted:
    text = request.messages[0].text
    content = text[text.rindex("<content>") :]
    scores = {c: 0.0 for c in CATS} | ({"hate": 0.9} if WORD in content else {})
    return Say(msgspec.json.encode({"category_scores": scores}).decode())


prose = st.text("abcdefghij klmopqrsuvwxyz ABC .,;!?\n", max_size=150)


@st.composite
def chunked(draw: st.DrawFn) -> list[str]:
    text = draw(prose) + " " + WORD + draw(st.sampled_from([" ", ". ", "\n"])) + draw(prose)
    cuts = sorted(set(draw(st.lists(st.integers(1, len(text) - 1), max_size=40))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def _runs(agent: Agent, chunks: list[str]) -> list[tuple[str, SimRun]]:
    def sims() -> tuple[ScriptedModel, dict[str, ScriptedModel]]:
        return ScriptedModel([Say(chunks)]), {"judge": ScriptedModel(judge)}

    model, models = sims()
    out = [("simulator", Simulator(model, models=models).run(agent, "hi"))]

    async def go() -> SimRun:
        model, models = sims()
        return await AsyncSimulator(model, models=models).run(agent, "hi")

    out.append(("asyncio", anyio.run(go, backend="asyncio")))
    return out


@given(chunked(), st.sampled_from(["block", "filter"]), st.integers(12, 80),
       st.integers(0, 20))
def test_flagged_text_never_reaches_the_caller_the_text_or_the_messages(
    chunks: list[str], strategy: str, window: int, context: int
) -> None:
    p = ModerationProcessor(
        "judge", categories=CATS, strategy="block" if strategy == "block" else "filter",
        stream_window=window, context_window=context,
    )
    agent = Agent.create("m", output_processors=[p])
    for name, run in _runs(agent, chunks):
        streamed = "".join(c.text for c in run.trace.chunks if isinstance(c, TextDelta))
        messages = msgspec.json.encode(run.result.messages.messages).decode()
        assert WORD not in streamed, (name, streamed)
        assert WORD not in run.result.text, name
        assert WORD not in messages, name
        if strategy == "filter":
            assert run.result.status == "finished", (name, run.result.error)
            assert streamed == run.result.text, name
        else:
            assert run.result.status == "tripped", name
