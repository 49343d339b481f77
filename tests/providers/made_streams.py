"""Streamed answers of the five wire formats made here, with the text pieces a test
chooses (the shapes of bench/wire_server.py's, which follow recorded traffic): for
answers no recording has (JSON text on Anthropic and Bedrock, say)."""

from __future__ import annotations

import json

from bench.wire_server import aws_event
from tests.providers.server import Reply

SSE = (("content-type", "text/event-stream"),)
AWS = (("content-type", "application/vnd.amazon.eventstream"),)


def _sse(events: list[dict[str, object]], named: bool = False) -> bytes:
    out = b""
    for e in events:
        data = json.dumps(e, separators=(",", ":"))
        out += (f"event: {e['type']}\n" if named else "").encode() + f"data: {data}\n\n".encode()
    return out


def openai_chat(pieces: list[str]) -> bytes:
    base = {"id": "chatcmpl-made", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-4o"}

    def choice(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        return {"index": 0, "delta": delta, "finish_reason": finish}

    chunks = [dict(base, choices=[choice({"role": "assistant", "content": ""})])]
    chunks += [dict(base, choices=[choice({"content": p})]) for p in pieces]
    chunks.append(dict(base, choices=[choice({}, "stop")]))
    chunks.append(dict(base, choices=[], usage={"prompt_tokens": 9, "completion_tokens": 5,
                                                "total_tokens": 14}))
    return _sse(chunks) + b"data: [DONE]\n\n"


def anthropic(pieces: list[str]) -> bytes:
    evs: list[dict[str, object]] = [
        {"type": "message_start", "message": {
            "id": "msg_made", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-5", "stop_reason": None,
            "usage": {"input_tokens": 9, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": 0,
           "delta": {"type": "text_delta", "text": p}} for p in pieces),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    return _sse(evs, named=True)


def responses(pieces: list[str]) -> bytes:
    head = {"id": "resp_made", "object": "response", "created_at": 1, "model": "gpt-4o",
            "output": [], "error": None, "incomplete_details": None}
    msg = {"id": "msg_made", "type": "message", "role": "assistant"}
    text = "".join(pieces)
    part = {"type": "output_text", "text": text, "annotations": []}
    evs: list[dict[str, object]] = [
        {"type": "response.created", "response": dict(head, status="in_progress")},
        {"type": "response.output_item.added", "output_index": 0,
         "item": dict(msg, status="in_progress", content=[])},
        {"type": "response.content_part.added", "item_id": "msg_made", "output_index": 0,
         "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}},
        *({"type": "response.output_text.delta", "item_id": "msg_made", "output_index": 0,
           "content_index": 0, "delta": p} for p in pieces),
        {"type": "response.output_text.done", "item_id": "msg_made", "output_index": 0,
         "content_index": 0, "text": text},
        {"type": "response.output_item.done", "output_index": 0,
         "item": dict(msg, status="completed", content=[part])},
        {"type": "response.completed", "response": dict(
            head, status="completed", output=[dict(msg, status="completed", content=[part])],
            usage={"input_tokens": 9, "output_tokens": 5, "total_tokens": 14})},
    ]
    return _sse(evs, named=True)


def gemini(pieces: list[str]) -> bytes:
    def frame(text: str, finish: str | None = None) -> dict[str, object]:
        cand: dict[str, object] = {"content": {"parts": [{"text": text}], "role": "model"},
                                   "index": 0}
        if finish is not None:
            cand["finishReason"] = finish
        return {"candidates": [cand], "modelVersion": "gemini-2.5-flash",
                "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 5,
                                  "totalTokenCount": 14}}

    frames = [frame(p) for p in pieces] + [frame("", "STOP")]
    return b"".join(b"data: " + json.dumps(f).encode() + b"\r\n\r\n" for f in frames)


def bedrock(pieces: list[str]) -> bytes:
    return b"".join([
        aws_event("messageStart", {"role": "assistant"}),
        *(aws_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}})
          for p in pieces),
        aws_event("contentBlockStop", {"contentBlockIndex": 0}),
        aws_event("messageStop", {"stopReason": "end_turn"}),
        aws_event("metadata", {"usage": {"inputTokens": 9, "outputTokens": 5,
                                         "totalTokens": 14}, "metrics": {"latencyMs": 1}}),
    ])


MAKERS = {"openai-chat": openai_chat, "anthropic": anthropic, "openai-responses": responses,
          "gemini": gemini, "bedrock": bedrock}


def made(wire: str, pieces: list[str]) -> Reply:
    """A streamed answer of `wire` whose text is `pieces`, one HTTP chunk per few bytes."""
    return Reply(200, AWS if wire == "bedrock" else SSE, MAKERS[wire](pieces), chunks=37)
