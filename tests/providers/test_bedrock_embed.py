"""Bedrock embeddings as an `Embedder` of the memory stores: recorded Titan and Cohere
exchanges replayed over httpx's MockTransport (the request sent means what the recorded
client sent, the vectors are the recorded ones), batching, signing, typed errors."""

from __future__ import annotations

import json

import httpx
import pytest

pytest.importorskip("botocore", reason="the Bedrock route needs botocore (the bedrock extra)")

from interpreters.memory import Embedder
from interpreters.memory.embed.bedrock import COHERE_BATCH, BedrockEmbedder
from interpreters.providers.provider import ProviderError
from interpreters.providers.routes import ProviderConfigError
from tests.providers.cassettes import Recorded, load, traffic_dir

ROOT = traffic_dir()
EMBED = "pydantic+pydantic-ai/tests/cassettes/test_embeddings/TestBedrock."
ENV = {"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
       "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}


def _replaying(ex: Recorded, seen: list[httpx.Request]) -> httpx.Client:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(ex.status, headers=dict(ex.headers), content=ex.body)

    return httpx.Client(transport=httpx.MockTransport(handle))


@pytest.mark.parametrize(("name", "model", "kw"), [
    ("test_titan_v2_with_dimensions", "amazon.titan-embed-text-v2:0", {"dimensions": 256}),
    ("test_cohere_v3_minimal", "cohere.embed-english-v3", {"input_type": "search_query"}),
    ("test_cohere_v4_minimal", "cohere.embed-v4:0", {"input_type": "search_query"}),
])
def test_recorded_embeddings_replay(name: str, model: str, kw: dict[str, object]) -> None:
    [ex] = load(ROOT, f"{EMBED}{name}.yaml").exchanges
    assert ex.request is not None
    texts = ex.request.get("texts")
    text = str(ex.request.get("inputText") or (texts[0] if isinstance(texts, list) else ""))
    seen: list[httpx.Request] = []
    with _replaying(ex, seen) as client:
        embedder: Embedder = BedrockEmbedder(model, env=ENV, client=client, **kw)  # type: ignore[arg-type]
        [vector] = embedder.embed((text,))
    recorded = json.loads(ex.body)
    want = recorded["embedding"] if "embedding" in recorded else recorded["embeddings"]
    want = want["float"][0] if isinstance(want, dict) else want[0] if "embeddings" in recorded \
        else want
    assert vector == tuple(want) and len(vector) >= 256
    [request] = seen
    assert str(request.url) == ex.uri
    sent = json.loads(request.content)
    expected = {k: v for k, v in ex.request.items() if k != "truncate"}  # NONE: the default
    assert sent == expected
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")


def test_cohere_texts_go_in_batches_of_its_limit() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        texts = json.loads(request.content)["texts"]
        return httpx.Response(200, json={"embeddings": [[float(len(t)), 0.5] for t in texts]})

    texts = tuple("x" * (i % 7 + 1) for i in range(COHERE_BATCH + 3))
    with httpx.Client(transport=httpx.MockTransport(handle)) as client:
        out = BedrockEmbedder("cohere.embed-english-v3", env=ENV, client=client).embed(texts)
    assert [len(json.loads(r.content)["texts"]) for r in seen] == [COHERE_BATCH, 3]
    assert out == tuple((float(len(t)), 0.5) for t in texts)


def _failing(response: httpx.Response, **kw: object) -> ProviderError:
    with httpx.Client(transport=httpx.MockTransport(lambda r: response)) as client:
        embedder = BedrockEmbedder(client=client, env=ENV, **kw)  # type: ignore[arg-type]
        with pytest.raises(ProviderError) as info:
            embedder.embed(("hi",))
    return info.value


def test_errors_are_typed_and_throttling_is_retryable() -> None:
    err = _failing(httpx.Response(
        429, headers={"x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/"},
        json={"message": "Too many requests"})).error
    assert (err.status, err.error_type, err.retryable, err.message) == (
        429, "ThrottlingException", True, "Too many requests")
    err = _failing(httpx.Response(400, headers={"x-amzn-errortype": "ValidationException"},
                                  json={"message": "Malformed input request"})).error
    assert (err.status, err.error_type, err.retryable) == (400, "ValidationException", False)
    err = _failing(httpx.Response(200, json={"nope": 1})).error
    assert err.error_type == "invalid_response"


def test_a_bedrock_api_key_is_a_bearer_token_and_never_shown() -> None:
    key = "ABSKQmVkcm9ja0FQSUtleS1SECRET"
    echo = httpx.Response(403, json={"message": f"bad token {key}"})
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return echo

    with httpx.Client(transport=httpx.MockTransport(handle)) as client:
        embedder = BedrockEmbedder(client=client, env={"AWS_REGION": "us-east-1"}, api_key=key)
        assert key not in repr(embedder)
        with pytest.raises(ProviderError) as info:
            embedder.embed(("hi",))
    assert seen[0].headers["authorization"] == f"Bearer {key}"
    assert key not in info.value.error.message and key not in (info.value.error.body or "")


def test_settings_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="not a Titan or Cohere embedding model"):
        BedrockEmbedder("amazon.nova-micro-v1:0", env=ENV)
    with pytest.raises(ValueError, match="dimensions"):
        BedrockEmbedder(dimensions=0, env=ENV)
    with pytest.raises(ValueError, match="input_type"):
        BedrockEmbedder(input_type="nope", env=ENV)  # type: ignore[arg-type]
    with pytest.raises(ProviderConfigError, match="AWS_REGION"):
        BedrockEmbedder(env={})
