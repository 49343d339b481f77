"""The HTTP transport: one attempt of one model call over httpx, sync and async.

Both providers drive the same pure `Exchange` (providers/exchange.py: encode, classify
the response head, feed bytes to the codec, classify transport failures), so the two
paths cannot drift, and `HttpProviderBase` (providers/common.py) holds their settings and
requests. `AsyncHttpProvider` is written once (providers/_async/http.py) and
`HttpProvider` generated from it by `scripts/unasync.py`; how each bounds its waits by
the deadline is in `_async/bounded.py` and `_sync/bounded.py`. Retrying is not done here:
the loop's RetryPolicy reads `ApiError.retryable` and `retry_after`. Closing the event
iterator early closes the response and frees the connection.

Bounded: every call has a total deadline (`Timeouts.total`, from connecting to the last
byte) besides httpx's per-phase timeouts, and what it reads is capped (`Limits`).
Hitting either is a typed `ApiError` ("deadline_exceeded", "limit_exceeded"), never a
hang or an unbounded buffer.
"""

from interpreters.providers._async.http import AsyncHttpProvider
from interpreters.providers._sync.http import HttpProvider
from interpreters.providers.exchange import (
    DEADLINE_EXCEEDED,
    MAX_ERROR_BODY,
    Endpoint,
    Timeouts,
)
from interpreters.providers.table import check_base_url

__all__ = [
    "DEADLINE_EXCEEDED",
    "MAX_ERROR_BODY",
    "AsyncHttpProvider",
    "Endpoint",
    "HttpProvider",
    "Timeouts",
    "check_base_url",
]
