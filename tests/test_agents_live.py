"""A child run's text reaches the caller as it comes (docs/agents.md, "Live output"):
after the child's own output processors and the stream processors of every run above
it, one child's text block at a time; on the sync and async interpreters."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from effects import Abort, Continue, Replace
from interpreters.testing import AsyncSimulator, Say, ScriptedModel, Simulator, call
from pipeline import Agent, processor
from pipeline.processor import BaseProcessor, StreamArgs, StreamResult
from pipeline.processors import PIIDetector
from pipeline.values.chunks import Chunk, DataChunk, TextDelta


def _deltas(chunks: list[Chunk], agent: str | None = None) -> list[str]:
    return [str(c.data["delta"]) for c in chunks
            if isinstance(c, DataChunk) and c.name == "data-agent" and isinstance(c.data, dict)
            and c.data.get("status") == "running"
            and (agent is None or c.data.get("agent") == agent)]


def test_a_childs_text_reaches_the_caller_before_its_next_step_runs() -> None:
    received: list[Chunk] = []
    seen_when_probed: list[list[str]] = []

    def probe() -> str:
        """Probe."""
        seen_when_probed.append(_deltas(received))
        return "probed"

    child = Agent.create("sim/research", name="research", tools=[probe])
    lead = Agent.create("sim/lead", name="lead", tools=[child])
    models = {"sim/research": ScriptedModel([Say("Looking into it.", calls=[call("probe")]),
                                             Say("Found it.")])}
    sim = Simulator(ScriptedModel([Say(calls=[call("research", input="q")]), Say("ok")]),
                    models=models)
    with sim.stream(lead, "go") as stream:
        for c in stream:
            received.append(c)
    assert stream.result.status == "finished"
    assert seen_when_probed == [["Looking into it."]]  # out before the child's tool ran
    assert _deltas(received) == ["Looking into it.", "Found it."]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_childs_text_reaches_an_async_caller_while_the_child_runs(backend: str) -> None:
    async def main() -> list[Chunk]:
        caller_saw_it = anyio.Event()

        async def wait_for_the_caller() -> str:
            """Wait until the caller has the child's first words."""
            with anyio.fail_after(5):
                await caller_saw_it.wait()
            return "seen"

        child = Agent.create("sim/research", name="research", tools=[wait_for_the_caller])
        lead = Agent.create("sim/lead", name="lead", tools=[child])
        models = {"sim/research": ScriptedModel([
            Say("Looking into it.", calls=[call("wait_for_the_caller")]), Say("Found it.")])}
        sim = AsyncSimulator(
            ScriptedModel([Say(calls=[call("research", input="q")]), Say("ok")]),
            models=models, real_sleep=True)
        got: list[Chunk] = []
        async with sim.stream(lead, "go") as stream:
            async for c in stream:
                got.append(c)
                if _deltas([c]):
                    caller_saw_it.set()
        assert stream.result.status == "finished", stream.result.error
        return got

    got = anyio.run(main, backend=backend)
    assert _deltas(got) == ["Looking into it.", "Found it."]


def _leaky_children(latency: float) -> tuple[Agent, dict[str, ScriptedModel], ScriptedModel]:
    a = Agent.create("sim/a", name="a")
    b = Agent.create("sim/b", name="b")
    lead = Agent.create("sim/lead", name="lead", tools=[a, b],
                        output_processors=[PIIDetector(strategy="redact")])
    models = {
        "sim/a": ScriptedModel([Say(["write to bob@exa", "mple.com please"],
                                    chunk_latency=latency)]),
        "sim/b": ScriptedModel([Say(["ask carol@exa", "mple.org now"],
                                    latency=latency / 2, chunk_latency=latency)]),
    }
    root = ScriptedModel([Say(calls=[call("a", input="q"), call("b", input="q")]),
                          Say("ok")])
    return lead, models, root


def _no_address_leaks(chunks: list[Chunk]) -> None:
    out = msgspec.json.encode(chunks)
    for piece in (b"bob@", b"carol@", b"mple.com", b"mple.org"):
        assert piece not in out


def test_a_parent_pii_guard_holds_back_a_childs_text_as_it_streams() -> None:
    lead, models, root = _leaky_children(0.0)
    ran = Simulator(root, models=models).run(lead, "go")
    _no_address_leaks(ran.trace.chunks)
    assert "".join(_deltas(ran.trace.chunks, "a")) == "write to [REDACTED:email] please"
    assert "".join(_deltas(ran.trace.chunks, "b")) == "ask [REDACTED:email] now"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_children_streaming_at_once_pass_a_guard_one_text_block_at_a_time(
    backend: str,
) -> None:
    lead, models, root = _leaky_children(1.0)

    async def main() -> list[Chunk]:
        got: list[Chunk] = []
        async with AsyncSimulator(root, models=models).stream(lead, "go") as stream:
            async for c in stream:
                got.append(c)
        return got

    got = anyio.run(main, backend=backend)
    _no_address_leaks(got)
    assert "".join(_deltas(got, "a")) == "write to [REDACTED:email] please"
    assert "".join(_deltas(got, "b")) == "ask [REDACTED:email] now"


def test_a_handoffs_answer_streams_once_as_the_runs_own_text() -> None:
    refunds = Agent.create("sim/refunds", name="refunds")
    lead = Agent.create("sim/lead", name="lead", tools=[refunds.as_handoff()],
                        output_processors=[PIIDetector(strategy="redact")])
    models = {"sim/refunds": ScriptedModel([Say(["Mail bob@exa", "mple.com for it."])])}
    ran = Simulator(ScriptedModel([Say(calls=[call("transfer_to_refunds")])]),
                    models=models).run(lead, "refund")
    r = ran.result
    assert r.status == "finished" and r.answered_by == "refunds"
    texts = "".join(c.text for c in ran.trace.chunks if isinstance(c, TextDelta))
    assert texts == "Mail [REDACTED:email] for it."  # once, through the lead's guard
    assert r.text == "Mail [REDACTED:email] for it."
    assert _deltas(ran.trace.chunks) == []


class _StopOn(BaseProcessor):
    """Stops the run when a chunk says `word`."""

    id = "stop-word"
    process_data_parts = True

    def __init__(self, word: str) -> None:
        self.word = word

    def process_output_stream(self, args: StreamArgs[object]) -> StreamResult[object]:
        c = args.part
        if type(c) is TextDelta and self.word in c.text:
            return Abort("a word it stops on")
        return Continue()


def test_a_parent_stream_processor_that_stops_on_a_childs_text_stops_the_child_and_trips() -> None:
    said: list[str] = []

    def note(x: str) -> str:
        """Note."""
        said.append(x)
        return x

    child = Agent.create("sim/research", name="research", tools=[note])
    lead = Agent.create("sim/lead", name="lead", tools=[child],
                        output_processors=[_StopOn("forbidden")])
    research = ScriptedModel([Say("a forbidden word", calls=[call("note", x="1")]),
                              Say("more")])
    ran = Simulator(ScriptedModel([Say(calls=[call("research", input="q")]), Say("ok")]),
                    models={"sim/research": research}).run(lead, "go")
    r = ran.result
    assert r.status == "tripped" and r.tripwire is not None
    assert r.tripwire.processor_id == "stop-word"
    assert said == [] and len(research.requests) == 1  # the child went no further
    assert b"forbidden" not in msgspec.json.encode(ran.trace.chunks)
    assert r.children[0].status == "cancelled"


class _Shout(BaseProcessor):
    id = "shout"

    def process_output_stream(self, args: StreamArgs[object]) -> StreamResult[object]:
        c = args.part
        if type(c) is TextDelta:
            return Replace(TextDelta(c.id, c.text.upper()))
        return Continue()


def test_a_grandchilds_text_passes_its_parents_and_the_roots_stream_processors() -> None:
    leaf = Agent.create("sim/leaf", name="leaf")
    mid = Agent.create("sim/mid", name="mid", tools=[leaf], output_processors=[_Shout()])
    root = Agent.create("sim/root", name="root", tools=[mid],
                        output_processors=[PIIDetector(strategy="redact")])
    models = {
        "sim/mid": ScriptedModel([Say(calls=[call("leaf", input="q")]), Say("done")]),
        "sim/leaf": ScriptedModel([Say(["mail bob@exa", "mple.com"])]),
    }
    ran = Simulator(ScriptedModel([Say(calls=[call("mid", input="q")]), Say("ok")]),
                    models=models).run(root, "go")
    assert "".join(_deltas(ran.trace.chunks, "leaf")) == "MAIL [REDACTED:email]"
    paths = [c.data["path"] for c in ran.trace.chunks
             if isinstance(c, DataChunk) and isinstance(c.data, dict)
             and c.data.get("agent") == "leaf"]
    assert paths and all(p == ["call_0_0", "call_0_0"] for p in paths)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_cancel_of_a_streamed_run_reaches_its_running_child(backend: str) -> None:
    from interpreters import CancelSignal

    async def main() -> tuple[str, list[str]]:
        stopped: list[str] = []

        async def wait_forever() -> str:
            """Wait."""
            try:
                await anyio.sleep_forever()
            finally:
                stopped.append("the child's tool was stopped")
            return "never"

        child = Agent.create("sim/research", name="research", tools=[wait_forever])
        lead = Agent.create("sim/lead", name="lead", tools=[child])
        models = {"sim/research": ScriptedModel([Say("On it.", calls=[call("wait_forever")])])}
        sim = AsyncSimulator(ScriptedModel([Say(calls=[call("research", input="q")])]),
                             models=models, real_sleep=True)
        signal = CancelSignal()
        with anyio.fail_after(5):
            async with sim.stream(lead, "go", signal=signal) as stream:
                async for c in stream:
                    if _deltas([c]):
                        signal.cancel("enough")
        return stream.result.status, stopped

    status, stopped = anyio.run(main, backend=backend)
    assert status == "cancelled" and stopped == ["the child's tool was stopped"]


def _finished_text(chunks: list[Chunk]) -> list[str]:
    return [str(c.data["text"]) for c in chunks
            if isinstance(c, DataChunk) and c.name == "data-agent" and isinstance(c.data, dict)
            and c.data.get("status") == "finished"]


@pytest.mark.parametrize("guarded", [False, True])
def test_a_childs_finished_text_leaves_out_a_step_its_processor_discarded(guarded: bool) -> None:
    # the child's first answer is a draft its output processor sends back (a retry): it
    # streamed, then was discarded; what the child delivered is its second answer alone
    def once(args: object) -> object:
        return Abort("again", retry=True) if "draft" in getattr(args, "text", "") \
            else Continue()

    redo = processor("redo", process_output_step=once)  # type: ignore[arg-type]
    child = Agent.create("sim/research", name="research", max_processor_retries=1,
                         output_processors=[redo])
    lead = Agent.create("sim/lead", name="lead", tools=[child],
                        output_processors=[PIIDetector()] if guarded else [])
    models = {"sim/research": ScriptedModel([Say("draft"), Say("Found it.")])}
    sim = Simulator(ScriptedModel([Say(calls=[call("research", input="q")]), Say("ok")]),
                    models=models)
    with sim.stream(lead, "go") as stream:
        got = list(stream)
    assert stream.result.status == "finished", stream.result.error
    assert _finished_text(got) == ["Found it."]
