"""The providers over the HTTP test doubles users write their tests with: httpx's
`MockTransport` and respx, sync and async, an event stream and a JSON body, a body given
whole (`content=b"..."`, which httpx reads before the client sees it) and one streamed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import respx

from interpreters.aio import AsyncInterpreter
from interpreters.providers import AsyncResolver, Resolver, resolve_async_provider, resolve_provider
from interpreters.providers._sync import bounded as sync_bounded
from interpreters.sync import SyncInterpreter
from pipeline.agent import Agent
from tests.providers.helpers import KEY, Outcome, ask, oa_text_stream, run_async, run_sync
from tests.providers.server import ReplayServer, Reply

BASE = "https://api.example.test/v1"
SSE = oa_text_stream("Hel", "lo")
JSON_BODY = json.dumps({
    "id": "chatcmpl-1", "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "Hello"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2},
}).encode()


def _body(stream: bool) -> tuple[bytes, str]:
    return (SSE, "text/event-stream") if stream else (JSON_BODY, "application/json")


def _pieces(data: bytes) -> Iterator[bytes]:
    for i in range(0, len(data), 7):
        yield data[i:i + 7]


async def _apieces(data: bytes) -> AsyncIterator[bytes]:
    for piece in _pieces(data):
        yield piece


def _check(out: Outcome) -> None:
    assert out.error is None, out.error
    assert out.text == "Hello"
    assert out.finished


def _sync_call(client: httpx.Client, stream: bool) -> Outcome:
    p = resolve_provider("openai/m", base_url=BASE, api_key=KEY, stream=stream, client=client)
    try:
        return run_sync(p, ask())
    finally:
        client.close()


async def _async_call(client: httpx.AsyncClient, stream: bool) -> Outcome:
    p = resolve_async_provider(
        "openai/m", base_url=BASE, api_key=KEY, stream=stream, client=client)
    try:
        return await run_async(p, ask())
    finally:
        await client.aclose()


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("whole", [True, False])
def test_sync_provider_over_mock_transport(stream: bool, whole: bool) -> None:
    data, kind = _body(stream)
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        content = data if whole else _pieces(data)
        return httpx.Response(200, content=content, headers={"content-type": kind})

    _check(_sync_call(httpx.Client(transport=httpx.MockTransport(handler)), stream))
    assert [str(r.url) for r in seen] == [BASE + "/chat/completions"]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("whole", [True, False])
async def test_async_provider_over_mock_transport(
    stream: bool, whole: bool, anyio_backend: str
) -> None:
    data, kind = _body(stream)

    def handler(request: httpx.Request) -> httpx.Response:
        content = data if whole else _apieces(data)
        return httpx.Response(200, content=content, headers={"content-type": kind})

    _check(await _async_call(httpx.AsyncClient(transport=httpx.MockTransport(handler)), stream))


def test_mock_transport_error_status_reaches_the_caller_as_an_api_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": "bad key", "type": "auth"}})

    out = _sync_call(httpx.Client(transport=httpx.MockTransport(handler)), True)
    assert out.error is not None
    assert out.error.status == 401
    assert "bad key" in out.error.message


@pytest.mark.parametrize("stream", [True, False])
def test_sync_provider_under_respx(stream: bool) -> None:
    data, kind = _body(stream)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(BASE + "/chat/completions").mock(
            return_value=httpx.Response(200, content=data, headers={"content-type": kind}))
        _check(_sync_call(httpx.Client(), stream))
    assert route.call_count == 1
    assert route.calls.last.request.headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("stream", [True, False])
def test_sync_provider_over_respx_transport(stream: bool) -> None:
    data, kind = _body(stream)
    router = respx.Router(assert_all_called=True)
    router.post(BASE + "/chat/completions").mock(
        return_value=httpx.Response(200, content=data, headers={"content-type": kind}))
    _check(_sync_call(httpx.Client(transport=httpx.MockTransport(router.handler)), stream))


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_async_provider_under_respx(stream: bool, anyio_backend: str) -> None:
    data, kind = _body(stream)
    with respx.mock(assert_all_called=True) as mock:
        mock.post(BASE + "/chat/completions").mock(
            return_value=httpx.Response(200, content=data, headers={"content-type": kind}))
        _check(await _async_call(httpx.AsyncClient(), stream))


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False])
async def test_async_provider_over_respx_transport(stream: bool, anyio_backend: str) -> None:
    data, kind = _body(stream)
    router = respx.Router(assert_all_called=True)
    router.post(BASE + "/chat/completions").mock(
        return_value=httpx.Response(200, content=data, headers={"content-type": kind}))
    _check(await _async_call(
        httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler)), stream))


def test_a_real_transport_keeps_the_direct_read_of_its_stream(server: ReplayServer) -> None:
    """Over a real connection the body is read from `response.stream` itself (W5's fast
    path), not through httpx's `iter_raw`; a body httpx read already comes from memory."""
    server.queue(Reply(200, (("content-type", "text/event-stream"),), SSE))
    url = server.url + "/v1/chat/completions"
    with httpx.Client() as client, client.stream("POST", url) as resp:
        chunks = sync_bounded.raw(resp)
        assert getattr(chunks, "gi_code", None) is not httpx.Response.iter_raw.__code__
        assert b"".join(chunks) == SSE

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=SSE)

    mock = httpx.Client(transport=httpx.MockTransport(handler))
    with mock, mock.stream("POST", BASE + "/chat/completions") as resp:
        assert b"".join(sync_bounded.raw(resp)) == SSE


def _agent() -> Agent:
    return Agent.create("openai/gpt-4o-mini")


def test_sync_interpreter_over_a_resolver_given_a_mock_transport_client() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=SSE, headers={"content-type": "text/event-stream"})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    resolver = Resolver(api_keys={"openai": KEY}, client=client)
    result = SyncInterpreter(resolve=resolver).run(_agent(), "hi")
    resolver.close()
    assert result.status == "finished", result.error
    assert result.text == "Hello"
    assert not client.is_closed  # a client given is the caller's to close
    client.close()


@pytest.mark.anyio
async def test_async_interpreter_over_a_resolver_given_a_mock_transport_client(
    anyio_backend: str,
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=SSE, headers={"content-type": "text/event-stream"})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    resolver = AsyncResolver(api_keys={"openai": KEY}, client=client)
    result = await AsyncInterpreter(resolve=resolver).run(_agent(), "hi")
    await resolver.aclose()
    assert result.status == "finished", result.error
    assert result.text == "Hello"
    assert not client.is_closed
    await client.aclose()


def test_a_resolver_refuses_a_client_of_the_other_kind_when_built() -> None:
    with httpx.Client() as sync_client, pytest.raises(
        TypeError, match=r"must be an httpx\.AsyncClient"
    ):
        AsyncResolver(client=sync_client)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"must be an httpx\.Client"):
        Resolver(client="http://localhost")  # type: ignore[arg-type]
