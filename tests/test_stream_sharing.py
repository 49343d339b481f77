"""Stream hooks share what they have seen until they diverge, and nobody can tell.

While every stream processor has seen the very same chunks, the loop keeps one list (one
`stream_parts` view per chunk, one args value for equal states). A skip, a replacement, or
a data-* chunk that only some processors opt in to splits the list; from then on each
processor's `stream_parts` must be exactly what it saw, and every view handed out before
must stay as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

from effects import Continue, Replace, Skip
from interpreters.testing import Say, ScriptedModel, Simulator
from pipeline import Agent, Chunk, DataChunk, Processor, StreamArgs, StreamResult, TextDelta


class Seer(Processor):
    """Records each part and its stream_parts (and a copy of it at the time), then acts."""

    def __init__(self, id: str, act: str = "pass", *, data: bool = False) -> None:
        self.id = id
        self.act = act
        self.process_data_parts = data
        self.parts: list[Chunk] = []
        self.views: list[Sequence[Chunk]] = []
        self.copies: list[list[Chunk]] = []
        self.args: list[StreamArgs[None]] = []

    def process_output_stream(self, args: StreamArgs[None]) -> StreamResult[None]:
        self.parts.append(args.part)
        self.views.append(args.stream_parts)
        self.copies.append(list(args.stream_parts))
        self.args.append(args)
        part = args.part
        if isinstance(part, TextDelta):
            if self.act == "skip-x" and "x" in part.text:
                return Skip()
            if self.act == "upper":
                return Replace(TextDelta(part.id, part.text.upper()))
        return Continue()


def run(seers: list[Seer], say: Say) -> None:
    agent = Agent.create("m", output_processors=seers)
    result = Simulator(ScriptedModel([say])).run(agent, "go").result
    assert result.status == "finished"
    for s in seers:
        for i, view in enumerate(s.views):
            assert list(view) == s.parts[: i + 1]  # exactly what it saw, still
            assert s.copies[i] == s.parts[: i + 1]  # and what it was given at the time


def test_pass_through_hooks_share_one_view_and_one_args_value() -> None:
    seers = [Seer(f"s{i}") for i in range(3)]
    run(seers, Say(["a", "b"]))
    for k in range(len(seers[0].views)):
        assert seers[0].views[k] is seers[1].views[k] is seers[2].views[k]
        assert seers[0].args[k] is seers[1].args[k] is seers[2].args[k]


def test_a_skip_splits_the_list_and_later_hooks_never_see_the_chunk() -> None:
    first, skipper, last = Seer("first"), Seer("skipper", "skip-x"), Seer("last")
    run([first, skipper, last], Say(["a", "x1", "b", "x2", "c"]))
    texts = [p.text for p in last.parts if isinstance(p, TextDelta)]
    assert texts == ["a", "b", "c"]
    assert [p.text for p in first.parts if isinstance(p, TextDelta)] == ["a", "x1", "b", "x2", "c"]
    assert first.parts == skipper.parts


def test_a_replacement_is_what_later_hooks_see() -> None:
    first, up, last = Seer("first"), Seer("up", "upper"), Seer("last")
    run([first, up, last], Say(["a", "b"]))
    assert [p.text for p in last.parts if isinstance(p, TextDelta)] == ["A", "B"]
    assert [p.text for p in up.parts if isinstance(p, TextDelta)] == ["a", "b"]


def test_data_chunks_reach_only_the_hooks_that_opted_in() -> None:
    plain, data, plain2 = Seer("plain"), Seer("data", data=True), Seer("plain2")
    run([plain, data, plain2], Say(["a", "b"], data=[DataChunk("data-x", 1)]))
    assert any(isinstance(p, DataChunk) for p in data.parts)
    assert not any(isinstance(p, DataChunk) for p in plain.parts + plain2.parts)
    assert plain.parts == plain2.parts


def test_data_chunks_seen_by_every_hook_keep_the_list_shared() -> None:
    seers = [Seer(f"d{i}", data=True) for i in range(2)]
    run(seers, Say(["a"], data=[DataChunk("data-x", 1)]))
    assert seers[0].views[-1] is seers[1].views[-1]
