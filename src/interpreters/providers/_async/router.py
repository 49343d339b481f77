"""The async provider for one router id, and the async resolver that serves them all
(all but their waits is in providers/common.py)."""

from __future__ import annotations

import httpx

from interpreters.providers._async.http import AsyncHttpProvider
from interpreters.providers.common import ResolverBase


class AsyncResolver(ResolverBase[httpx.AsyncClient, AsyncHttpProvider]):
    """The `AsyncProviderResolver` of the async interpreter: one provider per router id,
    reused, all sharing one `httpx.AsyncClient` (closed by `aclose()`)."""

    _provider_class = AsyncHttpProvider

    async def aclose(self) -> None:
        if self._client is not None and self._own:
            await self._client.aclose()
            self._client = None
        self._providers.clear()


resolve_async_provider = AsyncHttpProvider.for_model
"""The `AsyncHttpProvider` for a router id. Fails before any request if misconfigured."""
