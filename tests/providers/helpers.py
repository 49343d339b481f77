"""Running a provider against the replay server, sync and async, and collecting outcomes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio.to_thread

from bench.wire_server import aws_event, aws_frame
from interpreters.providers import (
    AsyncHttpProvider,
    HttpProvider,
    Limits,
    Timeouts,
    resolve_async_provider,
    resolve_provider,
)
from interpreters.providers.provider import ProviderError
from pipeline.values.chunks import ModelEvent, ModelFinish, ReasoningDelta, TextDelta
from pipeline.values.messages import user
from pipeline.values.model import ApiError, ModelRequest

KEY = "sk-test-0123456789abcdefSECRET"


@dataclass(frozen=True)
class Outcome:
    events: list[ModelEvent]
    error: ApiError | None

    @property
    def text(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, TextDelta))

    @property
    def reasoning(self) -> str:
        return "".join(e.text for e in self.events if isinstance(e, ReasoningDelta))

    @property
    def finished(self) -> bool:
        return any(isinstance(e, ModelFinish) for e in self.events)


def ask(route: str = "openai", text: str = "hi") -> ModelRequest:
    return ModelRequest(model=f"{route}/m", system=(), messages=(user(text, id="u1"),))


def run_sync(p: HttpProvider, request: ModelRequest) -> Outcome:
    events: list[ModelEvent] = []
    with p:
        try:
            for e in p.stream(request):  # not extend(): it drops the items of a failed run
                events.append(e)
        except ProviderError as e:
            return Outcome(events, e.error)
    return Outcome(events, None)


async def run_async(p: AsyncHttpProvider, request: ModelRequest) -> Outcome:
    events: list[ModelEvent] = []
    async with p:
        try:
            async for e in p.astream(request):
                events.append(e)
        except ProviderError as err:
            return Outcome(events, err.error)
    return Outcome(events, None)


async def both(
    url: str,
    route: str = "openai",
    *,
    request: ModelRequest | None = None,
    timeouts: Timeouts | None = None,
    stream: bool = True,
    clock: Callable[[], float] | None = None,
    limits: Limits | None = None,
) -> tuple[Outcome, Outcome]:
    """The same call through the sync provider (in a worker thread) and the async one.
    Queue the server's replies once per path."""
    req = request or ask(route)
    clk = clock or time.time
    base = url + "/v1"

    def sync_call() -> Outcome:
        p = resolve_provider(
            req.model, base_url=base, api_key=KEY, stream=stream, timeouts=timeouts, clock=clk,
            limits=limits,
        )
        return run_sync(p, req)

    sync = await anyio.to_thread.run_sync(sync_call)
    p = resolve_async_provider(
        req.model, base_url=base, api_key=KEY, stream=stream, timeouts=timeouts, clock=clk,
        limits=limits,
    )
    return sync, await run_async(p, req)


def sse(*frames: str | dict[str, object], event: str | None = None) -> bytes:
    """SSE bytes: dicts become `data:` JSON frames (with `event: <type>` for Anthropic
    payloads), strings are sent as they are."""
    out = []
    for f in frames:
        if isinstance(f, str):
            out.append(f)
        else:
            kind = f.get("type")
            head = f"event: {kind}\n" if isinstance(kind, str) and event is None else ""
            out.append(f"{head}data: {json.dumps(f)}\n\n")
    return "".join(out).encode()


def oa_chunk(delta: dict[str, object] | None = None, finish: str | None = None,
             usage: dict[str, int] | None = None) -> dict[str, object]:
    """One Chat Completions stream chunk."""
    choices = [] if delta is None and finish is None else [
        {"index": 0, "delta": delta or {}, "finish_reason": finish}]
    chunk: dict[str, object] = {"id": "chatcmpl-1", "model": "m", "choices": choices}
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def oa_text_stream(*pieces: str, finish: str = "stop") -> bytes:
    return sse(
        *(oa_chunk({"content": p}) for p in pieces),
        oa_chunk(finish=finish),
        oa_chunk(usage={"prompt_tokens": 3, "completion_tokens": len(pieces)}),
        "data: [DONE]\n\n",
    )


def an_text_stream(*pieces: str) -> bytes:
    """An Anthropic Messages stream of one text block."""
    return sse(
        {"type": "message_start", "message": {"id": "msg_1", "model": "m",
                                              "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        *({"type": "content_block_delta", "index": 0,
           "delta": {"type": "text_delta", "text": p}} for p in pieces),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": len(pieces)}},
        {"type": "message_stop"},
    )



def rs_response(status: str = "completed", **extra: object) -> dict[str, object]:
    """An OpenAI Responses response object (7 input tokens, 3 cached; 5 out, 2 reasoning)."""
    return {"id": "resp_1", "model": "gpt-5", "status": status, "usage": {
        "input_tokens": 7, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 3},
        "output_tokens_details": {"reasoning_tokens": 2}}, **extra}


def rs_text_stream(*pieces: str, end: str = "response.completed") -> bytes:
    """An OpenAI Responses stream of one message with one text part."""
    return sse(
        {"type": "response.created", "response": rs_response("in_progress", usage=None)},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}},
        *({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0,
           "content_index": 0, "delta": p} for p in pieces),
        {"type": "response.output_item.done", "output_index": 0,
         "item": {"type": "message", "id": "msg_1", "content": [
             {"type": "output_text", "text": "".join(pieces)}]}},
        {"type": end, "response": rs_response(
            "completed" if end == "response.completed" else "incomplete")},
    )


def aws_exception(kind: str, message: str) -> bytes:
    return aws_frame({":exception-type": kind, ":content-type": "application/json",
                      ":message-type": "exception"}, json.dumps({"message": message}).encode())


def br_text_stream(*pieces: str, stop: str = "end_turn", usage: tuple[int, int] = (5, 2)) -> bytes:
    """A converse-stream body: text deltas, then messageStop and metadata."""
    return b"".join((
        aws_event("messageStart", {"role": "assistant"}),
        *(aws_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": p}})
          for p in pieces),
        aws_event("contentBlockStop", {"contentBlockIndex": 0}),
        aws_event("messageStop", {"stopReason": stop}),
        aws_event("metadata", {"usage": {"inputTokens": usage[0], "outputTokens": usage[1]},
                               "metrics": {"latencyMs": 1}}),
    ))
