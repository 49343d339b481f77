"""The HTTP provider's batches (`astream_batches`): the events decoded from one read.

The async interpreter reads these (W5 in bench/); `astream` is the same events one by
one. Against the replay server on 127.0.0.1, asyncio and trio.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import anyio
import anyio.to_thread
import pytest

from interpreters.aio import AsyncInterpreter
from interpreters.providers import resolve_async_provider
from interpreters.providers._async.http import AsyncHttpProvider
from interpreters.providers.provider import ProviderError
from pipeline.agent import Agent
from pipeline.values.chunks import ModelEvent, ModelFinish, TextDelta
from pipeline.values.model import ModelRequest
from tests.faults.harness import SSE
from tests.providers.helpers import KEY, ask, oa_chunk, oa_text_stream, sse
from tests.providers.server import ReplayServer, Reply

pytestmark = pytest.mark.anyio


async def test_the_events_of_one_read_come_in_one_batch_and_astream_flattens_them(
    server: ReplayServer,
) -> None:
    body = oa_text_stream("Hel", "lo", " there")  # one HTTP chunk: (nearly) one read
    server.queue(Reply(200, SSE, body), Reply(200, SSE, body))
    p = resolve_async_provider("openai/m", base_url=server.url + "/v1", api_key=KEY)
    async with p:
        batches = [list(b) async for b in p.astream_batches(ask())]
        events = [e async for e in p.astream(ask())]
    flat: list[ModelEvent] = [e for b in batches for e in b]
    assert flat == events
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo", " there"]
    assert isinstance(events[-1], ModelFinish)
    assert all(batches)  # never an empty batch
    assert len(batches) < len(events)


async def test_events_of_one_read_are_batched_and_a_broken_stream_still_fails(
    server: ReplayServer,
) -> None:
    # Text, then a corrupt frame in the same read: the text comes first, then the error.
    body = oa_text_stream("Hel")
    body = body[: body.index(b"data: [DONE]")].replace(b'"stop"', b"null")
    body += b'data: {"choices": [{"delta": \n\n'
    server.queue(Reply(200, SSE, body))
    p = resolve_async_provider("openai/m", base_url=server.url + "/v1", api_key=KEY)
    got: list[ModelEvent] = []
    async with p:
        with pytest.raises(ProviderError) as raised:
            async for batch in p.astream_batches(ask()):
                got.extend(batch)
    assert [e.text for e in got if isinstance(e, TextDelta)] == ["Hel"]
    assert raised.value.error.error_type == "invalid_response"


@pytest.mark.parametrize("how", ["astream", "astream_batches"])
async def test_closing_either_stream_early_releases_the_connection(
    server: ReplayServer, how: str
) -> None:
    # An endless reply: only the client's close ends it.
    text = sse(oa_chunk({"content": "Hel"}))
    server.queue(Reply(200, SSE, text, forever=b": ping\n\n", pause=0.01))
    p = resolve_async_provider("openai/m", base_url=server.url + "/v1", api_key=KEY)
    async with p:
        stream = p.astream(ask()) if how == "astream" else p.astream_batches(ask())
        assert isinstance(stream, AsyncGenerator)
        with anyio.fail_after(10):
            await stream.__anext__()
        await stream.aclose()
        assert await anyio.to_thread.run_sync(server.wait_idle)


class _Redacting(AsyncHttpProvider):
    """A user's provider: the HTTP provider with its `astream` overridden (here, to redact
    a word before anything else sees it). It did not write `astream_batches`."""

    async def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        async for e in super().astream(request):
            yield TextDelta(e.id, e.text.replace("secret", "[x]")) if isinstance(
                e, TextDelta
            ) else e


async def test_a_subclass_that_overrides_astream_is_read_through_its_astream(
    server: ReplayServer,
) -> None:
    # The interpreter reads `astream_batches` only where it gives what `astream` gives:
    # not from a subclass that changed `astream` alone (its events would be bypassed).
    server.queue(Reply(200, SSE, oa_text_stream("the ", "secret", " word")))
    base = resolve_async_provider("openai/m", base_url=server.url + "/v1", api_key=KEY)
    p = _Redacting(base.endpoint, base.codec, limits=base.limits)
    async with p:
        result = await AsyncInterpreter(p, observers=()).run(Agent(model="openai/m"), "hi")
    assert result.status == "finished"
    assert result.text == "the [x] word"


class _Logged:
    """A user's proxy: its own `astream` (logging what passes), everything else from the
    provider it wraps (`__getattr__`), `astream_batches` included."""

    def __init__(self, inner: AsyncHttpProvider) -> None:
        self.inner = inner
        self.seen: list[ModelEvent] = []

    async def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        async for e in self.inner.astream(request):
            self.seen.append(e)
            yield e

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


async def test_a_proxy_that_hands_out_its_inner_batches_is_read_through_its_astream(
    server: ReplayServer,
) -> None:
    server.queue(Reply(200, SSE, oa_text_stream("the ", "word")))
    p = resolve_async_provider("openai/m", base_url=server.url + "/v1", api_key=KEY)
    logged = _Logged(p)
    async with p:
        result = await AsyncInterpreter(logged, observers=()).run(Agent(model="openai/m"), "hi")
    assert result.text == "the word"
    assert [e.text for e in logged.seen if isinstance(e, TextDelta)] == ["the ", "word"]
