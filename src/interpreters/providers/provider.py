"""What an interpreter needs of a model provider: one attempt at one model call.

A provider opens a stream of `ModelEvent`s for a `ModelRequest`. It makes exactly one
attempt: retrying transient failures is the loop's job (a pure policy, so the simulator
runs it in virtual time). It reports failure by raising `ProviderError` with a typed
`ApiError` whose `retryable` and `retry_after` say what the retry policy should do.
Closing the iterator early must release the connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Protocol

from pipeline.values.chunks import ModelEvent
from pipeline.values.model import ApiError, ModelRequest


class ProviderError(Exception):
    """A model call failed; `error` says how. Never carries credentials."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(str(error))
        self.error = error


class Provider(Protocol):
    """A synchronous model provider."""

    def stream(self, request: ModelRequest) -> Iterator[ModelEvent]: ...


class AsyncProvider(Protocol):
    """An asynchronous model provider (for the anyio interpreter)."""

    def astream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...


class AsyncBatchProvider(AsyncProvider, Protocol):
    """An async provider that can also hand out its events in batches (say, those
    decoded from one network read; `AsyncHttpProvider` does). The async interpreter
    reads `astream_batches` when a provider has it, handing a batch's events to the loop
    without an await per event; `astream` must give the same events one by one."""

    def astream_batches(self, request: ModelRequest) -> AsyncIterator[Sequence[ModelEvent]]: ...


ProviderResolver = Callable[[str], Provider]
"""Maps a model id (`openai/gpt-4o-mini`) to the provider that serves it."""

AsyncProviderResolver = Callable[[str], AsyncProvider]
