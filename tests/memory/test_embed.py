"""The embedders: OpenAI-compatible `/embeddings` against a loopback server and httpx's
MockTransport (batching, routes, retries, deadlines, caps, the key kept out of errors,
answers that do not fit as typed errors), and the scripted one."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import msgspec
import pytest

from interpreters.memory import HashEmbedder
from interpreters.memory.embed.openai import (
    LIMITS,
    RETRY,
    TIMEOUTS,
    AsyncOpenAIEmbedder,
    EmbeddingError,
    OpenAIEmbedder,
    ScriptedEmbedder,
)
from interpreters.providers.exchange import Timeouts
from interpreters.providers.limits import Limits
from interpreters.providers.provider import ProviderError
from interpreters.providers.routes import ProviderConfigError
from pipeline.values.model import ApiError
from pipeline.values.retry import RetryPolicy
from tests.providers.server import ReplayServer, Reply

KEY = "sk-test-abcdef0123456789"


def answer(vectors: list[list[float]], order: list[int] | None = None) -> bytes:
    order = order if order is not None else list(range(len(vectors)))
    data = [{"object": "embedding", "index": i, "embedding": vectors[i]} for i in order]
    return json.dumps({"object": "list", "data": data, "model": "m"}).encode()


def ok(body: bytes) -> Reply:
    return Reply(body=body, headers=[("content-type", "application/json")], chunked=False)


def vec(i: int) -> list[float]:
    return [float(i), 1.0, 0.5]


class Sleeps(list[float]):
    """The waits an embedder asked for (none really taken)."""


def embedder(
    server: ReplayServer,
    sleeps: Sleeps | None = None,
    *,
    batch_size: int = 128,
    dimensions: int | None = None,
    timeouts: Timeouts = TIMEOUTS,
    limits: Limits = LIMITS,
    retry: RetryPolicy = RETRY,
) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        "openai/text-embedding-3-small", base_url=server.url + "/v1", api_key=KEY,
        sleep=(sleeps if sleeps is not None else Sleeps()).append, batch_size=batch_size,
        dimensions=dimensions, timeouts=timeouts, limits=limits, retry=retry,
    )


def test_texts_are_sent_in_batches_and_come_back_in_order(server: ReplayServer) -> None:
    server.queue(ok(answer([vec(0), vec(1)], order=[1, 0])), ok(answer([vec(2), vec(3)])),
                 ok(answer([vec(4)])))
    with embedder(server, batch_size=2) as e:
        got = e.embed(("a", "b", "c", "d", "e"))
    assert got == tuple(tuple(vec(i)) for i in range(5))
    assert [s.path for s in server.seen] == ["/v1/embeddings"] * 3
    bodies = [json.loads(s.body) for s in server.seen]
    assert [b["input"] for b in bodies] == [["a", "b"], ["c", "d"], ["e"]]
    assert {b["model"] for b in bodies} == {"text-embedding-3-small"}
    assert {b["encoding_format"] for b in bodies} == {"float"}
    assert server.seen[0].headers["authorization"] == f"Bearer {KEY}"
    assert e.embed(()) == ()


def test_an_ollama_route_takes_its_base_url_from_the_environment_and_sends_no_key(
    server: ReplayServer,
) -> None:
    server.queue(ok(answer([vec(1)])))
    e = OpenAIEmbedder("ollama/nomic-embed-text",
                       env={"OLLAMA_BASE_URL": server.url + "/v1"}, dimensions=3)
    assert e.embed(("hello",)) == (tuple(vec(1)),)
    assert "authorization" not in server.seen[0].headers
    body = json.loads(server.seen[0].body)
    assert (body["model"], body["dimensions"]) == ("nomic-embed-text", 3)
    e.close()


def test_transient_failures_are_retried_with_the_servers_wait(server: ReplayServer) -> None:
    server.queue(Reply(status=429, headers=[("retry-after", "0.25")], body=b"{}"),
                 Reply(status=500, body=b"oops"), ok(answer([vec(7)])))
    sleeps = Sleeps()
    assert embedder(server, sleeps).embed(("x",)) == (tuple(vec(7)),)
    assert len(server.seen) == 3
    assert sleeps[0] == 0.25
    assert len(sleeps) == 2


def test_retries_are_bounded(server: ReplayServer) -> None:
    server.queue(*[Reply(status=503, body=b"busy")] * 3)
    e = embedder(server, retry=RetryPolicy(max_retries=2))
    with pytest.raises(EmbeddingError) as info:
        e.embed(("x",))
    assert (info.value.error.status, info.value.error.retryable) == (503, True)
    assert len(server.seen) == 3


def test_a_rejection_is_not_retried_and_never_shows_the_key(server: ReplayServer) -> None:
    echo = json.dumps({"error": {"message": f"bad key {KEY}", "type": "invalid_request_error"}})
    server.queue(Reply(status=401, body=echo.encode()))
    e = embedder(server)
    with pytest.raises(EmbeddingError) as info:
        e.embed(("x",))
    assert info.value.error.status == 401
    assert not info.value.error.retryable
    assert KEY not in str(info.value) and KEY not in (info.value.error.body or "")
    assert "[redacted]" in info.value.error.message
    assert len(server.seen) == 1
    assert isinstance(info.value, ProviderError)
    assert KEY not in repr(e)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (answer([vec(0)]), "1 embeddings for 2 texts"),
        (answer([vec(0), [1.0, 2.0]]), "2 dimensions where 3"),
        (json.dumps({"data": [{"index": 0, "embedding": ["a", 1, 2]},
                              {"index": 1, "embedding": vec(1)}]}).encode(), "not an embeddings"),
        (json.dumps({"data": [{"index": 0, "embedding": vec(0)},
                              {"index": 0, "embedding": vec(1)}]}).encode(), "indexes"),
        (answer([[], []]), "0 dimensions"),
        (b"<html>proxy</html>", "not an embeddings"),
        (b'{"data": [{"index": 0, "embedding": [1e400, 0, 0]}, '
         b'{"index": 1, "embedding": [1, 2, 3]}]}', "out of range"),
    ],
)
def test_an_answer_that_does_not_fit_is_a_typed_error(
    server: ReplayServer, body: bytes, why: str
) -> None:
    server.queue(ok(body))
    with pytest.raises(EmbeddingError, match=why) as info:
        embedder(server).embed(("a", "b"))
    assert info.value.error.error_type == "invalid_response"
    assert len(server.seen) == 1  # not retried: the same question gets the same answer


def test_batches_must_agree_on_their_dimensions(server: ReplayServer) -> None:
    server.queue(ok(answer([vec(0)])), ok(answer([[1.0, 2.0]])))
    with pytest.raises(EmbeddingError, match="2 dimensions where 3"):
        embedder(server, batch_size=1).embed(("a", "b"))
    server.reset()
    server.queue(ok(answer([vec(0)])))
    with pytest.raises(EmbeddingError, match="3 dimensions where 8"):
        embedder(server, dimensions=8).embed(("a",))


def test_an_answer_over_its_cap_ends_the_call(server: ReplayServer) -> None:
    server.queue(ok(answer([[0.5] * 200])))
    with pytest.raises(EmbeddingError, match="cap") as info:
        embedder(server, limits=Limits(max_body=500)).embed(("a",))
    assert info.value.error.error_type == "limit_exceeded"


def test_a_server_that_does_not_answer_in_time_meets_the_deadline(server: ReplayServer) -> None:
    server.queue(Reply(hang=5.0), Reply(hang=5.0))
    e = embedder(server, timeouts=Timeouts(total=0.5))
    with pytest.raises(EmbeddingError) as info:
        e.embed(("a",))
    assert info.value.error.error_type == "deadline_exceeded"


def test_options_are_checked_when_the_embedder_is_made() -> None:
    with pytest.raises(ProviderConfigError, match="embeddings"):
        OpenAIEmbedder("anthropic/claude", api_key=KEY)
    with pytest.raises(ProviderConfigError, match="OPENAI_API_KEY"):
        OpenAIEmbedder("openai/text-embedding-3-small", env={})
    with pytest.raises(ValueError, match="batch_size"):
        OpenAIEmbedder("ollama/x", batch_size=0)
    with pytest.raises(ValueError, match="dimensions"):
        OpenAIEmbedder("ollama/x", dimensions=0)
    with pytest.raises(TypeError):
        OpenAIEmbedder("ollama/x").embed((1,))  # type: ignore[arg-type]


def mock(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


@pytest.mark.anyio
async def test_the_async_embedder_batches_retries_and_checks_the_same() -> None:
    seen: list[list[str]] = []
    fails = [httpx.Response(529, json={"error": {"message": "overloaded"}})]

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body["input"])
        if fails:
            return fails.pop()
        return httpx.Response(200, json={"data": [
            {"index": i, "embedding": [float(len(t)), 1.0]} for i, t in enumerate(body["input"])
        ]})

    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with AsyncOpenAIEmbedder("vllm/bge", env={"VLLM_BASE_URL": "http://vllm.test/v1"},
                                   batch_size=2, client=mock(handler), sleep=sleep) as e:
        got = await e.embed(("a", "bb", "ccc"))
    assert got == ((1.0, 1.0), (2.0, 1.0), (3.0, 1.0))
    assert seen == [["a", "bb"], ["a", "bb"], ["ccc"]]
    assert len(waits) == 1

    def wrong(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0]}]})

    e2 = AsyncOpenAIEmbedder("ollama/x", client=mock(wrong))
    with pytest.raises(EmbeddingError, match="1 embeddings for 2 texts"):
        await e2.embed(("a", "b"))


@pytest.mark.anyio
async def test_the_async_embedder_meets_its_deadline(server: ReplayServer) -> None:
    server.queue(Reply(hang=5.0), Reply(hang=5.0))
    e = AsyncOpenAIEmbedder("ollama/x", base_url=server.url + "/v1",
                            timeouts=Timeouts(total=0.5))
    with pytest.raises(EmbeddingError) as info:
        await e.embed(("a",))
    assert info.value.error.error_type == "deadline_exceeded"
    await e.aclose()


def test_the_scripted_embedder_gives_its_vectors_else_the_hash_embedders() -> None:
    s = ScriptedEmbedder({"tea": (1.0, 0.0, 0.0), "coffee": (0.0, 1.0, 0.0)})
    got = s.embed(("coffee", "something else", "tea"))
    assert got[0] == (0.0, 1.0, 0.0) and got[2] == (1.0, 0.0, 0.0)
    assert got[1] == HashEmbedder(3).embed(("something else",))[0]
    assert s.calls == [("coffee", "something else", "tea")]
    strict = ScriptedEmbedder({"tea": (1.0,)}, fallback=None)
    with pytest.raises(EmbeddingError, match="no scripted vector"):
        strict.embed(("milk",))
    with pytest.raises(ValueError):
        ScriptedEmbedder({"a": (1.0,), "b": (1.0, 2.0)})


@pytest.mark.anyio
async def test_the_scripted_embedder_fails_as_scripted_then_answers() -> None:
    down = EmbeddingError(ApiError(status=503, message="down", retryable=True))
    s = ScriptedEmbedder(errors=[down])
    a = s.as_async()
    with pytest.raises(EmbeddingError, match="down"):
        await a.embed(("x",))
    (v,) = await a.embed(("x",))
    assert len(v) == 64
    assert len(s.calls) == 2
    assert msgspec.json.encode(v)  # plain floats


def refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("refused", request=request)


def test_a_connection_failure_carries_neither_the_httpx_error_nor_the_key() -> None:
    e = OpenAIEmbedder("openai/text-embedding-3-small", api_key=KEY,
                       client=httpx.Client(transport=httpx.MockTransport(refused)),
                       retry=RetryPolicy(max_retries=1), sleep=lambda s: None)
    with pytest.raises(EmbeddingError) as info:
        e.embed(("a",))
    assert info.value.error.error_type == "connection_error"
    assert info.value.__context__ is None and info.value.__cause__ is None
    assert KEY not in repr(info.value.error)


@pytest.mark.anyio
async def test_the_async_embedder_fails_the_same_without_the_httpx_error() -> None:
    async def no_wait(seconds: float) -> None:
        return None

    e = AsyncOpenAIEmbedder("openai/text-embedding-3-small", api_key=KEY,
                            client=mock(refused), retry=RetryPolicy(max_retries=1),
                            sleep=no_wait)
    with pytest.raises(EmbeddingError) as info:
        await e.embed(("a",))
    assert info.value.error.error_type == "connection_error"
    assert info.value.__context__ is None and info.value.__cause__ is None

