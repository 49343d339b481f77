"""The contract every HTTP embedder keeps (OpenAI-compatible, Gemini, Bedrock): the same
bounds and the same typed errors for the same answer of the server. A redirect is a
failure (nothing follows it), an error body is read up to `Limits.max_error_body` and
classified, a success body over `Limits.max_body` is `limit_exceeded`, a body still
coming at `Timeouts.total` is `deadline_exceeded`, a body that is not embeddings is
`invalid_response`; every failure an `EmbeddingError`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from interpreters.memory.embed import (
    AsyncOpenAIEmbedder,
    BedrockEmbedder,
    EmbeddingError,
    GeminiEmbedder,
    OpenAIEmbedder,
)
from interpreters.providers.exchange import Timeouts
from interpreters.providers.limits import Limits
from interpreters.providers.owned_client import OwnedClient
from pipeline.values.retry import RetryPolicy
from tests.providers.server import ReplayServer, Reply

Handler = Callable[[httpx.Request], httpx.Response]
Make = Callable[[httpx.Client, Timeouts, Limits], OwnedClient]

BEDROCK_ENV = {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
               "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}


def _openai(client: httpx.Client, timeouts: Timeouts, limits: Limits) -> OwnedClient:
    return OpenAIEmbedder("openai/text-embedding-3-small", api_key="sk-contract",
                          client=client, timeouts=timeouts, limits=limits,
                          retry=RetryPolicy(max_retries=0))


def _gemini(client: httpx.Client, timeouts: Timeouts, limits: Limits) -> OwnedClient:
    return GeminiEmbedder(env={"GEMINI_API_KEY": "gm-contract"}, client=client,
                          timeouts=timeouts, limits=limits)


def _bedrock(client: httpx.Client, timeouts: Timeouts, limits: Limits) -> OwnedClient:
    pytest.importorskip("botocore", reason="the Bedrock route needs botocore")
    return BedrockEmbedder(env=BEDROCK_ENV, client=client, timeouts=timeouts, limits=limits)


EMBEDDERS = pytest.mark.parametrize("make", [_openai, _gemini, _bedrock],
                                    ids=["openai", "gemini", "bedrock"])


def _failure(make: Make, handler: Handler, *, timeouts: Timeouts | None = None,
             limits: Limits | None = None) -> EmbeddingError:
    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        embedder = make(client, timeouts or Timeouts(), limits or Limits())
        with pytest.raises(EmbeddingError) as caught:
            embedder.embed(("a text",))  # type: ignore[attr-defined]
    return caught.value


@EMBEDDERS
def test_a_redirect_is_a_failure_not_followed(make: Make) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(302, headers={"location": "http://elsewhere.test/"},
                              content=b"{}")

    e = _failure(make, handler).error
    assert e.status == 302 and not e.retryable
    assert len(seen) == 1


@EMBEDDERS
def test_a_client_error_is_classified_and_not_retryable(make: Make) -> None:
    body = b'{"error": {"message": "bad input", "type": "invalid_request_error"}}'
    e = _failure(make, lambda _: httpx.Response(400, content=body)).error
    assert e.status == 400 and not e.retryable
    assert "bad input" in e.message


@EMBEDDERS
def test_a_server_error_is_classified_and_retryable(make: Make) -> None:
    e = _failure(make, lambda _: httpx.Response(503, content=b"overloaded")).error
    assert e.status == 503 and e.retryable


@EMBEDDERS
def test_a_success_body_over_its_cap_is_limit_exceeded(make: Make) -> None:
    e = _failure(make, lambda _: httpx.Response(200, content=b" " * 5000),
                 limits=Limits(max_body=1000)).error
    assert e.status == 200 and e.error_type == "limit_exceeded" and not e.retryable


@EMBEDDERS
def test_an_error_body_is_read_up_to_its_own_cap(make: Make) -> None:
    # The error body's cap, not the success body's: a long error page is still the
    # server's error, cut to its cap.
    e = _failure(make, lambda _: httpx.Response(400, content=b"x" * 5000),
                 limits=Limits(max_error_body=100, max_body=1000)).error
    assert e.status == 400 and e.error_type != "limit_exceeded" and not e.retryable
    assert e.body is not None and len(e.body) <= 100


@EMBEDDERS
def test_a_body_still_coming_at_the_deadline_is_deadline_exceeded(make: Make) -> None:
    def slow() -> Iterator[bytes]:
        yield b'{"data": ['
        time.sleep(0.3)
        yield b"]}"

    e = _failure(make, lambda _: httpx.Response(200, content=slow()),
                 timeouts=Timeouts(total=0.1)).error
    assert e.error_type == "deadline_exceeded" and not e.retryable


@EMBEDDERS
def test_a_body_that_is_not_embeddings_is_invalid_response(make: Make) -> None:
    e = _failure(make, lambda _: httpx.Response(200, content=b'{"nothing": true')).error
    assert e.status == 200 and e.error_type == "invalid_response" and not e.retryable


# --- the same over a real loopback server: sockets, chunked bodies, httpx's timeouts ------

Served = Callable[[str, Timeouts, Limits], OwnedClient]


def _served_openai(url: str, timeouts: Timeouts, limits: Limits) -> OwnedClient:
    return OpenAIEmbedder("openai/text-embedding-3-small", base_url=url + "/v1",
                          api_key="sk-contract", timeouts=timeouts, limits=limits,
                          retry=RetryPolicy(max_retries=0))


def _served_gemini(url: str, timeouts: Timeouts, limits: Limits) -> OwnedClient:
    return GeminiEmbedder(env={"GEMINI_API_KEY": "gm-contract"}, base_url=url + "/v1beta",
                          timeouts=timeouts, limits=limits)


def _served_bedrock(url: str, timeouts: Timeouts, limits: Limits) -> OwnedClient:
    pytest.importorskip("botocore", reason="the Bedrock route needs botocore")
    return BedrockEmbedder(env=BEDROCK_ENV, base_url=url, timeouts=timeouts, limits=limits)


SERVED = pytest.mark.parametrize("make", [_served_openai, _served_gemini, _served_bedrock],
                                 ids=["openai", "gemini", "bedrock"])


def _served_failure(make: Served, server: ReplayServer, reply: Reply, *,
                    timeouts: Timeouts | None = None,
                    limits: Limits | None = None) -> EmbeddingError:
    server.queue(reply)
    with make(server.url, timeouts or Timeouts(), limits or Limits()) as embedder, \
            pytest.raises(EmbeddingError) as caught:
        embedder.embed(("a text",))  # type: ignore[attr-defined]
    return caught.value


@SERVED
def test_a_served_redirect_is_a_failure(make: Served, server: ReplayServer) -> None:
    e = _served_failure(make, server, Reply(
        status=307, headers=[("location", server.url + "/elsewhere")], body=b"{}")).error
    assert e.status == 307 and not e.retryable
    assert len(server.seen) == 1


@SERVED
def test_a_served_body_over_its_cap_is_limit_exceeded(make: Served,
                                                      server: ReplayServer) -> None:
    e = _served_failure(make, server, Reply(body=b" " * 50_000, chunks=1000),
                        limits=Limits(max_body=10_000)).error
    assert e.error_type == "limit_exceeded"


@SERVED
def test_a_served_long_error_body_is_cut_to_its_cap(make: Served,
                                                    server: ReplayServer) -> None:
    e = _served_failure(make, server, Reply(status=500, body=b"x" * 50_000, chunks=1000),
                        limits=Limits(max_error_body=100, max_body=10_000)).error
    assert e.status == 500 and e.retryable and e.body is not None and len(e.body) <= 100


@SERVED
def test_a_served_trickle_past_the_deadline_is_deadline_exceeded(
    make: Served, server: ReplayServer,
) -> None:
    trickle = Reply(body=b'{"data": [' + b" " * 40, chunks=4, pause=0.05)
    e = _served_failure(make, server, trickle, timeouts=Timeouts(total=0.2)).error
    assert e.error_type == "deadline_exceeded" and not e.retryable


# --- the async OpenAI-compatible embedder: the same kinds as its sync twin -----------------

_CASES: dict[str, tuple[Handler, Limits]] = {
    "redirect": (lambda _: httpx.Response(302, content=b"{}"), Limits()),
    "client error": (lambda _: httpx.Response(400, content=b'{"error": {"message": "no"}}'),
                     Limits()),
    "server error": (lambda _: httpx.Response(503, content=b"busy"), Limits()),
    "over the cap": (lambda _: httpx.Response(200, content=b" " * 5000), Limits(max_body=1000)),
    "long error": (lambda _: httpx.Response(400, content=b"x" * 5000),
                   Limits(max_error_body=100, max_body=1000)),
    "not embeddings": (lambda _: httpx.Response(200, content=b'{"nothing": true'), Limits()),
}


def _kind(e: EmbeddingError) -> tuple[int | None, str | None, bool, int]:
    return (e.error.status, e.error.error_type, e.error.retryable, len(e.error.body or ""))


@pytest.mark.anyio
@pytest.mark.parametrize("case", sorted(_CASES))
async def test_the_async_embedder_fails_as_the_sync_one_does(case: str) -> None:
    handler, limits = _CASES[case]
    want = _kind(_failure(_openai, handler, limits=limits))
    async with AsyncOpenAIEmbedder(
        "openai/text-embedding-3-small", api_key="sk-contract", limits=limits,
        retry=RetryPolicy(max_retries=0),
        client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
    ) as embedder:
        with pytest.raises(EmbeddingError) as caught:
            await embedder.embed(("a text",))
    assert _kind(caught.value) == want
