"""Text embeddings on Bedrock (`POST /model/{id}/invoke`), as an `Embedder` of the memory
stores (interpreters.memory): Amazon Titan Text Embeddings (one text a call) and Cohere
Embed v3 and v4 (up to 96 texts a call). The endpoint, the region, the SigV4 signing or
the Bedrock API key are the `bedrock/` route's (providers/bedrock.py); so are the rules:
every wait bounded, the body capped, an error typed, credentials never shown (the
exchange is embed/exchange.py's, the same for every embedder).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from interpreters.memory.embed.exchange import Bounds, EmbeddingError, decoded, invalid, post
from interpreters.memory.store import Vector
from interpreters.providers.exchange import Endpoint, Timeouts
from interpreters.providers.limits import Limits
from interpreters.providers.owned_client import OwnedClient
from interpreters.providers.routes import provider_config

_T = TypeVar("_T")
InputType = Literal["search_document", "search_query", "classification", "clustering"]
COHERE_BATCH = 96
"""Texts in one Cohere call (the API's limit)."""


class _Titan(msgspec.Struct, frozen=True):
    embedding: list[float]


class _CohereFloats(msgspec.Struct, frozen=True):
    floats: list[list[float]] = msgspec.field(name="float")


class _Cohere(msgspec.Struct, frozen=True):
    embeddings: list[list[float]] | _CohereFloats
    """A list (v3), or by type when `embedding_types` was asked (v4)."""


_titan = msgspec.json.Decoder(_Titan)
_cohere = msgspec.json.Decoder(_Cohere)


class BedrockEmbedder(OwnedClient):
    """Texts in, one vector each out, from a Bedrock embedding model:
    `BedrockEmbedder("amazon.titan-embed-text-v2:0", dimensions=256)` or
    `BedrockEmbedder("cohere.embed-english-v3", input_type="search_query")`. Configured
    as `bedrock/` model ids are (`AWS_REGION`, the credential chain or
    `AWS_BEARER_TOKEN_BEDROCK`; `base_url=`, `api_key=`, `env=`); a missing region or
    botocore fails here. A failed call raises `EmbeddingError` (a `ProviderError`,
    retryable as the status says: a 429 ThrottlingException is)."""

    def __init__(
        self,
        model: str = "amazon.titan-embed-text-v2:0",
        *,
        dimensions: int | None = None,
        input_type: InputType = "search_document",
        base_url: str | None = None,
        api_key: str | None = None,
        env: Mapping[str, str] | None = None,
        client: httpx.Client | None = None,
        timeouts: Timeouts | None = None,
        limits: Limits | None = None,
    ) -> None:
        self._cohere = "cohere." in model
        if not self._cohere and "titan-embed" not in model:
            raise ValueError(f"{model!r} is not a Titan or Cohere embedding model id "
                             "(amazon.titan-embed-text-v2:0, cohere.embed-english-v3...)")
        if dimensions is not None and (type(dimensions) is not int or dimensions < 1):
            raise ValueError(f"dimensions must be a positive int, got {dimensions!r}")
        if input_type not in ("search_document", "search_query", "classification",
                              "clustering"):
            raise ValueError(f"unknown input_type {input_type!r}")
        cfg = provider_config(f"bedrock/{model}", base_url=base_url, api_key=api_key, env=env)
        self._endpoint: Endpoint = cfg.endpoint
        self._url = cfg.endpoint.url(f"/model/{quote(model, safe='')}/invoke")
        self.model = model
        self.dimensions = dimensions
        self.input_type = input_type
        self._timeouts = timeouts or Timeouts()
        self._limits = limits or Limits()
        self._own = client is None
        self._client = client or httpx.Client(timeout=self._timeouts.httpx())

    def __repr__(self) -> str:
        return f"BedrockEmbedder({self.model!r}, base_url={self._endpoint.base_url!r})"

    def embed(self, texts: tuple[str, ...]) -> tuple[Vector, ...]:
        if self._cohere:
            out: list[Vector] = []
            for at in range(0, len(texts), COHERE_BATCH):
                out += self._cohere_call(texts[at:at + COHERE_BATCH])
            return tuple(out)
        return tuple(self._titan_call(t) for t in texts)

    def _titan_call(self, text: str) -> Vector:
        body: dict[str, object] = {"inputText": text, "normalize": True}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        return tuple(self._decode(_titan, self._post(body)).embedding)

    def _cohere_call(self, texts: tuple[str, ...]) -> list[Vector]:
        body: dict[str, object] = {"texts": list(texts), "input_type": self.input_type}
        if self.dimensions is not None:
            body["output_dimension"] = self.dimensions  # v4
        got = self._decode(_cohere, self._post(body)).embeddings
        vectors = got.floats if isinstance(got, _CohereFloats) else got
        if len(vectors) != len(texts):
            raise self._invalid(f"{len(vectors)} embeddings for {len(texts)} texts")
        return [tuple(v) for v in vectors]

    def _decode(self, decoder: msgspec.json.Decoder[_T], body: bytes) -> _T:
        return decoded(decoder, body)

    def _invalid(self, message: str) -> EmbeddingError:
        return invalid(200, message)

    def _post(self, body: dict[str, object]) -> bytes:
        content = msgspec.json.encode(body)
        ep = self._endpoint
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers.update(ep.headers)
        if ep.api_key is not None:
            headers["authorization"] = f"Bearer {ep.api_key.reveal()}"
        if ep.sign is not None:
            headers.update(ep.sign("POST", self._url, headers, content))
        bounds = Bounds(ep.api_key, self._timeouts, self._limits)
        return post(self._client, bounds, self._url, content, headers)[0]
