"""A scripted embedder for tests and the simulator: vectors per text, else a
`HashEmbedder`'s. Apart from the HTTP embedders, so that the simulator's imports need no
HTTP client (`interpreters.testing`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import anyio.lowlevel

from interpreters.memory.store import (
    AsyncEmbedder,
    Embedder,
    EmbeddingError,
    HashEmbedder,
    Vector,
)
from interpreters.providers.provider import ProviderError
from pipeline.values.model import ApiError

__all__ = ["ScriptedEmbedder"]


class ScriptedEmbedder:
    """An `Embedder` for tests and the simulator: `vectors` per text, other texts by
    `fallback` (a `HashEmbedder` of the scripted vectors' size by default; None: an
    unscripted text is an `EmbeddingError`). `errors` are raised by the first calls, one
    each, before any vector is given. Every call's texts are kept in `calls`."""

    def __init__(
        self,
        vectors: Mapping[str, Sequence[float]] | None = None,
        *,
        fallback: Embedder | str | None = "hash",
        errors: Sequence[ProviderError] = (),
    ) -> None:
        scripted = {t: tuple(float(x) for x in v) for t, v in (vectors or {}).items()}
        dims = {len(v) for v in scripted.values()}
        if len(dims) > 1 or 0 in dims:
            raise ValueError("the scripted vectors must all have one dimension count (> 0)")
        self.vectors = scripted
        self.dim = dims.pop() if dims else 64
        if fallback == "hash":
            self.fallback: Embedder | None = HashEmbedder(max(self.dim, 2))
        elif fallback is None or hasattr(fallback, "embed"):
            self.fallback = fallback if not isinstance(fallback, str) else None
        else:
            raise TypeError("fallback is an Embedder, None or 'hash'")
        self._errors = list(errors)
        self.calls: list[tuple[str, ...]] = []

    def embed(self, texts: tuple[str, ...]) -> tuple[Vector, ...]:
        texts = tuple(texts)
        self.calls.append(texts)
        if self._errors:
            raise self._errors.pop(0)
        missing = tuple(t for t in texts if t not in self.vectors)
        if missing and self.fallback is None:
            raise EmbeddingError(ApiError(
                status=None, message=f"no scripted vector for {missing[0]!r}",
                error_type="scripted"))
        made = dict(zip(missing, self.fallback.embed(missing), strict=True)) if (
            missing and self.fallback is not None) else {}
        return tuple(self.vectors[t] if t in self.vectors else made[t] for t in texts)

    def as_async(self) -> AsyncEmbedder:
        """This embedder as an `AsyncEmbedder` (the same script and `calls`)."""
        return _AsyncScripted(self)


class _AsyncScripted:
    def __init__(self, scripted: ScriptedEmbedder) -> None:
        self.scripted = scripted

    async def embed(self, texts: tuple[str, ...]) -> tuple[Vector, ...]:
        await anyio.lowlevel.checkpoint()
        return self.scripted.embed(texts)
