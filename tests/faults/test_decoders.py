"""Fault matrix, decoder cells: one OpenAI-format stream that gives two tool calls the
same id at different indices (a server bug seen in the wild) stays two calls with
distinct ids, decoded alone and through both interpreters (the history stays paired)."""

from __future__ import annotations

import anyio.to_thread
import pytest

from interpreters.providers import ByteStreamDecoder, OpenAIChatCodec
from pipeline.values.chunks import ModelEvent, ModelFinish, ToolCall, ToolCallDelta
from pipeline.values.messages import ToolCallPart, ToolResultPart
from pipeline.values.pairing import is_paired
from tests.faults.harness import SSE, Ran, run_async, run_sync
from tests.providers.helpers import ask, oa_chunk, oa_text_stream, sse
from tests.providers.server import ReplayServer, Reply

pytestmark = pytest.mark.anyio


def tc(index: int, id: str | None = None, name: str | None = None,
       args: str | None = None) -> dict[str, object]:
    fn: dict[str, object] = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    d: dict[str, object] = {"index": index, "function": fn}
    if id is not None:
        d["id"], d["type"] = id, "function"
    return d


def same_id_twice(*, interleaved: bool) -> bytes:
    first = [oa_chunk({"tool_calls": [tc(0, "call_dup", "get_capital")]}),
             oa_chunk({"tool_calls": [tc(0, args='{"country": ')]}),
             oa_chunk({"tool_calls": [tc(0, args='"UK"}')]})]
    second = [oa_chunk({"tool_calls": [tc(1, "call_dup", "get_capital")]}),
              oa_chunk({"tool_calls": [tc(1, "call_dup", args='{"country": "FR"}')]})]
    frames = ([first[0], second[0], first[1], second[1], first[2]] if interleaved
              else first + second)
    return sse(*frames, oa_chunk(finish="tool_calls"), "data: [DONE]\n\n")


def decode(raw: bytes) -> list[ModelEvent]:
    codec = OpenAIChatCodec()
    enc = codec.encode(ask(), model="m", stream=True)
    d = ByteStreamDecoder(codec.stream_decoder(enc, status=200, request_id=None),
                          enc.restore, status=200, request_id=None)
    out = d.feed(raw) + d.close()
    d.check()
    return out


@pytest.mark.parametrize("interleaved", [False, True])
def test_same_id_at_two_indices_stays_two_calls(interleaved: bool) -> None:
    events = decode(same_id_twice(interleaved=interleaved))
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [dict(c.args) for c in calls] == [{"country": "UK"}, {"country": "FR"}]
    assert calls[0].tool_call_id == "call_dup"
    assert calls[1].tool_call_id != "call_dup" and calls[1].tool_call_id.startswith("call_dup")
    # Every delta names the call it belongs to.
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    for c in calls:
        assert "".join(d.args_delta for d in deltas if d.tool_call_id == c.tool_call_id) in (
            '{"country": "UK"}', '{"country": "FR"}')
    assert isinstance(events[-1], ModelFinish)


def test_same_id_repeated_at_the_same_index_is_one_call() -> None:
    raw = sse(oa_chunk({"tool_calls": [tc(0, "call_a", "f", '{"x": ')]}),
              oa_chunk({"tool_calls": [tc(0, "call_a", args="1}")]}),
              oa_chunk(finish="tool_calls"), "data: [DONE]\n\n")
    calls = [e for e in decode(raw) if isinstance(e, ToolCall)]
    assert [(c.tool_call_id, dict(c.args)) for c in calls] == [("call_a", {"x": 1})]


async def test_same_id_twice_through_the_interpreters(
    server: ReplayServer, anyio_backend: str
) -> None:
    step1 = Reply(200, SSE, same_id_twice(interleaved=True))
    step2 = Reply(200, SSE, oa_text_stream("London and Paris."))

    def sync() -> Ran:
        return run_sync(server, step1, step2, first=False)

    runs = [await anyio.to_thread.run_sync(sync),
            await run_async(server, step1, step2, first=False)]
    for ran in runs:
        assert ran.result.status == "finished", ran.result.error
        msgs = ran.result.messages.all
        assert is_paired(msgs)
        calls = [p for m in msgs for p in m.parts if isinstance(p, ToolCallPart)]
        results = [p for m in msgs for p in m.parts if isinstance(p, ToolResultPart)]
        assert len({c.tool_call_id for c in calls}) == 2
        assert sorted(str(r.result) for r in results) == ["London", "unknown"]
