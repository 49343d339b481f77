"""W5's loopback server: streams a fixed Chat Completions, Anthropic Messages, OpenAI
Responses or Gemini SSE body, or a Bedrock Converse event stream.

    python -m bench.wire_server N        # prints the port it listens on (127.0.0.1), then serves
    python -m bench.wire_server N 0.02   # the same, a pause of 20 ms before each write

N text deltas per response, one write per SSE event with chunked transfer encoding, as a
real server streams. A pause before each write (the second argument, in seconds) makes
each read of a slow client (one under valgrind) one event, as a model's pace does. It
runs in its own process, so its CPU never counts against the client whose CPU time W5
measures. `POST .../messages` gets the Anthropic format,
`POST .../responses` the OpenAI Responses one, `POST .../converse-stream` the Bedrock one
(one write per event-stream frame), `POST ...:streamGenerateContent?alt=sse` the Gemini
one, any other POST the Chat Completions one.
"""

from __future__ import annotations

import json
import sys
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def openai_events(n: int) -> list[bytes]:
    base = {
        "id": "chatcmpl-AbCdEf0123456789",
        "object": "chat.completion.chunk",
        "created": 1727346143,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_b40fb1c6fb",
    }

    def choice(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    chunks: list[dict[str, object]] = [
        dict(base, choices=[choice({"role": "assistant", "content": "", "refusal": None})])
    ]
    chunks += [dict(base, choices=[choice({"content": f" word{i % 97}"})]) for i in range(n)]
    chunks.append(dict(base, choices=[choice({}, "stop")]))
    chunks.append(
        dict(base, choices=[], usage={
            "prompt_tokens": 17, "completion_tokens": n, "total_tokens": n + 17,
        })
    )
    events = [b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n" for c in chunks]
    return [*events, b"data: [DONE]\n\n"]


def anthropic_events(n: int) -> list[bytes]:
    evs: list[tuple[str, dict[str, object]]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
            "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": 25, "output_tokens": 1},
        }}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
    ]
    evs += [
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": f" word{i % 97}"}})
        for i in range(n)
    ]
    evs += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": n}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return [
        f"event: {e}\ndata: {json.dumps(d, separators=(',', ':'))}\n\n".encode() for e, d in evs
    ]


def aws_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream frame (string headers only), written from the format's
    description: a prelude (total and headers lengths, its CRC32), the headers, the
    payload, and a CRC32 of all before it (tests/providers/test_bedrock.py checks it
    against recorded frames byte for byte)."""
    head = b"".join(
        bytes([len(k)]) + k.encode() + b"\x07" + len(v.encode()).to_bytes(2, "big") + v.encode()
        for k, v in headers.items()
    )
    prelude = (16 + len(head) + len(payload)).to_bytes(4, "big") + len(head).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    body = prelude + head + payload
    return body + zlib.crc32(body).to_bytes(4, "big")


def aws_event(kind: str, payload: dict[str, object]) -> bytes:
    return aws_frame({":event-type": kind, ":content-type": "application/json",
                      ":message-type": "event"}, json.dumps(payload).encode())


def bedrock_events(n: int) -> list[bytes]:
    # As Bedrock sends them: each payload padded with a "p" field.
    pad = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
    return [
        aws_event("messageStart", {"p": pad[:20], "role": "assistant"}),
        *(aws_event("contentBlockDelta", {"contentBlockIndex": 0,
                                          "delta": {"text": f" word{i % 97}"},
                                          "p": pad[: 5 + i % 30]})
          for i in range(n)),
        aws_event("contentBlockStop", {"contentBlockIndex": 0, "p": pad[:10]}),
        aws_event("messageStop", {"p": pad[:12], "stopReason": "end_turn"}),
        aws_event("metadata", {"metrics": {"latencyMs": 512}, "p": pad[:8], "usage": {
            "inputTokens": 17, "outputTokens": n, "totalTokens": n + 17}}),
    ]


def responses_events(n: int) -> list[bytes]:
    """The OpenAI Responses stream of one message of N text deltas."""
    head = {"id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b", "object": "response",
            "created_at": 1741476542, "model": "gpt-4o-2024-08-06", "output": [],
            "error": None, "incomplete_details": None, "text": {"format": {"type": "text"}}}
    msg = {"id": "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b", "type": "message",
           "role": "assistant"}
    evs: list[dict[str, object]] = [
        {"type": "response.created", "response": dict(head, status="in_progress", usage=None)},
        {"type": "response.in_progress", "response": dict(head, status="in_progress")},
        {"type": "response.output_item.added", "output_index": 0,
         "item": dict(msg, status="in_progress", content=[])},
        {"type": "response.content_part.added", "item_id": msg["id"], "output_index": 0,
         "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}},
    ]
    evs += [
        {"type": "response.output_text.delta", "item_id": msg["id"], "output_index": 0,
         "content_index": 0, "delta": f" word{i % 97}", "logprobs": []}
        for i in range(n)
    ]
    text = "".join(f" word{i % 97}" for i in range(n))
    part = {"type": "output_text", "text": text, "annotations": []}
    evs += [
        {"type": "response.output_text.done", "item_id": msg["id"], "output_index": 0,
         "content_index": 0, "text": text},
        {"type": "response.content_part.done", "item_id": msg["id"], "output_index": 0,
         "content_index": 0, "part": part},
        {"type": "response.output_item.done", "output_index": 0,
         "item": dict(msg, status="completed", content=[part])},
        {"type": "response.completed", "response": dict(
            head, status="completed", output=[dict(msg, status="completed", content=[part])],
            usage={"input_tokens": 17, "input_tokens_details": {"cached_tokens": 0},
                   "output_tokens": n, "output_tokens_details": {"reasoning_tokens": 0},
                   "total_tokens": n + 17})},
    ]
    return [
        f"event: {e['type']}\ndata: {json.dumps(dict(e, sequence_number=i), separators=(',', ':'))}"
        f"\n\n".encode() for i, e in enumerate(evs)
    ]


def gemini_events(n: int) -> list[bytes]:
    """Gemini's stream: each data frame a whole GenerateContentResponse, CRLF framed."""
    head = {"modelVersion": "gemini-2.5-flash", "responseId": "w1peaMz6INOvnvgPgYfPiQY"}

    def frame(i: int, text: str, finish: str | None = None) -> dict[str, object]:
        cand: dict[str, object] = {"content": {"parts": [{"text": text}], "role": "model"},
                                   "index": 0}
        if finish is not None:
            cand["finishReason"] = finish
        usage = {"promptTokenCount": 17, "candidatesTokenCount": i, "totalTokenCount": 17 + i,
                 "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 17}]}
        return {"candidates": [cand], "usageMetadata": usage, **head}

    frames = [frame(i + 1, f" word{i % 97}") for i in range(n)]
    frames.append(frame(n, "", "STOP"))
    return [b"data: " + json.dumps(f, separators=(",", ":")).encode() + b"\r\n\r\n"
            for f in frames]


FORMATS = (("openai", openai_events), ("anthropic", anthropic_events),
           ("responses", responses_events), ("bedrock", bedrock_events),
           ("gemini", gemini_events))
CONTENT_TYPES = {"openai": "text/event-stream", "anthropic": "text/event-stream",
                 "responses": "text/event-stream", "bedrock": "application/vnd.amazon.eventstream",
                 "gemini": "text/event-stream"}


def serve(n: int, pause: float = 0.0) -> None:
    frames = {
        kind: [b"%x\r\n%s\r\n" % (len(e), e) for e in events(n)] + [b"0\r\n\r\n"]
        for kind, events in FORMATS
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            last = self.path.rsplit("/", 1)[-1]
            kind = "gemini" if ":streamGenerateContent" in last else {
                "messages": "anthropic", "responses": "responses",
                "converse-stream": "bedrock"}.get(last, "openai")
            self.send_response(200)
            self.send_header("content-type", CONTENT_TYPES[kind])
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for frame in frames[kind]:
                if pause:
                    self.wfile.flush()
                    time.sleep(pause)
                self.wfile.write(frame)
            self.wfile.flush()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
