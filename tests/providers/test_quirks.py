"""Quirks of OpenAI-compatible servers, served by the replay server to the sync and the
async provider alike."""

from __future__ import annotations

import pytest

from pipeline.values.chunks import ModelFinish, ToolCall, ToolCallDelta
from tests.providers.helpers import Outcome, both, oa_chunk, sse
from tests.providers.server import ReplayServer, Reply

pytestmark = pytest.mark.anyio

SSE = (("content-type", "text/event-stream"),)


def _call(index: int | None, id: str | None, name: str | None, args: str | None
          ) -> dict[str, object]:
    fn: dict[str, object] = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    tc: dict[str, object] = {"type": "function", "function": fn}
    if index is not None:
        tc["index"] = index
    if id is not None:
        tc["id"] = id
    return tc


def _calls(o: Outcome) -> list[tuple[str, str, dict[str, object]]]:
    return [(e.tool_call_id, e.tool_name, dict(e.args)) for e in o.events
            if isinstance(e, ToolCall)]


def _stream(*deltas: list[dict[str, object]]) -> bytes:
    return sse(
        *(oa_chunk({"tool_calls": d}) for d in deltas),
        oa_chunk(finish="tool_calls"),
        oa_chunk(usage={"prompt_tokens": 9, "completion_tokens": 4}),
        "data: [DONE]\n\n",
    )


async def _both(server: ReplayServer, body: bytes) -> tuple[Outcome, Outcome]:
    reply = Reply(200, SSE, body, chunks=7)
    server.queue(reply, reply)
    return await both(server.url, "ollama")


PARIS, ROME = '{"city":"Paris"}', '{"city":"Rome"}'
TWO = [("call_a", "weather", {"city": "Paris"}), ("call_b", "weather", {"city": "Rome"})]


async def test_ollama_parallel_calls_all_at_index_0_are_distinct_calls(
    server: ReplayServer, anyio_backend: str
) -> None:
    # Ollama's /v1 stream: one chunk per call, every call at index 0 (ollama/ollama#15457).
    body = _stream([_call(0, "call_a", "weather", PARIS)], [_call(0, "call_b", "weather", ROME)])
    for o in await _both(server, body):
        assert o.error is None, o.error
        assert _calls(o) == TWO
        fin = o.events[-1]
        assert isinstance(fin, ModelFinish) and fin.finish_reason == "tool-calls"
        deltas = [(d.tool_call_id, d.args_delta) for d in o.events
                  if isinstance(d, ToolCallDelta)]
        assert deltas == [("call_a", ""), ("call_a", PARIS), ("call_b", ""), ("call_b", ROME)]


async def test_calls_sharing_an_index_in_one_chunk_and_id_less_fragments(
    server: ReplayServer, anyio_backend: str
) -> None:
    # Both calls in one delta at index 0; then a fragment without an id continues the
    # latest call at that index, and one that repeats an id continues that call.
    body = _stream(
        [_call(0, "call_a", "weather", '{"city":'), _call(0, "call_b", "weather", '{"city":')],
        [_call(0, None, None, '"Rome"}')],
        [_call(0, "call_a", None, '"Paris"}')],
    )
    for o in await _both(server, body):
        assert o.error is None, o.error
        assert _calls(o) == TWO


async def test_standard_fragments_by_index_are_unchanged(
    server: ReplayServer, anyio_backend: str
) -> None:
    # OpenAI: ids only on each call's first delta, fragments interleaved by index; some
    # servers repeat the id on every fragment. Neither starts a new call.
    body = _stream(
        [_call(0, "call_a", "weather", "")],
        [_call(1, "call_b", "weather", '{"city":')],
        [_call(0, None, None, '{"city":')],
        [_call(1, "call_b", None, '"Rome"}')],
        [_call(0, None, None, '"Paris"}')],
    )
    for o in await _both(server, body):
        assert o.error is None, o.error
        assert _calls(o) == TWO
