"""Decoding does not depend on how the byte stream is split into reads.

For SSE framing alone and for the whole provider decoding (SSE + codec), on recorded
streams and on generated ones with every kind of line ending: any split gives the same
events as one read, and the same failure at the same point.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.wire_server import aws_event
from interpreters.providers.anthropic import AnthropicStreamDecoder
from interpreters.providers.bedrock import EVENT_STREAM, ConverseStreamDecoder
from interpreters.providers.codec import ByteStreamDecoder
from interpreters.providers.gemini import GeminiStreamDecoder
from interpreters.providers.openai_chat import OpenAIStreamDecoder
from interpreters.providers.openai_responses import ResponsesStreamDecoder
from interpreters.providers.provider import ProviderError
from interpreters.providers.sse import SseEvent, SseParser
from pipeline.values.chunks import ModelEvent
from tests.providers.cassettes import index_files, load, traffic_dir
from tests.providers.helpers import (
    an_text_stream,
    aws_exception,
    br_text_stream,
    oa_chunk,
    oa_text_stream,
    rs_text_stream,
    sse,
)


def splits(data: bytes) -> st.SearchStrategy[list[bytes]]:
    """`data` cut at any set of positions (including empty reads)."""
    cuts = st.lists(st.integers(0, len(data)), max_size=min(len(data), 40))
    return cuts.map(lambda cs: _cut(data, sorted(cs)))


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    out, prev = [], 0
    for c in cuts:
        out.append(data[prev:c])
        prev = c
    out.append(data[prev:])
    return out


def sse_events(chunks: list[bytes]) -> list[SseEvent]:
    p = SseParser()
    return [e for c in chunks for e in p.feed(c)] + p.close()


field_value = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\r\n"), max_size=12
)
line = st.one_of(
    field_value.map(lambda v: f"data: {v}"),
    field_value.map(lambda v: f"event:{v}"),
    field_value.map(lambda v: f": {v}"),
    field_value.map(lambda v: f"id: {v}"),
    st.just(""),
    field_value,  # garbage: a line without a known field
)
stream = st.tuples(
    st.lists(line, max_size=25), st.sampled_from(["\n", "\r\n", "\r"])
).map(lambda t: t[1].join(t[0]).encode() + t[1].encode())


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_sse_framing_is_split_invariant(data: st.DataObject) -> None:
    raw = data.draw(stream)
    assert sse_events(data.draw(splits(raw))) == sse_events([raw])


Decode = Callable[[], ByteStreamDecoder]


def _openai() -> ByteStreamDecoder:
    return ByteStreamDecoder(OpenAIStreamDecoder(), lambda e: e, status=200, request_id=None)


def _anthropic() -> ByteStreamDecoder:
    return ByteStreamDecoder(AnthropicStreamDecoder(), lambda e: e, status=200, request_id=None)


def _gemini() -> ByteStreamDecoder:
    return ByteStreamDecoder(GeminiStreamDecoder(), lambda e: e, status=200, request_id=None)


def _responses() -> ByteStreamDecoder:
    return ByteStreamDecoder(ResponsesStreamDecoder(), lambda e: e, status=200, request_id=None)


def _bedrock() -> ByteStreamDecoder:
    return ByteStreamDecoder(ConverseStreamDecoder(), lambda e: e, status=200, request_id=None,
                             framing=EVENT_STREAM)


def _corrupt(body: bytes, at: int) -> bytes:
    return body[:at] + bytes([body[at] ^ 0xFF]) + body[at + 1:]


def decode(make: Decode, chunks: list[bytes]) -> tuple[list[ModelEvent], str | None]:
    """Events up to the end or the failure, and the failure's type."""
    d = make()
    out: list[ModelEvent] = []
    try:
        for c in chunks:
            out += d.feed(c)
        out += d.close()
        d.check()
    except ProviderError as e:
        return out, e.error.error_type
    return out, None


OPENAI_TOOLS = sse(
    oa_chunk({"role": "assistant", "content": None}),
    ": OPENROUTER PROCESSING\n\n",
    oa_chunk({"reasoning": "think "}),
    oa_chunk({"reasoning": "more"}),
    oa_chunk({"content": "Ça va 🦅"}),
    oa_chunk({"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "f"}}]}),
    oa_chunk({"tool_calls": [{"index": 1, "id": "call_b", "function": {"name": "g",
                                                                       "arguments": ""}}]}),
    oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"x": '}}]}),
    oa_chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"y": [1,'}}]}),
    oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"é"}'}}]}),
    oa_chunk({"tool_calls": [{"index": 1, "function": {"arguments": " 2]}"}}]}),
    oa_chunk(finish="tool_calls"),
    oa_chunk(usage={"prompt_tokens": 9, "completion_tokens": 4}),
    "data: [DONE]\n\n",
)
CORPUS: list[tuple[Decode, bytes]] = [
    (_openai, OPENAI_TOOLS),
    (_openai, OPENAI_TOOLS.replace(b"\n", b"\r\n")),
    (_openai, oa_text_stream("a", "b", "c")),
    (_openai, OPENAI_TOOLS[: len(OPENAI_TOOLS) // 2]),  # broken: ends mid-way
    (_openai, sse(oa_chunk({"content": "x"}), "data: {oops\n\n", "data: [DONE]\n\n")),
    (_anthropic, an_text_stream("Hel", "lo ", "wörld")),
    (_anthropic, an_text_stream("x").replace(b"\n", b"\r")),
    (_anthropic, an_text_stream("a", "b")[:-30]),  # broken: no message_stop
    (_responses, rs_text_stream("Hel", "lo ", "wörld")),
    (_responses, rs_text_stream("x").replace(b"\n", b"\r\n")),
    (_responses, rs_text_stream("a", "b")[:-40]),  # broken: no response.completed
    (_bedrock, br_text_stream("Hel", "lo ", "wörld 🦅")),
    (_bedrock, br_text_stream("a", "b")[:-9]),  # broken: ends inside the last frame
    (_bedrock, br_text_stream("a") + b"\x00\x00\x00\x20garbage-after-the-end"),
    (_bedrock, aws_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "a"}})
     + aws_exception("throttlingException", "slow")),
    (_bedrock, _corrupt(br_text_stream("x", "y"), 140)),  # broken: a CRC mismatch
]



def _recorded() -> list[tuple[Decode, bytes]]:
    """Every recorded SSE body of the shared traffic (when it is there)."""
    root = traffic_dir()
    if not (root / "INDEX.md").exists():
        return []
    out: list[tuple[Decode, bytes]] = []
    for name in index_files(root):
        for ex in load(root, name).exchanges:
            body = ex.decoded_body
            if ex.status == 200 and not body.lstrip().startswith(b"{"):
                kind = dict(ex.headers).get("content-type", "")
                out.append((
                    _bedrock if EVENT_STREAM.marker in kind
                    else _anthropic if b"message_start" in body
                    else _responses if b'"type":"response.' in body
                    else _gemini if b'"candidates"' in body else _openai, body))
    return out


CORPUS += _recorded()


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_provider_decoding_is_split_invariant(data: st.DataObject) -> None:
    make, raw = data.draw(st.sampled_from(CORPUS))
    whole = decode(make, [raw])
    assert decode(make, data.draw(splits(raw))) == whole


def test_corpus_covers_success_and_failure() -> None:
    results = [decode(make, [raw]) for make, raw in CORPUS]
    assert {None, "incomplete_stream", "invalid_response"} <= {err for _, err in results}
