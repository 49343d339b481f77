"""What one model call may cost at most: bytes read. (Its time is bounded by `Timeouts`.)

Every buffer that holds what a server sends has a cap, so an endless or hostile
response ends the call with a typed error (`ApiError.error_type == "limit_exceeded"`,
not retryable: a retry would meet the same response) instead of growing without bound.
The defaults are generous; a test or a small deployment can make them small.
"""

from __future__ import annotations

import msgspec

from interpreters.providers.errors import broken_stream
from interpreters.providers.provider import ProviderError
from interpreters.providers.sse import DEFAULT_MAX_EVENT

LIMIT_EXCEEDED = "limit_exceeded"


class Limits(msgspec.Struct, frozen=True):
    """Bytes (characters for one SSE line or event) one model call may read."""

    max_error_body: int = 64 << 10
    """Of an error response: read for its message, the rest is dropped (64 KiB)."""
    max_body: int = 32 << 20
    """Of a non-streamed (JSON) response (32 MiB)."""
    max_event: int = DEFAULT_MAX_EVENT
    """Of one SSE line or one event's data (8 MiB)."""
    max_stream: int = 128 << 20
    """Of a whole streamed response (128 MiB)."""

    def __post_init__(self) -> None:
        for name in ("max_error_body", "max_body", "max_event", "max_stream"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Limits.{name} must be a positive number of bytes")


def limit_exceeded(
    status: int, what: str, *, started: bool, request_id: str | None
) -> ProviderError:
    """The call read more than a cap allows: ends it, never retried."""
    e = broken_stream(
        status, what, started=started, error_type=LIMIT_EXCEEDED, request_id=request_id
    )
    return ProviderError(msgspec.structs.replace(e, retryable=False))
