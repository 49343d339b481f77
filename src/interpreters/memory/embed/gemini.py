"""Gemini embeddings as the memory processors' `Embedder` (interpreters/memory/store.py).

`GeminiEmbedder` posts `batchEmbedContents` calls (at most `EMBED_BATCH` texts each) to
the `google` route's base URL with its key in the `x-goog-api-key` header, as the chat
calls do. Every call has httpx's per-phase timeouts and a total deadline (`Timeouts`),
and what it reads is capped (`Limits.max_body`, `max_error_body`); a failure is a
`ProviderError` with a typed `ApiError` (classified as for a model call, the key
scrubbed from it), never a partial answer. It does not retry: its caller decides.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import get_args

import httpx

from interpreters.providers.errors import classify_response, request_id_of
from interpreters.providers.exchange import DEADLINE_EXCEEDED, Timeouts, scrubbed
from interpreters.providers.gemini import (
    EMBED_BATCH,
    EmbedTask,
    decode_embeddings,
    embed_path,
    encode_embeddings,
)
from interpreters.providers.limits import Limits, limit_exceeded
from interpreters.providers.owned_client import OwnedClient
from interpreters.providers.provider import ProviderError
from interpreters.providers.routes import provider_config
from pipeline.values.model import ApiError

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
        deadline = self._clock() + self.timeouts.total
        status, request_id, failure, data = 0, None, None, b""
        try:
            with self._client.stream("POST", self._url, content=body, headers=headers,
                                     timeout=self.timeouts.httpx(self.timeouts.total)) as r:
                status, request_id = r.status_code, request_id_of(r.headers)
                failed = status >= 400
                data = self._read(r.iter_bytes(), failed, deadline, status, request_id)
                if failed:
                    failure = classify_response(status, r.headers, data, now=time.time(),
                                                reason=r.reason_phrase)
        except httpx.HTTPError as e:
            timeout = isinstance(e, httpx.TimeoutException)
            failure = ApiError(
                status=status or None, message=f"{type(e).__name__}: {e or 'no detail'}",
                error_type="timeout" if timeout else "connection_error",
                request_id=request_id, retryable=True,
            )
        if failure is not None:
            # Raised outside the except block: the httpx error (its request holds the
            # key header) must not ride along as __context__.
            raise scrubbed(self._endpoint.api_key, failure)
        return decode_embeddings(data, count=len(texts), dimensions=self.dimensions,
                                 status=status, request_id=request_id)

    def _read(self, chunks: Iterator[bytes], failed: bool, deadline: float, status: int,
              request_id: str | None) -> bytes:
        cap = self.limits.max_error_body if failed else self.limits.max_body
        buf = bytearray()
        for chunk in chunks:
            buf += chunk
            if len(buf) > cap:
                if failed:
                    return bytes(buf[:cap])  # enough of an error to say what it was
                raise limit_exceeded(
                    status, f"the embeddings response is larger than its cap of {cap} bytes "
                    "(Limits.max_body)", started=False, request_id=request_id)
            if self._clock() > deadline:
                raise ProviderError(ApiError(
                    status=status, error_type=DEADLINE_EXCEEDED, request_id=request_id,
                    message=f"the embeddings call took longer than its deadline of "
                    f"{self.timeouts.total} s (Timeouts.total)",
                ))
        return bytes(buf)


__all__ = ["GeminiEmbedder"]
