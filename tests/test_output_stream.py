"""process_output_stream: every chunk, in list order; Replace, Skip, Emit, Abort, state."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import cast

from effects import Abort, Continue, Emit, Out, Replace, Skip
from interpreters.testing import Say, Simulator, call
from pipeline.processor import (
    Processor,
    StatefulProcessor,
    StreamArgs,
    StreamResult,
    abort,
    processor,
)
from pipeline.tools import tool
from pipeline.values.chunks import (
    Chunk,
    DataChunk,
    ErrorChunk,
    Finish,
    StepFinish,
    StepStart,
    TextDelta,
    ToolCall,
    ToolResult,
    Tripwire,
)
from pipeline.values.messages import DataPart
from pipeline.values.result import ProcessorFailed
from tests.helpers import TrackedModel, data_chunks, make_agent, simulate, streamed_text

WORDS = ["The ", "secret ", "is ", "out"]


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


class Recorder(Processor):
    """Passes everything on; records each part and the stream_parts it was given."""

    def __init__(self, id: str, *, data: bool = False) -> None:
        self.id = id
        self.process_data_parts = data
        self.parts: list[Chunk] = []
        self.views: list[Sequence[Chunk]] = []

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        self.parts.append(args.part)
        self.views.append(args.stream_parts)
        return Continue()


def upper(args: StreamArgs[None]) -> StreamResult[None]:
    if isinstance(args.part, TextDelta):
        return Replace(TextDelta(args.part.id, args.part.text.upper()))
    return Continue()


def drop_secret(args: StreamArgs[None]) -> StreamResult[None]:
    if isinstance(args.part, TextDelta) and "secret" in args.part.text:
        return Skip()
    return Continue()


def test_replace_changes_the_chunk_the_caller_gets_and_the_message() -> None:
    ran = simulate(
        make_agent(output_processors=[processor("up", process_output_stream=upper)]), [Say(WORDS)]
    )
    assert streamed_text(ran.chunks) == "THE SECRET IS OUT"
    assert ran.result.text == "THE SECRET IS OUT"
    assert ran.result.steps[0].text == "THE SECRET IS OUT"


def test_skip_drops_the_chunk_from_the_stream_and_the_messages() -> None:
    ran = simulate(
        make_agent(output_processors=[processor("drop", process_output_stream=drop_secret)]),
        [Say(WORDS)],
    )
    assert streamed_text(ran.chunks) == "The is out"
    assert ran.messages[-1].text == "The is out"
    assert "secret" not in ran.result.text
    assert len([c for c in ran.chunks if isinstance(c, TextDelta)]) == 3


def test_a_skipped_chunk_never_reaches_later_processors() -> None:
    later = Recorder("later")
    ran = simulate(
        make_agent(output_processors=[processor("drop", process_output_stream=drop_secret), later]),
        [Say(WORDS)],
    )
    deltas = [c.text for c in later.parts if isinstance(c, TextDelta)]
    assert deltas == ["The ", "is ", "out"]
    assert list(later.views[-1]) == later.parts  # its stream_parts lack the skipped chunk too
    assert ran.result.status == "finished"


def test_stream_processors_chain_in_list_order() -> None:
    later = Recorder("later")
    agent = make_agent(output_processors=[processor("up", process_output_stream=upper), later])
    simulate(agent, [Say(WORDS)])
    assert [c.text for c in later.parts if isinstance(c, TextDelta)] == [w.upper() for w in WORDS]


def test_processors_see_loop_chunks_as_well_as_model_chunks() -> None:
    rec = Recorder("rec")
    agent = make_agent(tools=[lookup], output_processors=[rec])
    ran = simulate(agent, [Say("a", calls=[call("lookup", query="q")]), Say("b")])
    kinds = [type(c) for c in rec.parts]
    for k in (StepStart, TextDelta, ToolCall, ToolResult, StepFinish, Finish):
        assert k in kinds
    assert kinds[-1] is Finish
    assert rec.parts == ran.chunks  # it saw exactly what the caller got


def test_stream_parts_is_everything_seen_so_far_across_steps() -> None:
    rec = Recorder("rec")
    simulate(
        make_agent(tools=[lookup], output_processors=[rec]),
        [Say("a", calls=[call("lookup", query="q")]), Say("b")],
    )
    for i, view in enumerate(rec.views):
        assert len(view) == i + 1
        assert view[-1] == rec.parts[i]
        assert list(view) == rec.parts[: i + 1]


def test_stream_parts_is_a_constant_size_view_not_a_copy() -> None:
    """Per-chunk cost must not grow with the stream: each call gets an O(1) view."""
    rec = Recorder("rec")
    n = 500
    simulate(make_agent(output_processors=[rec]), [Say(["w"] * n)])
    first, last = rec.views[0], rec.views[-1]
    assert len(first) == 1 and len(last) == len(rec.parts) > n
    assert not isinstance(last, tuple | list)
    # a copy would grow with the stream; a view is the same size whatever its length
    assert sys.getsizeof(first) == sys.getsizeof(last)
    # and every view shares one storage (white-box: the loop's append-only list)
    storages = {id(getattr(v, "_items")) for v in rec.views}  # noqa: B009
    assert len(storages) == 1
    # a view taken earlier does not grow when later chunks arrive
    assert len(rec.views[10]) == 11


def test_state_persists_across_chunks() -> None:
    counts: list[int] = []

    class WordCount(StatefulProcessor[int]):
        id = "words"

        def initial_state(self) -> int:
            return 0

        def process_output_stream(self, args: StreamArgs[int]) -> StreamResult[int]:
            if isinstance(args.part, TextDelta):
                return Out(Continue(), args.state + len(args.part.text.split()))
            if isinstance(args.part, Finish):
                counts.append(args.state)
            return Continue()

    simulate(
        make_agent(tools=[lookup], output_processors=[WordCount()]),
        [Say(["one two", " three"], calls=[call("lookup", query="q")]), Say("four")],
    )
    assert counts == [4]


def test_abort_mid_stream_ends_the_stream_with_the_tripwire() -> None:
    def stop_at_secret(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta) and "secret" in args.part.text:
            return Abort("leak", metadata={"word": "secret"})
        return Continue()

    agent = make_agent(
        tools=[lookup],
        output_processors=[processor("filter", process_output_stream=stop_at_secret)],
    )
    ran = simulate(
        agent, [Say(WORDS, calls=[call("lookup", query="q")]), Say("never")], tracking=True
    )
    tw = ran.result.tripwire
    assert tw is not None
    assert (tw.reason, tw.retry, tw.processor_id, tw.metadata) == (
        "leak",
        False,
        "filter",
        {"word": "secret"},
    )
    assert ran.chunks[-1] == tw
    assert [type(c) for c in ran.chunks].count(Tripwire) == 1
    assert streamed_text(ran.chunks) == "The "  # nothing after the aborting chunk
    assert not any(isinstance(c, StepFinish | Finish | ToolCall) for c in ran.chunks)
    # the model stream was closed, no tool ran and the model was not called again
    assert ran.tracked.closed_early == 1
    assert len(ran.requests) == 1
    assert [m.role for m in ran.messages] == ["user"]  # the aborted response is not kept
    assert ran.result.status == "tripped" and ran.result.finish_reason == "tripwire"


def test_the_model_stream_is_closed_before_the_tripwire_reaches_the_caller() -> None:
    def stop(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            return Abort("stop")
        return Continue()

    model = TrackedModel([Say(WORDS)])
    stream = Simulator(model).stream(
        make_agent(output_processors=[processor("s", process_output_stream=stop)]), "hi"
    )
    closed_at_tripwire = [model.closed_early for c in stream if isinstance(c, Tripwire)]
    assert closed_at_tripwire == [1]
    assert stream.result.status == "tripped"


def test_abort_helper_mid_stream() -> None:
    def stop(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            abort("no text allowed")
        return Continue()

    ran = simulate(
        make_agent(output_processors=[processor("s", process_output_stream=stop)]), [Say(WORDS)]
    )
    assert ran.result.tripwire is not None
    assert ran.result.tripwire.reason == "no text allowed"
    assert ran.types[-1] == "tripwire"
    assert streamed_text(ran.chunks) == ""


def test_abort_on_the_finish_chunk_trips_the_run() -> None:
    """A processor may check the whole output at the finish chunk and still block it."""

    def at_finish(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, Finish):
            return Abort("checked at finish")
        return Continue()

    ran = simulate(
        make_agent(output_processors=[processor("end", process_output_stream=at_finish)]),
        [Say("hello")],
    )
    assert ran.result.status == "tripped"
    assert ran.types[-1] == "tripwire"
    assert "finish" not in ran.types


def test_emit_sends_data_chunks_and_keeps_only_non_transient_ones() -> None:
    def signal(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta) and args.part.text == "is ":
            return Emit(
                (
                    DataChunk("data-progress", {"at": "is"}, transient=True),
                    DataChunk("data-note", {"kept": True}),
                )
            )
        return Continue()

    ran = simulate(
        make_agent(output_processors=[processor("sig", process_output_stream=signal)]), [Say(WORDS)]
    )
    assert [d.name for d in data_chunks(ran.chunks)] == ["data-progress", "data-note"]
    assert streamed_text(ran.chunks) == "The secret is out"  # Emit passes the chunk on
    parts = ran.messages[-1].parts
    assert DataPart("data-note", {"kept": True}) in parts
    assert not any(isinstance(p, DataPart) and p.name == "data-progress" for p in parts)


def test_emit_beside_another_effect_with_out() -> None:
    def tag_and_drop(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta) and "secret" in args.part.text:
            return Out(Skip(), None, (DataChunk("data-redacted", 1, transient=True),))
        return Continue()

    ran = simulate(
        make_agent(output_processors=[processor("r", process_output_stream=tag_and_drop)]),
        [Say(WORDS)],
    )
    assert [d.name for d in data_chunks(ran.chunks)] == ["data-redacted"]
    assert streamed_text(ran.chunks) == "The is out"


def test_data_chunks_reach_only_processors_that_opt_in() -> None:
    opted = Recorder("opted", data=True)
    plain = Recorder("plain")
    agent = make_agent(output_processors=[opted, plain])
    model_data = DataChunk("data-weather", {"t": 20})
    ran = simulate(agent, [Say("sunny", data=[model_data])])
    assert model_data in opted.parts
    assert not any(isinstance(c, DataChunk) for c in plain.parts)
    assert not any(isinstance(c, DataChunk) for c in plain.views[-1])
    assert model_data in ran.chunks  # the caller still gets it
    assert DataPart("data-weather", {"t": 20}) in ran.messages[-1].parts


def test_a_transient_model_data_chunk_is_streamed_not_kept() -> None:
    ran = simulate(make_agent(), [Say("x", data=[DataChunk("data-ping", 1, transient=True)])])
    assert [d.name for d in data_chunks(ran.chunks)] == ["data-ping"]
    assert not any(isinstance(p, DataPart) for m in ran.messages for p in m.parts)


def test_an_opted_in_processor_can_replace_a_data_chunk() -> None:
    def redact(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, DataChunk):
            return Replace(DataChunk(args.part.name, "redacted"))
        return Continue()

    agent = make_agent(
        output_processors=[processor("r", process_output_stream=redact, process_data_parts=True)]
    )
    ran = simulate(agent, [Say("x", data=[DataChunk("data-secret", "s3cr3t")])])
    assert data_chunks(ran.chunks) == [DataChunk("data-secret", "redacted")]


def test_replace_with_something_not_a_chunk_fails_closed() -> None:
    def bad(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta):
            return cast(StreamResult[None], Replace(args.part.text))
        return Continue()

    ran = simulate(
        make_agent(output_processors=[processor("bad", process_output_stream=bad)]),
        [Say(WORDS)],
        tracking=True,
    )
    assert isinstance(ran.result.error, ProcessorFailed)
    assert (ran.result.error.processor_id, ran.result.error.hook) == (
        "bad",
        "process_output_stream",
    )
    assert not any(isinstance(c, str) for c in cast(list[object], ran.chunks))
    assert streamed_text(ran.chunks) == ""


def test_an_exception_mid_stream_fails_closed_and_closes_the_model_stream() -> None:
    def crash(args: StreamArgs[None]) -> StreamResult[None]:
        if isinstance(args.part, TextDelta) and "secret" in args.part.text:
            raise RuntimeError("guard crashed")
        return Continue()

    ran = simulate(
        make_agent(output_processors=[processor("guard", process_output_stream=crash)]),
        [Say(WORDS)],
        tracking=True,
    )
    err = ran.result.error
    assert isinstance(err, ProcessorFailed)
    assert (err.processor_id, err.hook, err.error_type, err.message) == (
        "guard",
        "process_output_stream",
        "RuntimeError",
        "guard crashed",
    )
    assert isinstance(ran.chunks[-1], ErrorChunk)
    assert streamed_text(ran.chunks) == "The "  # the unchecked chunk never went out
    assert ran.tracked.closed_early == 1
