"""Running one agent over HTTP against the replay server, sync and async, and checking
what every fault must leave behind.

The agent calls a tool in its first step (a recorded-style tool call), so the fault hits
the second model call of a run whose history already holds a call and its result: the
checks then see that the messages so far are intact and paired, whatever broke.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import anyio
import anyio.lowlevel
import msgspec

from effects import Publish, Pull
from interpreters.aio import AsyncInterpreter
from interpreters.core.cancel import CancelSignal
from interpreters.observers.observe import Observer, RunInfo, RunObserver
from interpreters.providers import AsyncResolver, Limits, Resolver, Timeouts
from interpreters.sync import SyncInterpreter
from pipeline.agent import Agent
from pipeline.tools import tool
from pipeline.values.chunks import TextDelta
from pipeline.values.messages import TextPart, ToolCallPart, ToolResultPart
from pipeline.values.model import ApiError
from pipeline.values.pairing import is_paired
from pipeline.values.result import ApiFailed, RunResult, StreamFailed
from pipeline.values.retry import RetryPolicy
from tests.providers.helpers import KEY, oa_chunk, sse
from tests.providers.server import ReplayServer, Reply

SSE = (("content-type", "text/event-stream"),)
JSON = (("content-type", "application/json"),)
FAST = Timeouts(connect=2.0, read=2.0, write=2.0, pool=2.0, total=5.0)
PROMPT = "What is the capital of the UK?"


@tool
def get_capital(country: str) -> str:
    """The capital of a country."""
    return {"UK": "London"}.get(country, "unknown")


def tool_call_reply(route: str = "openai") -> Reply:
    """Step 1: the model asks for the tool."""
    if route == "anthropic":
        return Reply(200, SSE, sse(
            {"type": "message_start", "message": {"id": "msg_0", "model": "m"}},
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "tool_use", "id": "call_1", "name": "get_capital",
                               "input": {}}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "input_json_delta", "partial_json": '{"country": "UK"}'}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
             "usage": {"output_tokens": 9}},
            {"type": "message_stop"},
        ))
    return Reply(200, SSE, sse(
        oa_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                  "function": {"name": "get_capital",
                                               "arguments": '{"country": "UK"}'}}]}),
        oa_chunk(finish="tool_calls"),
        "data: [DONE]\n\n",
    ))


def agent(retries: int = 0, max_retry_after: float = 60.0, route: str = "openai") -> Agent:
    return Agent.create(
        f"{route}/m", tools=[get_capital],
        retry_policy=RetryPolicy(max_retries=retries, base_delay=0.01, max_delay=0.01,
                                 max_retry_after=max_retry_after),
    )


class TextSeen(Observer, RunObserver):
    """Calls `then()` once the run has handed out `text` (at the start of its text): a
    test acts at that point of a stream instead of after a guessed delay."""

    def __init__(self, text: str, then: Callable[[], object]) -> None:
        self._want = text
        self._then: Callable[[], object] | None = then
        self._text = ""

    def start(self, run: RunInfo) -> RunObserver:
        return self

    def command(self, cmd: object, at: float) -> None:
        if self._then is None:
            return
        if isinstance(cmd, Publish):
            chunks: tuple[object, ...] = cmd.chunks
        elif isinstance(cmd, Pull):  # (chunks handed out on the way to the next event)
            chunks = cmd.publish
        else:
            return
        self._text += "".join(c.text for c in chunks if isinstance(c, TextDelta))
        if self._text.startswith(self._want):
            then, self._then = self._then, None
            then()


@dataclass
class Ran:
    result: RunResult
    waits: list[float] = field(default_factory=list)
    requests: int = 0

    @property
    def api_error(self) -> ApiError:
        err = self.result.error
        assert isinstance(err, ApiFailed | StreamFailed), err
        assert err.error is not None
        return err.error


def _threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate()
            if not t.name.startswith(("replay-server", "AnyIO worker", "Trio thread"))}


def _queue(
    server: ReplayServer, replies: Sequence[Reply], first: bool, ag: Agent | None
) -> tuple[Agent, str]:
    """The agent (by default `agent()`) and its route; the server reset, with `replies`
    queued (after the tool-call reply, when `first`)."""
    ag = ag or agent()
    route = ag.model.partition("/")[0]
    server.reset()
    server.queue(*((tool_call_reply(route),) if first else ()), *replies)
    return ag, route


class _Routed(TypedDict):
    base_urls: dict[str, str]
    api_keys: dict[str, str]


def _to(server: ReplayServer, route: str, url: str | None, key: str) -> _Routed:
    """A resolver's route to the server (or `url`), with `key`."""
    return {"base_urls": {route: (url or server.url) + "/v1"}, "api_keys": {route: key}}


def run_sync(
    server: ReplayServer, *replies: Reply, first: bool = True, timeouts: Timeouts = FAST,
    limits: Limits | None = None, ag: Agent | None = None, url: str | None = None,
    timeout: float | None = None, key: str = KEY, signal: CancelSignal | None = None,
    observers: Sequence[Observer] | None = None,
) -> Ran:
    ag, route = _queue(server, replies, first, ag)
    before = _threads()
    waits: list[float] = []
    resolver = Resolver(**_to(server, route, url, key), timeouts=timeouts, limits=limits)
    try:
        result = SyncInterpreter(resolve=resolver, sleep=waits.append, observers=observers).run(
            ag, PROMPT, timeout=timeout, signal=signal)
    finally:
        resolver.close()
    assert _threads() <= before, [t.name for t in _threads() - before]
    assert server.wait_idle(), "a connection was left open"
    return Ran(result, waits, len(server.seen))


async def run_async(
    server: ReplayServer, *replies: Reply, first: bool = True, timeouts: Timeouts = FAST,
    limits: Limits | None = None, ag: Agent | None = None, url: str | None = None,
    timeout: float | None = None, key: str = KEY, signal: CancelSignal | None = None,
    observers: Sequence[Observer] | None = None,
) -> Ran:
    ag, route = _queue(server, replies, first, ag)
    tasks = len(anyio.get_running_tasks())
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    resolver = AsyncResolver(**_to(server, route, url, key), timeouts=timeouts, limits=limits)
    try:
        result = await AsyncInterpreter(resolve=resolver, sleep=sleep, observers=observers).run(
            ag, PROMPT, timeout=timeout, signal=signal)
    finally:
        await resolver.aclose()
    # trio finalizes an abandoned async generator in a brief task: let it run (a task left
    # over for good fails the cap)
    with anyio.fail_after(10):
        while len(anyio.get_running_tasks()) > tasks:
            await anyio.lowlevel.checkpoint()
    done = await anyio.to_thread.run_sync(server.wait_idle)
    assert done, "a connection was left open"
    return Ran(result, waits, len(server.seen))


async def both(
    server: ReplayServer, *replies: Reply, first: bool = True, timeouts: Timeouts = FAST,
    limits: Limits | None = None, ag: Agent | None = None, url: str | None = None,
    timeout: float | None = None, key: str = KEY,
) -> list[Ran]:
    """The same run through the sync interpreter (in a worker thread) and the async one."""

    def sync() -> Ran:
        return run_sync(server, *replies, first=first, timeouts=timeouts, limits=limits,
                        ag=ag, url=url, timeout=timeout, key=key)

    ran = await anyio.to_thread.run_sync(sync)
    return [ran, await run_async(server, *replies, first=first, timeouts=timeouts,
                                 limits=limits, ag=ag, url=url, timeout=timeout, key=key)]


Partial = str | Callable[[str], bool] | None
"""The text a broken step kept (incomplete): exactly this, or what passes this check."""


def intact(
    result: RunResult, *, first: bool = True, partial: Partial = None,
    status: str = "failed",
) -> None:
    """The messages so far: the prompt, the tool step (when it ran), paired; the broken
    step's text kept only as an incomplete message, never as a complete answer."""
    msgs = result.messages.all
    assert is_paired(msgs), [m.parts for m in msgs]
    assert msgs[0].role == "user" and msgs[0].parts == (TextPart(PROMPT),)
    if first:
        calls = [p for m in msgs for p in m.parts if isinstance(p, ToolCallPart)]
        results = [p for m in msgs for p in m.parts if isinstance(p, ToolResultPart)]
        assert [c.tool_call_id for c in calls] == ["call_1"]
        assert [r.result for r in results] == ["London"]
    last = msgs[-1]
    if partial is None:
        assert not any(m.incomplete for m in msgs)
        assert not (last.role == "assistant" and any(isinstance(p, TextPart) for p in last.parts))
    else:
        assert last.role == "assistant" and last.incomplete
        text = "".join(p.text for p in last.parts if isinstance(p, TextPart))
        assert text == partial if isinstance(partial, str) else partial(text), text
    assert result.status == status, (result.status, result.error)
    msgspec.json.encode(result)  # the run's record always encodes


def expect(
    runs: Sequence[Ran], error_type: str | None, *, partial: Partial = None,
    first: bool = True, stream: bool | None = None,
) -> None:
    """Every run failed with `error_type`, as ApiFailed (nothing streamed) or StreamFailed
    (something streamed: `partial`), with its messages intact and paired."""
    for ran in runs:
        intact(ran.result, first=first, partial=partial)
        if error_type is not None:
            assert ran.api_error.error_type == error_type, ran.result.error
        broke_mid_stream = partial is not None if stream is None else stream
        want = StreamFailed if broke_mid_stream else ApiFailed
        assert isinstance(ran.result.error, want), ran.result.error
