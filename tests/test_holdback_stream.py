"""Stream hooks that hold chunks back and release them: Replace with several chunks or
none, release at text-end, `flush_output_stream` at the end of the model's response, and
what is held never reaching the caller or the messages when the run ends first."""

from __future__ import annotations

from collections.abc import Generator
from typing import cast

import anyio
import pytest

from effects import Abort, CallModel, Continue, Done, Emit, Out, Publish, Pull, Replace, Skip
from interpreters.testing import AsyncSimulator, Say, ScriptedModel
from pipeline.agent import Agent
from pipeline.loop import agent_loop
from pipeline.processor import (
    FlushArgs,
    FlushResult,
    StatefulProcessor,
    StreamArgs,
    StreamResult,
    processor,
)
from pipeline.protocol import RunCancelled
from pipeline.values.chunks import (
    Chunk,
    DataChunk,
    ErrorChunk,
    TextDelta,
    TextEnd,
    TextStart,
    Tripwire,
)
from pipeline.values.context import RunContext
from pipeline.values.messages import MessageList, user
from pipeline.values.result import ProcessorFailed, RunResult
from tests.helpers import make_agent, simulate, streamed_text


class Recorder(StatefulProcessor[None]):
    """Passes everything on; records the text deltas it sees."""

    def __init__(self, id: str) -> None:
        self.id = id
        self.seen: list[str] = []

    def initial_state(self) -> None:
        return None

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            self.seen.append(args.part.text)
        return Continue()


class HoldAll(StatefulProcessor[tuple[str, str]]):
    """Holds every text delta of a block; releases it as one delta at text-end, or at the
    flush when the block never ends. State: (block id, text held)."""

    def __init__(self, id: str = "hold") -> None:
        self.id = id

    def initial_state(self) -> tuple[str, str]:
        return ("", "")

    def process_output_stream(
        self, args: StreamArgs[tuple[str, str]]
    ) -> StreamResult[tuple[str, str]]:
        part = args.part
        held = args.state[1]
        if isinstance(part, TextDelta):
            return Out(Replace(()), (part.id, held + part.text))
        if isinstance(part, TextEnd) and held:
            return Out(Replace((TextDelta(part.id, held.upper()), part)), ("", ""))
        return Continue()

    def flush_output_stream(
        self, args: FlushArgs[tuple[str, str]]
    ) -> FlushResult[tuple[str, str]]:
        tid, held = args.state
        if not held:
            return Continue()
        return Out(Replace((TextDelta(tid, held.upper() + "!"),)), ("", ""))


def split(args: StreamArgs[None]) -> StreamResult[None]:
    """Each delta becomes one delta per character."""
    part = args.part
    if isinstance(part, TextDelta) and len(part.text) > 1:
        return Replace(tuple(TextDelta(part.id, ch) for ch in part.text))
    return Continue()


def drop_text_end(args: StreamArgs[None]) -> StreamResult[None]:
    return Skip() if isinstance(args.part, TextEnd) else Continue()


def test_replace_with_several_chunks_reaches_later_processors_in_order() -> None:
    after = Recorder("after")
    agent = make_agent(output_processors=[processor("split", process_output_stream=split), after])
    ran = simulate(agent, [Say(["ab", "c"])])
    assert after.seen == ["a", "b", "c"]
    deltas = [c.text for c in ran.chunks if isinstance(c, TextDelta)]
    assert deltas == ["a", "b", "c"]
    assert ran.result.text == "abc"
    assert ran.result.steps[0].text == "abc"


def test_replace_with_several_chunks_from_the_last_processor() -> None:
    agent = make_agent(output_processors=[Recorder("before"),
                                          processor("split", process_output_stream=split)])
    ran = simulate(agent, [Say(["xy"])])
    assert [c.text for c in ran.chunks if isinstance(c, TextDelta)] == ["x", "y"]
    assert ran.result.text == "xy"


def test_replace_with_no_chunk_drops_it_for_everyone_after() -> None:
    after = Recorder("after")

    def drop(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta) and args.part.text == "b":
            return Replace(())
        return Continue()

    agent = make_agent(output_processors=[processor("drop", process_output_stream=drop), after])
    ran = simulate(agent, [Say(["a", "b", "c"])])
    assert after.seen == ["a", "c"]
    assert streamed_text(ran.chunks) == ran.result.text == "ac"


def test_held_text_is_released_before_text_end() -> None:
    after = Recorder("after")
    ran = simulate(make_agent(output_processors=[HoldAll(), after]), [Say(["one ", "two"])])
    assert after.seen == ["ONE TWO"]
    types = ran.types
    i = types.index("text-delta")
    assert types[i + 1] == "text-end"  # released right before the block's end
    assert ran.result.text == "ONE TWO"
    assert ran.result.messages.messages[-1].text == "ONE TWO"


def test_flush_releases_what_is_held_when_the_block_never_ends() -> None:
    # The first processor drops text-end, so the holder sees only the response's end.
    after = Recorder("after")
    agent = make_agent(output_processors=[
        processor("no-end", process_output_stream=drop_text_end), HoldAll(), after,
    ])
    ran = simulate(agent, [Say(["one ", "two"])])
    assert after.seen == ["ONE TWO!"]
    assert ran.result.text == "ONE TWO!"
    assert ran.result.steps[0].text == "ONE TWO!"


def test_flush_runs_before_process_output_step_sees_the_text() -> None:
    seen: list[str] = []

    def step(args: object) -> Continue:
        from pipeline.processor import OutputStepArgs

        assert isinstance(args, OutputStepArgs)
        seen.append(args.text)
        return Continue()

    agent = make_agent(output_processors=[
        processor("no-end", process_output_stream=drop_text_end), HoldAll(),
        processor("step", process_output_step=step),
    ])
    simulate(agent, [Say(["a", "b"])])
    assert seen == ["AB!"]


def test_flush_with_nothing_held_changes_nothing() -> None:
    bare = simulate(make_agent(), [Say(["a", "b"])])
    agent = make_agent(output_processors=[HoldAll(), Recorder("after")])
    held = simulate(agent, [Say([])])
    assert held.result.status == "finished"
    assert streamed_text(bare.chunks) == "ab"


def test_an_abort_before_release_never_lets_held_text_out() -> None:
    def trip_on_end(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextEnd):
            return Abort("blocked")
        return Continue()

    agent = make_agent(output_processors=[
        processor("trip", process_output_stream=trip_on_end), HoldAll(),
    ])
    ran = simulate(agent, [Say(["secret ", "value"])])
    assert ran.result.status == "tripped"
    assert streamed_text(ran.chunks) == ""
    assert "secret" not in ran.result.text
    assert all("secret" not in m.text for m in ran.result.messages.messages[1:])


class HoldLast(StatefulProcessor[str]):
    """Releases each delta when the next one comes (holds one back)."""

    id = "hold-last"

    def initial_state(self) -> str:
        return ""

    def process_output_stream(self, args: StreamArgs[str]) -> StreamResult[str]:
        if isinstance(args.part, TextDelta):
            prev = args.state
            out = (TextDelta(args.part.id, prev),) if prev else ()
            return Out(Replace(out), args.part.text)
        return Continue()


def test_a_crash_after_holding_keeps_only_what_passed_every_processor() -> None:
    def crash_on_third(args: StreamArgs[int]) -> StreamResult[int]:
        if isinstance(args.part, TextDelta):
            if args.state == 2:
                raise RuntimeError("boom")
            return Out(Continue(), args.state + 1)
        return Continue()

    agent = make_agent(output_processors=[
        HoldLast(), processor("crash", state=0, process_output_stream=crash_on_third),
    ])
    ran = simulate(agent, [Say(["a", "b", "c", "d"])])
    assert isinstance(ran.result.error, ProcessorFailed)
    assert streamed_text(ran.chunks) == "ab"  # 'c' crashed the second processor; 'd' held
    last = ran.result.messages.messages[-1]
    assert (last.text, last.incomplete) == ("ab", True)


def test_a_cancel_while_holding_keeps_only_released_text() -> None:
    loop = agent_loop(
        make_agent(output_processors=[HoldLast()]),
        MessageList.of([user("hi", id="u")]),
        context=RunContext(run_id="r"),
    )
    cmd = next(loop)
    while not isinstance(cmd, CallModel):
        cmd = loop.send(None)
    delivered: list[Chunk] = []
    cmd = loop.send(TextStart("t"))
    for piece in ("pub", "lic ", "SECRET"):
        assert isinstance(cmd, Pull)
        delivered += cmd.publish
        cmd = loop.send(TextDelta("t", piece))
    assert isinstance(cmd, Pull)
    delivered += cmd.publish
    cmd = loop.throw(RunCancelled("gone"))
    while not isinstance(cmd, Done):
        assert isinstance(cmd, Publish)
        delivered += cmd.chunks
        cmd = loop.send(None)
    res = cmd.result
    assert isinstance(res, RunResult)
    assert streamed_text(delivered) == "public "
    assert isinstance(delivered[-1], ErrorChunk)
    assert res.text == "public "
    last = res.messages.messages[-1]
    assert (last.text, last.incomplete) == ("public ", True)


def test_a_tuple_holding_a_non_chunk_fails_the_run_closed() -> None:
    def bad(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            return cast(StreamResult[None], Replace((args.part, "nope")))
        return Continue()

    ran = simulate(make_agent(output_processors=[processor("bad", process_output_stream=bad)]),
                   [Say(["x"])])
    err = ran.result.error
    assert isinstance(err, ProcessorFailed)
    assert (err.processor_id, err.error_type) == ("bad", "InvalidEffect")
    assert streamed_text(ran.chunks) == ""


def test_a_flush_may_emit_and_abort() -> None:
    def flush_emit(args: FlushArgs[None]) -> FlushResult[None]:
        return Emit((DataChunk("data-flushed", 1),))

    def flush_abort(args: FlushArgs[None]) -> FlushResult[None]:
        return Abort("held something bad")

    def keep(args: StreamArgs[None]) -> StreamResult[None]:
        return Continue()

    emit = processor("emit", process_output_stream=keep, flush_output_stream=flush_emit)
    ran = simulate(make_agent(output_processors=[emit]), [Say("a")])
    assert DataChunk("data-flushed", 1) in ran.chunks
    trip = processor("trip", process_output_stream=keep, flush_output_stream=flush_abort)
    ran = simulate(make_agent(output_processors=[trip]), [Say("a")])
    assert ran.result.tripwire == Tripwire("held something bad", False, "trip")


class HoldAllIO(StatefulProcessor[tuple[str, str]]):
    """HoldAll as generator hooks (the I/O path); asks for nothing, to stay scriptless."""

    id = "hold"

    def initial_state(self) -> tuple[str, str]:
        return ("", "")

    def process_output_stream(
        self, args: StreamArgs[tuple[str, str]]
    ) -> Generator[object, object, StreamResult[tuple[str, str]]]:
        if False:
            yield None
        return HoldAll().process_output_stream(args)

    def flush_output_stream(
        self, args: FlushArgs[tuple[str, str]]
    ) -> Generator[object, object, FlushResult[tuple[str, str]]]:
        if False:
            yield None
        return HoldAll().flush_output_stream(args)


@pytest.mark.parametrize("holder", [HoldAll, HoldAllIO])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_async_simulator_releases_the_same_way(
    holder: type[HoldAll | HoldAllIO], backend: str
) -> None:
    split_p = processor("split", process_output_stream=split)
    for drop in (False, True):
        procs = [processor("no-end", process_output_stream=drop_text_end)] if drop else []
        agent = make_agent(output_processors=[*procs, holder(), split_p])

        async def go(agent: Agent) -> RunResult:
            sim = AsyncSimulator(ScriptedModel([Say(["ab", "c"])]))
            return (await sim.run(agent, "hi")).result

        result = anyio.run(go, agent, backend=backend)
        assert result.text == ("ABC!" if drop else "ABC")


def test_later_processors_stream_parts_hold_the_released_chunks() -> None:
    seen: list[list[str]] = []

    def look(args: StreamArgs[None]) -> StreamResult[None]:
        seen.append([c.text for c in args.stream_parts if isinstance(c, TextDelta)])
        return Continue()

    agent = make_agent(output_processors=[
        processor("split", process_output_stream=split),
        processor("look", process_output_stream=look),
    ])
    simulate(agent, [Say(["ab"])])
    assert ["a", "b"] in seen
    assert ["ab"] not in seen


def test_a_crashing_flush_fails_closed_and_drops_what_it_held() -> None:
    def crash(args: FlushArgs[tuple[str, str]]) -> FlushResult[tuple[str, str]]:
        raise RuntimeError("flush broke")

    holder = HoldAll()
    agent = make_agent(output_processors=[
        processor("no-end", process_output_stream=drop_text_end),
        processor("hold", state=("", ""), process_output_stream=holder.process_output_stream,
                  flush_output_stream=crash),
    ])
    ran = simulate(agent, [Say(["kept ", "secret"])])
    err = ran.result.error
    assert isinstance(err, ProcessorFailed)
    assert (err.processor_id, err.hook) == ("hold", "flush_output_stream")
    assert streamed_text(ran.chunks) == ""
    assert all("secret" not in m.text for m in ran.messages)
