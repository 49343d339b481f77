"""Gemini embeddings as the memory processors' `Embedder` (interpreters/memory/store.py).

`GeminiEmbedder` posts `batchEmbedContents` calls (at most `EMBED_BATCH` texts each) to
the `google` route's base URL with its key in the `x-goog-api-key` header, as the chat
calls do. Every call has httpx's per-phase timeouts and a total deadline (`Timeouts`),
and what it reads is capped (`Limits.max_body`, `max_error_body`); a failure is an
`EmbeddingError` with a typed `ApiError` (embed/exchange.py: the same rules for every
embedder, the key scrubbed), never a partial answer. It does not retry: its caller
decides.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import get_args

import httpx
import msgspec

from interpreters.memory.embed.exchange import INVALID_RESPONSE, Bounds, post
from interpreters.providers.errors import request_id_of
from interpreters.providers.exchange import Timeouts
from interpreters.providers.gemini import (
    EMBED_BATCH,
    EmbedTask,
    decode_embeddings,
    embed_path,
    encode_embeddings,
)
from interpreters.providers.limits import Limits
from interpreters.providers.owned_client import OwnedClient
from interpreters.providers.provider import ProviderError
from interpreters.providers.routes import provider_config

Vector = tuple[float, ...]


class GeminiEmbedder(OwnedClient):
    """Texts in, one vector each out, from Gemini's embedding models (sync)."""

    def __init__(
        self,
        model: str = "gemini-embedding-001",
        *,
        dimensions: int | None = None,
        task_type: EmbedTask | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        env: Mapping[str, str] | None = None,
        client: httpx.Client | None = None,
        timeouts: Timeouts | None = None,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if dimensions is not None and (type(dimensions) is not int or dimensions < 1):
            raise ValueError(f"dimensions must be a positive int, got {dimensions!r}")
        if task_type is not None and task_type not in get_args(EmbedTask):
            raise ValueError(f"task_type must be one of {', '.join(get_args(EmbedTask))}, "
                             f"not {task_type!r}")
        # The key and base URL as for `google/` chat models (GOOGLE_API_KEY, GEMINI_API_KEY,
        # GOOGLE_BASE_URL); a missing key fails here, before any request.
        cfg = provider_config(f"google/{model}", api_key=api_key, base_url=base_url, env=env)
        self.model = cfg.model
        self.dimensions = dimensions
        self.task_type = task_type
        self._endpoint = cfg.endpoint
        self._url = cfg.endpoint.url(embed_path(cfg.model))
        self.timeouts = timeouts or Timeouts()
        self.limits = limits or Limits()
        self._clock = clock
        self._own = client is None
        self._client = client or httpx.Client(timeout=self.timeouts.httpx())

    def __repr__(self) -> str:
        return (f"GeminiEmbedder(model={self.model!r}, "
                f"base_url={self._endpoint.base_url!r}, dimensions={self.dimensions!r})")

    def embed(self, texts: tuple[str, ...]) -> tuple[Vector, ...]:
        if type(texts) is not tuple or any(type(t) is not str for t in texts):
            raise TypeError("embed takes a tuple of strings")
        out: list[Vector] = []
        for i in range(0, len(texts), EMBED_BATCH):
            out.extend(self._batch(texts[i:i + EMBED_BATCH]))
        return tuple(out)

    def _batch(self, texts: tuple[str, ...]) -> tuple[Vector, ...]:
        body = encode_embeddings(texts, model=self.model, dimensions=self.dimensions,
                                 task_type=self.task_type)
        key = self._endpoint.api_key
        headers = {"content-type": "application/json", "accept": "application/json"}
        if key is not None:
            headers["x-goog-api-key"] = key.reveal()
        bounds = Bounds(key, self.timeouts, self.limits)
        data, reply = post(self._client, bounds, self._url, body, headers, now=self._clock)
        request_id = request_id_of(reply.headers)
        try:
            return decode_embeddings(data, count=len(texts), dimensions=self.dimensions,
                                     status=reply.status, request_id=request_id)
        except ProviderError as e:
            # An error object in a 200 keeps its kind; a body that is not the embeddings
            # asked for is `invalid_response`, not retried (as from every embedder).
            error = e.error
            if error.error_type in (None, INVALID_RESPONSE):
                error = msgspec.structs.replace(error, error_type=INVALID_RESPONSE,
                                                retryable=False)
            raise bounds.scrubbed(error) from None


__all__ = ["GeminiEmbedder"]
