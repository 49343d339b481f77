"""Text embeddings on Bedrock (`POST /model/{id}/invoke`), as an `Embedder` of the memory
stores (interpreters.memory): Amazon Titan Text Embeddings (one text a call) and Cohere
Embed v3 and v4 (up to 96 texts a call). The endpoint, the region, the SigV4 signing or
the Bedrock API key are the `bedrock/` route's (providers/bedrock.py); so are the rules:
every wait bounded, the body capped, an error typed, credentials never shown.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Literal, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from interpreters.memory.store import Vector
from interpreters.providers.errors import classify_response
from interpreters.providers.exchange import Endpoint, Timeouts, scrubbed
from interpreters.providers.limits import Limits
from interpreters.providers.owned_client import OwnedClient
from interpreters.providers.provider import ProviderError
from interpreters.providers.routes import provider_config
from pipeline.values.model import ApiError

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
    botocore fails here. A failed call raises `ProviderError` (retryable as the status
    says: a 429 ThrottlingException is)."""

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
        try:
            return decoder.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise self._invalid(f"the embedding response is not valid: {e}") from None

    def _invalid(self, message: str) -> ProviderError:
        return ProviderError(ApiError(status=200, message=message,
                                      error_type="invalid_response", retryable=False))

    def _post(self, body: dict[str, object]) -> bytes:
        content = msgspec.json.encode(body)
        ep = self._endpoint
        headers = {"content-type": "application/json", "accept": "application/json"}
        headers.update(ep.headers)
        if ep.api_key is not None:
            headers["authorization"] = f"Bearer {ep.api_key.reveal()}"
        if ep.sign is not None:
            headers.update(ep.sign("POST", self._url, headers, content))
        failure: ApiError | None = None
        try:
            return self._send(content, headers)
        except httpx.HTTPError as e:
            kind = "timeout" if isinstance(e, httpx.TimeoutException) else "connection_error"
            failure = ApiError(status=None, message=f"{type(e).__name__}: {e}",
                               error_type=kind, retryable=True)
        # Raised outside the except block: the httpx error's request holds the auth header.
        raise scrubbed(self._endpoint.api_key, failure)

    def _send(self, content: bytes, headers: dict[str, str]) -> bytes:
        deadline = time.monotonic() + self._timeouts.total
        cap = self._limits.max_body
        with self._client.stream("POST", self._url, content=content, headers=headers,
                                 timeout=self._timeouts.httpx(self._timeouts.total)) as r:
            buf = bytearray()
            for chunk in r.iter_bytes():
                buf += chunk
                if len(buf) > cap:
                    raise ProviderError(ApiError(
                        status=r.status_code, error_type="limit_exceeded", retryable=False,
                        message=f"the embedding response is larger than its cap of {cap} "
                        "bytes (Limits)"))
                if time.monotonic() > deadline:
                    raise ProviderError(ApiError(
                        status=r.status_code, error_type="deadline_exceeded", retryable=False,
                        message=f"the embedding call did not end within "
                        f"{self._timeouts.total:g} s (Timeouts.total)"))
            if r.status_code >= 300:
                raise scrubbed(self._endpoint.api_key, classify_response(
                    r.status_code, r.headers, bytes(buf), now=time.time(),
                    reason=r.reason_phrase))
            return bytes(buf)

